"""Pause, resume and cancel one crawl while another runs, with real worker processes: the
other crawl is untouched, a paused crawl loses nothing and stays paused across a worker
restart, a cancelled crawl stores nothing more."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
import redis

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.core.errors import BadInput
from crawler_tasks.core.politeness import host_key
from crawler_tasks.core.settings import Settings
from crawler_tasks.service import control
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.helpers import REDIS, UNTHROTTLED, token
from tests.holds import assert_nothing_held

CONTROL_DB = int(os.environ.get("CRAWLER_CONTROL_TEST_DB", "3"))
PAGES = 40


class Cluster:
    def __init__(self, tmp_path) -> None:
        url = f"{REDIS}/{CONTROL_DB}"
        redis.Redis.from_url(url).flushdb()
        self.store = str(tmp_path / "pages.db")
        self.settings = Settings(broker_url=url, redis_url=url, key_prefix=f"ctl{token()}", store=self.store,
                                 visibility_timeout=10, crawl_refresh_s=1.5, **UNTHROTTLED)
        self.rt = Runtime(self.settings, create_app(self.settings))
        self.tmp = tmp_path
        self.workers: list[Workers] = []

    def start(self) -> Workers:
        w = Workers(self.settings, concurrency=4, name=f"ctl{len(self.workers)}{token()}@%h",
                    log_path=str(self.tmp / f"w{len(self.workers)}.log")).start()
        self.workers.append(w)
        return w

    def submit(self, site, crawl_id: str, pages: int = PAGES, delay: float = 0.3) -> None:
        submit_requests(self.rt, build_requests(f"{site.url}/tree/{token()}/0?size={pages}&delay={delay}",
                                                crawl_id=crawl_id))

    def stored(self, crawl_id: str) -> int:
        return self.rt.stats.read(crawl_id).get("stored", 0)

    def wait(self, check, timeout: float = 90) -> None:
        wait_drained(check, timeout=timeout, workers=self.workers[-1])

    def records(self, crawl_id: str) -> list[str]:
        return [r.url for r in open_store(self.store).records(crawl_id)]


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    yield c
    for w in c.workers:
        w.stop()


def test_a_paused_crawl_waits_in_redis_survives_a_restart_and_completes_after_resume(cluster, site):
    a, b = f"a-{token()}", f"b-{token()}"
    cluster.submit(site, a)
    cluster.submit(site, b, delay=0.1)  # the other crawl: only its end matters
    first = cluster.start()
    cluster.wait(lambda: cluster.stored(a) >= 3)
    control.pause(a, cluster.rt)
    cluster.wait(lambda: cluster.rt.crawls.outstanding(b) == 0)  # the other crawl is untouched
    assert sorted(cluster.records(b)) == sorted(set(cluster.records(b))) and len(cluster.records(b)) == PAGES
    time.sleep(cluster.rt.crawls.cache_seconds + 1.5)  # every worker has seen the pause
    held, stored = cluster.rt.crawls.held(a), cluster.stored(a)
    assert held > 0 and stored < PAGES and cluster.rt.crawls.outstanding(a) > 0  # not drained
    [state] = [c["state"] for c in control.list_crawls(cluster.rt) if c["crawl_id"] == a]
    assert state == "paused"
    first.stop()
    cluster.start()  # a new worker: the crawl stays paused
    time.sleep(3)
    assert cluster.stored(a) == stored and cluster.rt.crawls.held(a) >= held
    assert control.resume(a, cluster.rt) >= held
    cluster.wait(lambda: cluster.rt.crawls.outstanding(a) == 0)
    urls = cluster.records(a)
    assert len(urls) == len(set(urls)) == PAGES  # nothing lost, nothing twice
    stats = cluster.rt.stats.read(a)
    assert stats["stored"] == stats["gate/admitted"] == PAGES and stats.get("errors", 0) == 0
    assert_nothing_held(cluster.rt, [host_key(site.url)])


def test_a_cancelled_crawl_stores_nothing_more_and_ends(cluster, site):
    a, b = f"a-{token()}", f"b-{token()}"
    cluster.submit(site, a, pages=160)
    cluster.submit(site, b, delay=0.1)
    cluster.start()
    cluster.wait(lambda: cluster.stored(a) >= 3)
    control.cancel(a, cluster.rt)
    cluster.wait(lambda: cluster.rt.crawls.outstanding(a) == 0)
    stats = cluster.rt.stats.read(a)
    stored = stats["stored"]
    assert stats["cancelled"] > 0 and stored < 160 and stats.get("failures", 0) == 0
    assert len(cluster.records(a)) == stored  # no failure records for the cancelled fetches
    [state] = [c["state"] for c in control.list_crawls(cluster.rt) if c["crawl_id"] == a]
    assert state == "cancelled"
    cluster.wait(lambda: cluster.rt.crawls.outstanding(b) == 0)
    assert len(cluster.records(b)) == PAGES  # the other crawl is untouched
    time.sleep(1)
    assert cluster.stored(a) == stored
    assert_nothing_held(cluster.rt, [host_key(site.url)])
    assert control.purge(a, cluster.rt) > 0  # its gate, counters, configuration...
    assert a not in {c["crawl_id"] for c in control.list_crawls(cluster.rt)}
    assert b in {c["crawl_id"] for c in control.list_crawls(cluster.rt)}
    with pytest.raises(BadInput, match=f"no crawl {a} in Redis"):
        control.purge(a, cluster.rt)
