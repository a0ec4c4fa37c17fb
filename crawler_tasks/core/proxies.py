"""Proxies for blocked hosts (``CRAWLER_PROXIES``): which one a request uses, and how it is shown.

Requests go direct. The host limiter (:mod:`crawler_tasks.state.hosts`) counts a
host's blocking signs (403, 429, 503, a connection reset, a body matching
``CRAWLER_BAN_PATTERN``) and, after ``CRAWLER_BAN_THRESHOLD`` in a row, marks
the host proxied: from then on each of its requests takes the next proxy of
the list in turn (rotation per host), skipping proxies benched for
``CRAWLER_PROXY_BENCH_S`` after a failure. The blocked request itself is
re-scheduled (a retry) and goes through a proxy.

Only an index into the list travels through Redis; the URL with its
credentials stays in the worker's settings. Records, logs and stats name a
proxy by :func:`shown` (scheme, host and port).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from .settings import Settings


def shown(url: str) -> str:
    """``url`` without credentials: ``http://proxy.example:3128``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{parts.scheme}://{host}" + (f":{port}" if port else "")


class Proxies:
    """The configured proxies of one process and the ban-page pattern."""

    def __init__(self, settings: Settings) -> None:
        self.urls = settings.proxies
        self.ban = re.compile(settings.ban_pattern.encode()) if settings.ban_pattern else None

    def __len__(self) -> int:
        return len(self.urls)

    def url(self, index: int | None) -> str | None:
        """The proxy URL (credentials included, for requests only) of ``index``; None = direct."""
        return None if index is None else self.urls[index % len(self.urls)]

    def shown(self, index: int | None) -> str | None:
        """The proxy of ``index`` as records and logs name it."""
        url = self.url(index)
        return None if url is None else shown(url)

    def is_ban_page(self, body: bytes) -> bool:
        return self.ban is not None and self.ban.search(body) is not None
