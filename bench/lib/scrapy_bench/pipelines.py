"""Counts items and when they came; writes the counts as JSON when the spider closes."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from scrapy.crawler import Crawler

_STATS = ("downloader/request_count", "downloader/response_count", "downloader/exception_count",
          "offsite/filtered", "dupefilter/filtered", "retry/count", "log_count/ERROR",
          "scheduler/enqueued/redis", "scheduler/dequeued/redis", "finish_reason")


class CountPipeline:
    """Keeps nothing but a count, the first and last item times (``time.time()``)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.items = 0
        self.first_item_at: float | None = None
        self.last_item_at: float | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CountPipeline:
        return cls(crawler)

    def process_item(self, item: Any, spider: Any = None) -> Any:
        now = time.time()
        if self.first_item_at is None:
            self.first_item_at = now
        self.last_item_at = now
        self.items += 1
        return item

    def close_spider(self, spider: Any = None) -> None:
        out = self.crawler.settings.get("BENCH_OUT")
        if not out:
            return
        stats = self.crawler.stats.get_stats() if self.crawler.stats else {}
        spider_obj = self.crawler.spider
        report = {
            "pid": os.getpid(),
            "items": self.items,
            "started_at": getattr(spider_obj, "started_at", None),
            "first_item_at": self.first_item_at,
            "last_item_at": self.last_item_at,
            "closed_at": time.time(),
            "stats": {k: stats[k] for k in _STATS if k in stats},
        }
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(report, fh)
