"""However a crawl task ends, it leaves its crawl exactly once: the crawl drains, nothing hangs.

Each path runs through real worker processes: an unexpected exception, a
state Redis that refuses writes, store retries running out, a worker that dies
under the same task again and again, and a crawl that stops moving.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import EmbeddedRedis, Workers, wait_drained
from crawler_tasks.core.politeness import host_key
from crawler_tasks.core.settings import Settings
from crawler_tasks.service import delivery
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.dead_letters import dead_letters
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.helpers import REDIS, flush, token
from tests.holds import assert_nothing_held

TASKS_DB = 9


def own_cluster(tmp_path: Path, **overrides) -> tuple[Runtime, Settings]:
    settings = Settings.from_env(broker_url=f"{REDIS}/{TASKS_DB}", key_prefix=f"tk{token()}",
                                 redis_url=overrides.pop("redis_url", f"{REDIS}/{TASKS_DB}"),
                                 store=str(tmp_path / "pages.db"), **overrides)
    return Runtime(settings, create_app(settings)), settings


def start(settings: Settings, tmp_path: Path, name: str, **options) -> Workers:
    return Workers(settings, name=f"{name}{token()}@%h", log_path=str(tmp_path / f"{name}.log"),
                   **options).start()


def drained(rt: Runtime, crawl_id: str) -> bool:
    return rt.crawls.outstanding(crawl_id) == 0


def test_a_task_raising_an_unexpected_error_is_released_and_counted(rt, worker, site):
    crawl_id, t = f"err{token()}", token()
    submit_requests(rt, build_requests(f"{site.url}/page/{t}", crawl_id=crawl_id),
                    store="nosuch://anywhere")  # every store write raises UnknownStore
    wait_drained(lambda: drained(rt, crawl_id), timeout=30, workers=worker)
    stats = rt.stats.read(crawl_id)
    assert stats["errors"] == stats["errors/UnknownStore"] == 1
    assert "stored" not in stats and "store/retries" not in stats  # retrying cannot help it
    [letter] = dead_letters(rt, crawl_id)  # the record is kept, not dropped
    assert letter["store"] == "nosuch://anywhere" and letter["record"]["url"].endswith(t)
    [error] = rt.crawls.errors(crawl_id)
    assert error.startswith("UnknownStore: unknown store 'nosuch://anywhere'") and t in error
    shown = subprocess.run([sys.executable, "-m", "crawler_tasks.cli.main", "stats", "--crawl-id", crawl_id],
                           capture_output=True, text=True, timeout=60).stdout
    assert f"error: {error}" in shown and "errors/UnknownStore" in shown
    assert_nothing_held(rt, [host_key(site.url)])


def test_state_redis_refusing_writes_delays_the_crawl_but_loses_nothing(site, tmp_path):
    flush(TASKS_DB)
    state = EmbeddedRedis().start()
    rt, settings = own_cluster(tmp_path, redis_url=state.url, retry_backoff=0.2,
                               retry_backoff_max=2, download_timeout=10)
    crawl_id, t, pages = "oom", token(), 30
    submit_requests(rt, build_requests(f"{site.url}/tree/{t}/0?size={pages}&delay=0.1",
                                       crawl_id=crawl_id))
    workers = start(settings, tmp_path, "oom", concurrency=4)
    try:
        wait_drained(lambda: rt.stats.read(crawl_id).get("status/200", 0) >= 5, timeout=30,
                     workers=workers)
        admin = redis.Redis.from_url(state.url)
        admin.config_set("maxmemory", 1)  # "OOM command not allowed" for every write
        time.sleep(2)
        admin.config_set("maxmemory", 0)
        wait_drained(lambda: drained(rt, crawl_id), timeout=60, workers=workers)
        assert_nothing_held(rt, [host_key(site.url)])  # no release lost to the refused writes
    finally:
        workers.stop()
        state.stop()
    records = list(open_store(settings.store).records(crawl_id))
    assert sorted(r.url for r in records) == sorted({r.url for r in records})
    assert len(records) == pages and all(r.status == 200 for r in records)
    assert "state Redis failed" in (tmp_path / "oom.log").read_text()


def test_store_retries_running_out_release_the_page_counted_as_store_failed(site, tmp_path):
    rt, settings = own_cluster(tmp_path, store_max_retries=1, retry_backoff=0.1)
    crawl_id, t = f"sf{token()}", token()
    submit_requests(rt, build_requests(f"{site.url}/page/{t}", crawl_id=crawl_id),
                    store="/proc/no-such-dir/pages.db")  # cannot be created: StoreUnavailable
    workers = start(settings, tmp_path, "sf", concurrency=2)
    try:
        wait_drained(lambda: drained(rt, crawl_id), timeout=30, workers=workers)
    finally:
        workers.stop()
    stats = rt.stats.read(crawl_id)
    assert (stats["store/retries"], stats["store/failed"]) == (1, 1)
    assert "stored" not in stats and site.paths(f"/page/{t}") == [f"/page/{t}"]
    assert rt.crawls.errors(crawl_id)[0].startswith("store failed: sqlite store")


def test_a_task_whose_worker_dies_under_it_again_and_again_is_given_up(site, tmp_path):
    flush(TASKS_DB)
    rt, settings = own_cluster(tmp_path, visibility_timeout=3, retry_backoff_max=1,
                               download_timeout=60)
    crawl_id, t = "lost", token()
    path = f"/page/{t}"
    submit_requests(rt, build_requests(f"{site.url}{path}?delay=30", crawl_id=crawl_id))
    for attempt in range(1, 5):  # the first delivery and three redeliveries die
        workers = start(settings, tmp_path, f"lost{attempt}", concurrency=2)
        wait_drained(lambda: len(site.paths(path)) >= attempt, timeout=30, workers=workers)  # noqa: B023
        workers.kill()
    workers = start(settings, tmp_path, "lost5", concurrency=2)
    try:
        wait_drained(lambda: drained(rt, crawl_id), timeout=30, workers=workers)
    finally:
        workers.stop()
    stats = rt.stats.read(crawl_id)
    assert (stats["worker_lost"], stats["errors"]) == (1, 1)
    assert len(site.paths(path)) == 4  # the fifth delivery was not fetched
    assert rt.crawls.errors(crawl_id)[0].startswith("worker lost 4 times")
    assert_nothing_held(rt, [host_key(site.url)], workers=False)  # no lease of the dead ones left


def test_crawl_that_stops_moving_exits_non_zero_saying_what_is_stuck(site):
    db = TASKS_DB
    flush(db)
    crawl_id, t = f"stuck{token()}", token()
    env = {**os.environ, "CRAWLER_BROKER_URL": f"{REDIS}/{db}", "CRAWLER_REDIS_URL": f"{REDIS}/{db}",
           "CRAWLER_STALL_TIMEOUT": "10"}  # longer than a prefork worker takes to start on a busy machine
    from crawler_tasks.state.keys import Keys

    ghost = f"ghost-{t}"  # an id no message carries: the crawl can never drain
    redis.Redis.from_url(f"{REDIS}/{db}").sadd(
        Keys(os.environ["CRAWLER_KEY_PREFIX"]).outstanding(crawl_id), ghost)
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "crawler_tasks.cli.main", "crawl",
                             f"{site.url}/page/{t}", "--crawl-id", crawl_id, "--workers", "1",
                             "--quiet"], capture_output=True, text=True, env=env, timeout=90)
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"crawler-tasks: error: crawl {crawl_id} stalled: 1 task(s) outstanding")
    assert ghost in line and "nothing moved for" in line
    summary = {row[:20].strip(): row[20:] for row in result.stdout.splitlines()}
    assert summary["ended"].startswith("stalled: nothing moved for CRAWLER_STALL_TIMEOUT")  # how far it got
    assert summary["pages stored"] == "1" and summary["export"].endswith(f"--crawl-id {crawl_id}")
    assert time.monotonic() - started < 60
    assert site.paths(f"/page/{t}") == [f"/page/{t}"]  # the real page was crawled meanwhile


@pytest.fixture(autouse=True)
def _tidy() -> None:
    yield
    flush(TASKS_DB)


class _Evil:
    """Unpickling this runs a shell command: what a pickled message could do to a worker."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _junk(rng, depth: int = 0):
    """A random JSON value that is never a valid request (no 'url' that validates)."""
    kinds = ["int", "str", "float", "none", "bool"] + (["list", "dict", "request"] if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.choice([0, -1, 2**63, -(2**70), rng.randint(-1000, 1000)])
    if kind == "str":
        return rng.choice(["", "javascript:alert(1)", "http://", "\udcff", "x" * 10_000,
                           "ftp://a.test/", "{}", "http:// a.test", "\x00"])
    if kind == "float":
        return rng.choice([1e308, -0.0, 3.5])
    if kind == "none":
        return None
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "list":
        return [_junk(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if kind == "dict":
        return {rng.choice(["url", "meta", "priority", "crawl_id", "x"]): _junk(rng, depth + 1)
                for _ in range(rng.randint(0, 4))}
    return {"url": rng.choice(["mailto:a@b.test", "http://", 7, None, "http://a.test/\udcff"]),
            "crawl_id": rng.choice(["}{", "a:b", "", 5, "ok"]), "priority": rng.choice(["1", True, 1.5])}


def _queues_empty(rt: Runtime) -> bool:
    from crawler_tasks.broker.queues import queue_depths

    return all(q["total"] == 0 for q in queue_depths(rt.app, rt.settings).values())


def test_pickled_and_malformed_messages_are_refused_and_the_worker_goes_on(rt, worker, site, tmp_path):
    import pickle
    import random

    from kombu import Connection

    from crawler_tasks.core import routing

    marker = tmp_path / "pickle-ran"
    with Connection(rt.settings.broker_url) as conn:
        conn.Producer().publish(
            pickle.dumps([_Evil(marker)]), routing_key=routing.FETCH_QUEUE, exchange="",
            content_type="application/x-python-serialize", content_encoding="binary",
            headers={"task": routing.FETCH_TASK, "id": f"pickled-{token()}", "lang": "py"})
    rng = random.Random(6)
    keys_before = {k for k in rt.redis.keys(f"{rt.settings.key_prefix}:*")}
    for _ in range(150):  # fuzzed arguments of every task another app may send
        name = rng.choice([routing.FETCH_TASK, routing.PARSE_TASK, routing.SUBMIT_TASK])
        args = [_junk(rng) for _ in range(rng.randint(0, 3))]
        kwargs = {rng.choice(["urls", "priority", "meta", "crawl_id", "dont_filter", "zz"]): _junk(rng)
                  for _ in range(rng.randint(0, 3))}
        rt.app.send_task(name, args=args, kwargs=kwargs, **routing.ROUTES[name])
    wait_drained(lambda: _queues_empty(rt), timeout=60, workers=worker)

    # The worker is alive and still crawls; nothing of the junk reached the gate or the queues.
    crawl_id, t = f"after{token()}", token()
    submit_requests(rt, build_requests(f"{site.url}/page/{t}", crawl_id=crawl_id),
                    store=str(tmp_path / "pages.db"))
    wait_drained(lambda: drained(rt, crawl_id), timeout=30, workers=worker)
    assert rt.stats.read(crawl_id)["stored"] == 1
    assert not marker.exists()
    new_keys = {k for k in rt.redis.keys(f"{rt.settings.key_prefix}:*")} - keys_before
    # (the crawl's own page leaves its host's politeness state, under {hosts})
    assert all(crawl_id.encode() in k for k in new_keys
               if b":crawls" not in k and b":{hosts}:" not in k), new_keys
    log = Path(worker.log_path).read_text()
    assert "ContentDisallowed" in log or "Refusing to deserialize" in log


def test_a_message_with_arguments_of_the_wrong_shape_is_one_log_line(rt, worker):
    from crawler_tasks.core import routing

    sent = {}
    for name, args, kwargs in [(routing.FETCH_TASK, [], {}),
                               (routing.FETCH_TASK, [{"url": "http://127.0.0.1:9/x"}, 2, 3], {}),
                               (routing.PARSE_TASK, ["only-one"], {}),
                               (routing.SUBMIT_TASK, [], {"zz": 1}),
                               (routing.FEED_TASK, ["start_urls", "extra"], {})]:
        task_id = f"shape-{token()}"
        rt.app.send_task(name, args=args, kwargs=kwargs, task_id=task_id, **routing.ROUTES[name])
        sent[task_id] = name
    log_path = Path(worker.log_path)
    wait_drained(lambda: all(f"[{t}]: dropped a message with arguments of the wrong shape" in
                             log_path.read_text() for t in sent), timeout=30, workers=worker)
    lines = log_path.read_text().splitlines()
    for task_id in sent:
        mentions = [line for line in lines if task_id in line]
        assert not any("raised unexpected" in line or "TypeError(" in line for line in mentions), mentions
        assert any(line.rstrip().endswith("}") or "kwargs" in line for line in mentions)


def test_a_redis_error_that_is_not_an_outage_fails_the_task_at_once(rt):
    calls = []

    def step() -> None:
        calls.append(1)
        raise redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")

    with pytest.raises(redis.ResponseError):
        delivery.run_step(rt, "a test step", step)
    assert len(calls) == 1  # not waited for and run again as if Redis were away


def test_a_redis_outage_is_waited_for_and_the_step_run_again(rt):
    calls = []

    def step() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        return "done"

    assert delivery.run_step(rt, "a test step", step) == "done" and len(calls) == 2


def test_a_redis_refusing_writes_inside_a_script_is_an_outage_not_a_bug():
    from crawler_tasks.state.connection import is_outage

    inside = redis.ResponseError("Error running script (call to f_ed33): @user_script:49: @user_script: 49: "
                                 "-OOM command not allowed when used memory > 'maxmemory'.")
    assert is_outage(inside) and is_outage(redis.exceptions.OutOfMemoryError("command not allowed"))
    assert not is_outage(redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind"))
    assert not is_outage(redis.ResponseError("Error running script: @user_script:3: Script attempted to "
                                             "access nonexistent global variable 'x'"))
