"""The politeness state, the gate and the store queue split over shards (``CRAWLER_HOST_SHARDS``,
``CRAWLER_GATE_SHARDS``, ``CRAWLER_STORE_SHARDS``) on one Redis that is also the broker (waiting fetches handed over
from the scripts, new fetches routed per shard), with the product's defaults on and only
the delay shortened (:mod:`tests.system.test_realweb`)."""

from __future__ import annotations

from crawler_tasks.core import counters
from tests.fakes.realweb import RealWeb
from tests.holds import assert_nothing_held
from tests.system.test_realweb import Crawler, defaults


def test_four_shards_keep_every_politeness_rule_and_each_host_in_its_own_shard(tmp_path):
    web = RealWeb(hosts=6, first_ip=130).start()
    crawler = Crawler(defaults(tmp_path, host_shards=4, gate_shards=4, store_shards=4), tmp_path)
    try:
        crawl_id, _ = crawler.crawl(web.seeds)
        web.assert_crawled_politely(crawler.urls(crawl_id),
                                    crawler.rt.stats.read(crawl_id).get(counters.ROBOTS_DISALLOWED, 0))
        assert_nothing_held(crawler.rt, web.hosts)

        rt, keys = crawler.rt, crawler.rt.keys
        for host in web.hosts:
            stem = keys.hosts_stem(keys.host_shard(host))
            assert stem != f"{keys.prefix}:{{hosts}}:"
            assert rt.redis.exists(f"{stem}host:{host}") and rt.redis.exists(f"{stem}robots:http://{host}")
        assert not list(rt.redis.scan_iter(match=f"{keys.prefix}:{{hosts}}:*"))
        busiest = rt.hosts.busiest(10)  # read over every shard
        assert {h.host for h in busiest} == set(web.hosts)
        assert sum(h.deferred for h in busiest) > 0  # fetches did wait in the rooms
        assert rt.hosts.waiting_by_crawl() == {}
        stats = rt.stats.read(crawl_id)  # summed over the gate's shards
        assert stats["stored"] == stats["gate/admitted"] == len(crawler.urls(crawl_id))
        assert not list(rt.redis.scan_iter(match=f"{keys.prefix}:{{store}}:*"))  # the store queue's shards
        assert int(rt.redis.get(keys.store_homes())) >= 1 and rt.store_queue.depth().pending == 0
        seen = [rt.redis.scard(keys.seen(crawl_id, k)) for k in range(4)]
        assert sum(seen) == stats["gate/admitted"] and sum(1 for n in seen if n) > 1
    finally:
        crawler.stop()
        web.stop()
