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
from crawler_tasks.celery_app import create_app
from crawler_tasks.local import EmbeddedRedis, Workers, wait_drained
from crawler_tasks.runtime import Runtime
from crawler_tasks.seed import build_requests, submit_requests
from crawler_tasks.settings import Settings

from .conftest import REDIS, flush, token

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
    assert "stored" not in stats
    [error] = rt.crawls.errors(crawl_id)
    assert error.startswith("UnknownStore: unknown store 'nosuch://anywhere'") and t in error
    shown = subprocess.run([sys.executable, "-m", "crawler_tasks.cli", "stats", "--crawl-id", crawl_id],
                           capture_output=True, text=True, timeout=60).stdout
    assert f"error: {error}" in shown and "errors/UnknownStore" in shown


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
        wait_drained(lambda: rt.stats.read(crawl_id).get("stored", 0) >= 5, timeout=30,
                     workers=workers)
        admin = redis.Redis.from_url(state.url)
        admin.config_set("maxmemory", 1)  # "OOM command not allowed" for every write
        time.sleep(2)
        admin.config_set("maxmemory", 0)
        wait_drained(lambda: drained(rt, crawl_id), timeout=60, workers=workers)
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
        wait_drained(lambda: len(site.paths(path)) >= attempt, timeout=30, workers=workers)
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


def test_crawl_that_stops_moving_exits_non_zero_saying_what_is_stuck(site):
    db = TASKS_DB
    flush(db)
    crawl_id, t = f"stuck{token()}", token()
    env = {**os.environ, "CRAWLER_BROKER_URL": f"{REDIS}/{db}", "CRAWLER_REDIS_URL": f"{REDIS}/{db}",
           "CRAWLER_STALL_TIMEOUT": "3"}
    from crawler_tasks.keys import Keys

    ghost = f"ghost-{t}"  # an id no message carries: the crawl can never drain
    redis.Redis.from_url(f"{REDIS}/{db}").sadd(
        Keys(os.environ["CRAWLER_KEY_PREFIX"]).outstanding(crawl_id), ghost)
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "crawler_tasks.cli", "crawl",
                             f"{site.url}/page/{t}", "--crawl-id", crawl_id, "--workers", "1",
                             "--quiet"], capture_output=True, text=True, env=env, timeout=90)
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"crawler-tasks: error: crawl {crawl_id} stalled: 1 task(s) outstanding")
    assert ghost in line and "nothing moved for" in line
    assert time.monotonic() - started < 60
    assert site.paths(f"/page/{t}") == [f"/page/{t}"]  # the real page was crawled meanwhile


@pytest.fixture(autouse=True)
def _tidy() -> None:
    yield
    flush(TASKS_DB)
