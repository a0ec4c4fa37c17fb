"""Two spiders that store one small item per page and follow every link on it.

``bench``: plain Scrapy, seeded with ``start_url``. ``bench_redis``: a
scrapy-redis ``RedisSpider``; it takes its seed from the Redis list
``bench:start_urls`` as soon as it is pushed (rather than at the next
5-second idle tick) and closes after ``MAX_IDLE_TIME_BEFORE_CLOSE`` seconds
without a page.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar

from scrapy import Request, Spider
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import LinkExtractor
from scrapy_redis.spiders import RedisSpider

START_KEY = "bench:start_urls"
_LINKS = LinkExtractor()


class FollowEverything:
    """``parse``: one item per page, a request for every link (offsite ones are filtered)."""

    started_at: float | None = None

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        self.page_seen()
        yield {"url": response.url, "status": response.status, "size": len(response.body)}
        if isinstance(response, TextResponse):
            for link in _LINKS.extract_links(response):
                yield Request(link.url, callback=self.parse)

    def page_seen(self) -> None:
        """Hook for the Redis spider's idle clock."""


class BenchSpider(FollowEverything, Spider):
    name = "bench"
    allowed_domains: ClassVar[list[str]] = ["127.0.0.1"]

    def __init__(self, start_url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start_url

    async def start(self) -> AsyncIterator[Any]:
        self.started_at = time.time()
        # Not dont_filter: a link back to the seed must be recognised as seen.
        yield Request(self.start_url, callback=self.parse)


class BenchRedisSpider(FollowEverything, RedisSpider):
    name = "bench_redis"
    allowed_domains: ClassVar[list[str]] = ["127.0.0.1"]
    redis_key = START_KEY

    def __init__(self, ready_file: str = "", start_timeout: float = 300.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ready_file = ready_file
        self.start_timeout = start_timeout

    def page_seen(self) -> None:
        self.spider_idle_start_time = int(time.time())

    async def start(self) -> AsyncIterator[Any]:
        """Wait for the seed; stop waiting once another process has taken it and queued links."""
        queue_key = self.settings.get("SCHEDULER_QUEUE_KEY", "%(spider)s:requests") % {"spider": self.name}
        if self.ready_file:
            Path(self.ready_file).write_text("ready\n")
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            data = self.server.lpop(self.redis_key)
            if data:
                self.started_at = time.time()
                self.page_seen()
                yield Request(json.loads(data)["url"], callback=self.parse)
                return
            if self.server.exists(queue_key):
                self.started_at = time.time()
                self.page_seen()
                return
            await asyncio.sleep(0.01)
