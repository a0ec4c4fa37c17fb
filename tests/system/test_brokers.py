"""Several Redis brokers over one shared state: each broker with workers of its own, crawls
spread over the brokers, politeness shared through the state, with the product's defaults
on (:mod:`tests.system.test_realweb`) and a worker SIGKILLed mid-crawl."""

from __future__ import annotations

from dataclasses import replace

import pytest
import redis

from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.core import counters
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.fakes.realweb import RealWeb
from tests.helpers import token
from tests.holds import assert_nothing_held
from tests.system.test_realweb import Crawler, defaults
from tests.system.test_realweb_faults import _assert_polite_and_whole
from tests.system.test_reliability import AofRedis


@pytest.mark.slow
def test_two_brokers_share_the_hosts_and_a_sigkilled_worker_loses_no_page(tmp_path):
    brokers = [AofRedis(tmp_path / name, persist=False) for name in ("a", "b")]
    for n, broker in enumerate(brokers):
        (tmp_path / "ab"[n]).mkdir()
        broker.start()
    web = RealWeb(hosts=3, pages=8, first_ip=150).start()
    # One state Redis (this module's database), one key prefix; each broker its own workers.
    first = Crawler(defaults(tmp_path, broker_url=brokers[0].url, store_shards=4, visibility_timeout=5), tmp_path)
    settings_b = replace(first.settings, broker_url=brokers[1].url)
    rt_b = Runtime(settings_b, create_app(settings_b))
    second = Workers(settings_b, processes=1, concurrency=8, name=f"rb{token()}@%h",
                     log_path=str(tmp_path / "b.log")).start()
    try:
        on_a = first.submit(web.seeds)
        on_b = f"rb-{token()}"
        submit_requests(rt_b, build_requests(web.seeds, crawl_id=on_b), store=settings_b.store)
        wait_drained(lambda: first.rt.stats.read(on_a).get("stored", 0) >= 8, timeout=30, workers=first.workers)
        first.workers.kill()  # broker a's worker: its fetches in flight come back when it returns
        first.workers = Workers(first.settings, processes=1, concurrency=8, name=f"ra{token()}@%h",
                                log_path=str(tmp_path / "a-after.log")).start()
        for crawl_id in (on_a, on_b):
            wait_drained(lambda c=crawl_id: first.rt.crawls.outstanding(c) == 0, timeout=120,
                         workers=first.workers)
        for crawl_id in (on_a, on_b):  # each crawl whole, counted once, nothing disallowed fetched
            _assert_polite_and_whole(first, web, crawl_id)
            assert first.rt.stats.read(crawl_id)[counters.ROBOTS_DISALLOWED] > 0
        # One robots.txt per host for both brokers' crawls (and one more where the kill cut its fetch).
        assert all(web.hits(i)["/robots.txt"] <= 2 for i in range(len(web.hosts)))
        for broker in brokers:  # each broker carried fetches
            assert redis.Redis.from_url(broker.url).info("stats")["total_commands_processed"] > 100
        assert "crawl.fetch" in (tmp_path / "b.log").read_text()
        assert_nothing_held(first.rt, web.hosts)
    finally:
        second.stop()
        first.stop()
        rt_b.close()
        web.stop()
        for broker in brokers:
            broker.stop()
