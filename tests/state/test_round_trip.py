"""A round trip carries scripts by digest, and runs one Redis does not know on its own."""

from __future__ import annotations

import pytest
import redis

from crawler_tasks.state.round_trip import RoundTrip, queue_script
from tests.helpers import REDIS, flush

DB = 12


@pytest.mark.parametrize("atomic", [False, True])
def test_a_script_redis_forgot_still_runs_once_and_the_rest_of_the_round_trip_applies(atomic):
    flush(DB)
    client = redis.Redis.from_url(f"{REDIS}/{DB}")
    script = client.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    trip = RoundTrip(client)
    for _ in range(2):  # unknown to Redis, then known
        client.script_flush() if _ == 0 else None
        with trip(atomic=atomic) as pipe:
            pipe.incr("before")
            queue_script(pipe, script, ["counted"], [5])
            pipe.incr("after")
    assert [int(client.get(k)) for k in ("before", "counted", "after")] == [2, 10, 2]


def test_any_other_error_in_the_round_trip_is_raised():
    flush(DB)
    client = redis.Redis.from_url(f"{REDIS}/{DB}")
    client.set("text", "x")
    with pytest.raises(redis.ResponseError), RoundTrip(client)() as pipe:
        pipe.incr("text")
