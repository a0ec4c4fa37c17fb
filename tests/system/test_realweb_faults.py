"""Faults on the real-web test bed with the defaults on: a worker SIGKILLed mid-crawl and the
one Redis (broker and state) SIGKILLed and restarted mid-crawl. In each, every allowed page
is stored once, nothing disallowed is fetched, and no host keeps a slot once it settled.

The visibility timeout is shortened to 5 s (default 3600): a killed worker's messages come
back after it, and the tests would otherwise wait an hour.
"""

from __future__ import annotations

import time

import pytest

from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.core.urls import canonicalize_url
from tests.fakes.realweb import RealWeb
from tests.helpers import token
from tests.holds import assert_nothing_held
from tests.system.test_realweb import Crawler, _canonical, defaults
from tests.system.test_reliability import AofRedis


def _assert_polite_and_whole(crawler: Crawler, web: RealWeb, crawl_id: str) -> None:
    stored = _canonical(crawler.urls(crawl_id))
    assert len(stored) == len(set(stored)), "a page stored twice"
    assert {canonicalize_url(u) for u in web.expected()} <= set(stored)
    stats = crawler.rt.stats.read(crawl_id)  # counted once each, as stored
    assert stats["stored"] == stats["gate/admitted"] == len(stored), stats
    assert stats.get("store/failed", 0) == stats.get("worker_lost", 0) == 0, stats
    for i in range(len(web.hosts)):
        assert not [p for p in web.hits(i) if p.startswith(("/private/", "/cart"))]
    assert_nothing_held(crawler.rt, web.hosts, workers=False)


@pytest.mark.slow
@pytest.mark.parametrize("shards", [1, 4], ids=["one-shard", "four-shards"])
def test_a_worker_sigkilled_mid_crawl_loses_no_page_and_leaves_no_slot_held(tmp_path, shards):
    """With four shards the politeness state, the gate and the store queue are split (on one
    Redis, as a cluster splits them over its masters): a completion cut between its steps is
    replayed, and the killed worker's home shard of the store queue is written by the next."""
    web = RealWeb(hosts=2, pages=6, first_ip=100 + 10 * shards).start()
    crawler = Crawler(defaults(tmp_path, visibility_timeout=5, host_shards=shards, gate_shards=shards,
                                store_shards=shards), tmp_path)
    try:
        crawl_id = crawler.submit(web.seeds)
        wait_drained(lambda: crawler.rt.stats.read(crawl_id).get("stored", 0) >= 8, timeout=30,
                     workers=crawler.workers)
        crawler.workers.kill()  # its fetches in flight, its mover's hand-overs, its slots
        crawler.workers = Workers(crawler.settings, processes=1, concurrency=8, name=f"rw{token()}@%h",
                                  log_path=str(tmp_path / "after.log")).start()
        crawler.drain(crawl_id, timeout=120)
        _assert_polite_and_whole(crawler, web, crawl_id)
    finally:
        crawler.stop()
        web.stop()


@pytest.mark.slow
def test_the_one_redis_killed_and_restarted_mid_crawl_loses_no_page(tmp_path):
    server = AofRedis(tmp_path).start()
    web = RealWeb(hosts=2, pages=6, first_ip=110).start()
    crawler = Crawler(defaults(tmp_path, visibility_timeout=5, broker_url=server.url, redis_url=server.url),
                      tmp_path)
    try:
        crawl_id = crawler.submit(web.seeds)
        wait_drained(lambda: crawler.rt.stats.read(crawl_id).get("stored", 0) >= 8, timeout=30,
                     workers=crawler.workers)
        server.crash()  # SIGKILL: only what the AOF holds survives
        time.sleep(2)
        server.start()
        crawler.drain(crawl_id, timeout=120)
        _assert_polite_and_whole(crawler, web, crawl_id)
    finally:
        crawler.stop()
        web.stop()
        server.stop()
