"""Scrapy settings shared by the plain and the scrapy-redis rows of bench/compare.

32 concurrent requests (as many as ``CRAWLER_WORKER_CONCURRENCY=32`` gives a
crawler_tasks worker), no delay, no throttling, no robots.txt, no cookies,
warnings only. :data:`REDIS` is added on top for scrapy-redis.
"""

from __future__ import annotations

import os

BOT_NAME = "scrapy_bench"
SPIDER_MODULES = ["scrapy_bench.spiders"]

CONCURRENT_REQUESTS = 32
#: A cap per host below the concurrency, as ``CRAWLER_HOST_CONCURRENCY`` gives a crawler_tasks
#: row: ``--variant scrapy-cap16=scrapy-1,BENCH_SCRAPY_PER_DOMAIN=16``.
CONCURRENT_REQUESTS_PER_DOMAIN = int(os.environ.get("BENCH_SCRAPY_PER_DOMAIN", "32"))
DOWNLOAD_DELAY = 0
AUTOTHROTTLE_ENABLED = False
ROBOTSTXT_OBEY = False
COOKIES_ENABLED = False
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "WARNING"
LOGSTATS_INTERVAL = 0
HTTPCACHE_ENABLED = False
USER_AGENT = "scrapy-bench (+bench/compare)"

ITEM_PIPELINES = {"scrapy_bench.pipelines.CountPipeline": 100}

# scrapy-redis: the shared scheduler queue and duplicate filter in one Redis.
REDIS = {
    "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
    "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
    # Keep the queue and the fingerprints when one process closes while
    # another still crawls (the Redis is thrown away after the run anyway).
    "SCHEDULER_PERSIST": True,
    # RedisSpider never finishes by itself: close after this many seconds
    # without work (the harness times the crawl up to the last item, not this).
    "MAX_IDLE_TIME_BEFORE_CLOSE": 3,
}
