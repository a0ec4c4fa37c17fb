"""What a worker process says of its pages at INFO: a line per response (``fetched 200 GET
<url> 123 ms 20.1 KB``, ``CRAWLER_LOG_PAGES``) and, every ``CRAWLER_LOG_STATS_S`` seconds,
how many it fetched and at what pace, as Scrapy's LogStats does."""

from __future__ import annotations

import logging
import threading
import time

from ..core.responses import Download, page_line
from ..core.settings import Settings

log = logging.getLogger(__name__)


class PageLog:
    """The per-response lines and the periodic pace line of one worker process."""

    def __init__(self, settings: Settings) -> None:
        self.lines = settings.log_pages
        self.every = settings.log_stats_s
        self._lock = threading.Lock()
        self.fetched = self.failed = self.bytes = 0
        self._mark = (time.monotonic(), 0)

    def response(self, method: str, url: str, result: Download | Exception) -> None:
        """Count one download (or its failure) and log its line."""
        with self._lock:
            if isinstance(result, Download):
                self.fetched += 1
                self.bytes += len(result.body)
            else:
                self.failed += 1
        if self.lines:
            log.info(page_line(method, url, result))

    def tick(self, now: float | None = None) -> str | None:
        """Log the pace line when it is due (and return it): ``fetched 120 pages (at 60
        pages/min), 3 failed, 2.4 MB in this process``."""
        now = time.monotonic() if now is None else now
        since, before = self._mark
        if not self.every or now - since < self.every - 1e-6:  # (a sum of floats may fall short)
            return None
        with self._lock:
            fetched, failed, size = self.fetched, self.failed, self.bytes
        self._mark = (now, fetched)
        if not fetched and not failed:
            return None
        pace = (fetched - before) * 60 / (now - since)
        line = (f"fetched {fetched} pages (at {pace:.0f} pages/min), {failed} failed, "
                f"{size / 1e6:.1f} MB in this process")
        log.info(line)
        return line
