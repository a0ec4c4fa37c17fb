"""The links a worker process offered the gate a moment ago, per crawl.

Most of a page's links were found before: a site's navigation repeats on every page,
and a crawl of 3,000 pages skips some 70,000 duplicates. The gate in Redis is what
decides, but asking it costs each link a request object, a fingerprint and a place in
the page's gate round trip. :class:`KnownLinks` remembers, in the process, the URLs the
gate has answered for (admitted, or refused as seen), so that a page's links among them
are counted as duplicates without that work.

What the gate knows can change under it: a recrawl window lets a URL in again, and a
purged crawl's gate starts empty. So a crawl's URLs are remembered for ``ttl`` seconds
at most (a worker's cached crawl configuration, which a purge or cancel waits out, lives
as long), then forgotten all at once; and only URLs the gate has answered for are added,
after its answer, so a fetch that fails before its gate round trip leaves no trace here.
At most ``max_urls`` URLs are kept per crawl (0: none, the gate is asked every time).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable

from .settings import Settings

_NONE: frozenset[str] = frozenset()


class KnownLinks:
    """Per crawl, the URLs the gate answered for in this process in the last ``ttl`` seconds."""

    def __init__(self, ttl: float, max_urls: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.max_urls = max_urls
        self._clock = clock
        self._windows: dict[str, tuple[float, set[str]]] = {}

    @classmethod
    def of(cls, settings: Settings) -> KnownLinks:
        """As the settings give: ``CRAWLER_KNOWN_LINKS`` URLs a crawl, kept no longer than
        ``CRAWLER_CRAWL_REFRESH_S`` nor than the recrawl window."""
        ttl = settings.crawl_refresh_s
        if settings.recrawl_after > 0:
            ttl = min(ttl, settings.recrawl_after)
        return cls(ttl, settings.known_links)

    def known(self, crawl_id: str) -> Collection[str]:
        """The URLs of ``crawl_id`` the gate answered for lately (to test links against)."""
        window = self._windows.get(crawl_id)
        if window is None or self._clock() - window[0] >= self.ttl:
            return _NONE
        return window[1]

    def add(self, crawl_id: str, urls: Iterable[str]) -> None:
        """Remember ``urls``, which the gate has just answered for in ``crawl_id``."""
        if not self.max_urls:
            return
        now = self._clock()
        window = self._windows.get(crawl_id)
        if window is None or now - window[0] >= self.ttl:
            self._forget_old(now)
            window = self._windows[crawl_id] = (now, set())
        kept = window[1]
        room = self.max_urls - len(kept)
        for url in urls:
            if room <= 0:
                return
            if url not in kept:
                kept.add(url)
                room -= 1

    def _forget_old(self, now: float) -> None:
        for crawl_id, (started, _) in list(self._windows.items()):
            if now - started >= self.ttl:
                self._windows.pop(crawl_id, None)
