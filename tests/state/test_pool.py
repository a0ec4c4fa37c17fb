"""The lean connection pool: replies never go to the wrong command, a closed connection
opens again, and threads share the pool as they share redis-py's."""

from __future__ import annotations

import hashlib
import inspect
import threading
import time

import redis

from crawler_tasks.state.connection import redis_from_url
from crawler_tasks.state.pool import IDLE_CHECK_S, LeanPool
from tests.helpers import REDIS, flush

DB = 10


def test_the_state_client_uses_the_lean_pool():
    assert isinstance(redis_from_url(f"{REDIS}/{DB}").connection_pool, LeanPool)


def test_a_command_cut_off_by_its_timeout_does_not_hand_its_late_reply_to_the_next_command():
    flush(DB)
    client = redis.Redis.from_pool(LeanPool.from_url(f"{REDIS}/{DB}", socket_timeout=0.2))
    client.set("value", "mine")
    try:
        # Waits 0.5 s on a list that fills at 0.3 s: the client gives up at 0.2 s.
        threading.Timer(0.3, lambda: redis.Redis.from_url(f"{REDIS}/{DB}").rpush("empty", "x")).start()
        client.blpop(["empty"], timeout=0.5)
        raise AssertionError("the BLPOP should have timed out")
    except redis.TimeoutError:
        pass
    time.sleep(0.5)  # the BLPOP's reply has reached the socket, if it is still open
    assert client.get("value") == b"mine"
    assert client.lrange("empty", 0, -1) == [b"x"]  # the cut-off BLPOP took nothing
    assert len(client.connection_pool._available_connections) == 1


def test_a_connection_the_server_closed_while_idle_opens_again_on_the_next_command():
    flush(DB)
    client = redis_from_url(f"{REDIS}/{DB}")
    client.set("k", "v")
    own = client.client_id()
    killed = redis.Redis.from_url(f"{REDIS}/{DB}").client_kill_filter(_id=own)
    assert killed == 1
    time.sleep(IDLE_CHECK_S)  # as after a restart: a connection idle this long is looked at first
    assert client.get("k") == b"v"
    assert client.client_id() != own


def test_threads_share_the_pool_without_losing_a_command():
    flush(DB)
    client = redis_from_url(f"{REDIS}/{DB}")

    def add() -> None:
        for _ in range(200):
            with client.pipeline(transaction=False) as pipe:
                pipe.incr("n")
                pipe.incr("m")
                pipe.execute()
            client.incr("n")

    threads = [threading.Thread(target=add) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (int(client.get("n")), int(client.get("m"))) == (6400, 3200)
    pool = client.connection_pool
    assert not pool._in_use_connections
    assert 1 <= len(pool._available_connections) <= 16


#: (qualified name, first 16 hex digits of the source's SHA-256) of what LeanPool replaces or
#: calls in redis-py 7.1: when one changes, read it against crawler_tasks/state/pool.py.
SURFACE = [
    ("ConnectionPool.get_connection", "f57a50f467dff1cc"),
    ("ConnectionPool.release", "39571b0fd74e2320"),
    ("ConnectionPool._checkpid", "819459a40e6f5cc2"),
    ("ConnectionPool.make_connection", "154313884fd46de8"),
    ("ConnectionPool.owns_connection", "36f1b33dba5d4c5a"),
]


def test_the_redis_py_pool_methods_the_lean_pool_replaces_are_as_they_were_read():
    moved = []
    for qualname, digest in SURFACE:
        cls_name, name = qualname.split(".")
        source = inspect.getsource(getattr(getattr(redis, cls_name), name))
        if hashlib.sha256(source.encode()).hexdigest()[:16] != digest:
            moved.append(qualname)
    assert moved == [], f"redis-py changed under state/pool.py: {moved}"
