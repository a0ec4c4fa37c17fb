"""The store queue split over shards on one Redis: each worker process queues its records in
a home shard of its own, writers take from their own shard, every process gives back a dead
writer's batch and sends writers to due batches in every shard, and nothing is lost."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from crawler_tasks.stages.dispatcher import drain, housekeeping, write_turn
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.state.store_queue import StoreEntry
from tests.helpers import token
from tests.state.test_store_queue import finish_pages, queue_rt


@pytest.fixture
def two_processes(tmp_path) -> Iterator[tuple[Runtime, Runtime]]:
    """Two runtimes on one Redis and one prefix, as two worker processes have."""
    prefix = f"ss{token()}"
    made = [queue_rt(str(tmp_path / "pages.db"), key_prefix=prefix, store_shards=4, store_batch=5,
                     store_flush_s=0.3, store_lease_s=0.5) for _ in range(2)]
    yield made[0], made[1]
    for rt in made:
        rt.close()


def pending(rt: Runtime, shard: int) -> list[StoreEntry]:
    return [StoreEntry.decode(raw) for raw in rt.redis.lrange(rt.keys.store_pending(shard), 0, -1)]


def test_each_process_queues_in_a_home_shard_of_its_own_and_writers_take_from_theirs(two_processes):
    a, b = two_processes
    finish_pages(a, 3, crawl_id="ca")
    finish_pages(b, 2, crawl_id="cb")
    assert (a.store_queue.home(), b.store_queue.home()) == (0, 2)  # far apart: other masters
    assert {e.crawl_id for e in pending(a, 0)} == {"ca"} and len(pending(a, 0)) == 3
    assert {e.crawl_id for e in pending(a, 2)} == {"cb"} and len(pending(a, 2)) == 2
    assert pending(a, 1) == pending(a, 3) == []
    assert a.store_queue.depth().pending == 5 == b.store_queue.depth().pending
    writer = a.store_queue.writer(2)
    assert writer.endswith(".2") and a.keys.store_shard(writer) == 2
    assert write_turn(a, writer) == 2  # shard 2's records, written by a process whose home is 0
    assert a.stats.read("cb")["stored"] == 2 and a.crawls.outstanding("cb") == 0
    assert a.crawls.outstanding("ca") == 3  # still waiting in shard 0
    assert write_turn(b, b.store_queue.writer(0)) == 3 and a.stats.read("ca")["stored"] == 3


def test_a_dead_writers_batch_comes_back_in_its_shard_and_any_process_sends_a_writer_to_it(two_processes):
    a, b = two_processes
    s = a.settings
    finish_pages(b, 4, crawl_id="cb")
    dead = b.store_queue.writer()
    assert len(b.store_queue.take(dead, 5, s.store_flush_s, s.store_lease_s, now=True)) == 4  # then killed
    assert b.store_queue.depth().to_dict() == {"pending": 0, "delayed": 0, "taken": 4, "writers": 1}
    time.sleep(s.store_lease_s + 0.1)
    home = b.store_queue.home()
    assert a.store_queue.home() != home
    housekeeping(a)  # a's once-a-second look gives the batch back in b's shard, due at once
    assert len(pending(a, home)) == 4
    [leased] = [c.decode() for c in a.redis.zrange(a.keys.store_leases(home), 0, -1)]  # a sent a writer
    assert a.keys.store_shard(leased) == home
    assert write_turn(a, leased) == 4
    assert a.stats.read("cb")["stored"] == 4 and a.crawls.outstanding("cb") == 0
    assert not a.redis.exists(a.keys.store_taken(dead))


def test_a_store_that_is_down_gets_its_records_back_in_their_shard(tmp_path):
    rt = queue_rt("elasticsearch://127.0.0.1:9/pages", key_prefix=f"ss{token()}", store_shards=4,
                  retry_backoff=0.05, store_max_retries=3)
    try:
        finish_pages(rt, 3)
        home = rt.store_queue.home()
        assert write_turn(rt, rt.store_queue.writer()) == 3
        assert rt.redis.zcard(rt.keys.store_delayed(home)) == 3
        assert sum(rt.redis.zcard(rt.keys.store_delayed(k)) for k in range(4)) == 3
        assert rt.crawls.outstanding("c1") == 3  # never lost while its store is down
    finally:
        rt.close()


def test_a_worker_that_stops_drains_its_own_shard_first_then_the_others(two_processes):
    a, b = two_processes
    finish_pages(a, 3, crawl_id="ca")
    finish_pages(b, 6, crawl_id="cb")
    assert drain(a, 10.0) == 9
    assert a.stats.read("ca")["stored"] == 3 and a.stats.read("cb")["stored"] == 6
    assert a.store_queue.depth().to_dict() == {"pending": 0, "delayed": 0, "taken": 0, "writers": 0}
