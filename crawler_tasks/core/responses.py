"""A response as the crawler keeps it, and what its headers say.

:class:`Download` is what a fetch hands to the decisions (:mod:`.policy`): the body
capped at ``CRAWLER_DOWNLOAD_MAXSIZE``, decoded, with what an archive needs of the
exchange (:class:`RawExchange`). What its status means (retried? what it tells the
host limiter?) is :mod:`.classify`'s to say. No I/O here: the download itself is in
:mod:`crawler_tasks.net.download`.
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .render import RenderReport

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: Request headers for the proxy alone, left out of the exchange a record keeps.
HOP_SECRETS = frozenset({"proxy-authorization"})
#: Request headers that carry credentials: a record keeps their names, never their values.
CREDENTIALS = frozenset({"authorization", "cookie"})
REDACTED = "[redacted]"


@dataclass(frozen=True)
class RawExchange:
    """One request and response as they crossed the wire (header values as latin-1 text)."""

    request_line: str  # ``GET /path?q HTTP/1.1``
    request_headers: list[tuple[str, str]]  # in order sent, ``Host`` included
    status_line: str  # ``HTTP/1.1 200 OK``
    headers: list[tuple[str, str]]  # in order received, case and repeats kept

    @classmethod
    def parse(cls, request_head: bytes | None, response_head: bytes | None) -> RawExchange | None:
        """Parsed from the heads the transport captured; None when it captured none."""
        if not request_head or not response_head:
            return None
        request_line, request_headers = _split_head(request_head)
        status_line, headers = _split_head(response_head)
        # The proxy's credentials went to the proxy, not to the site: never into a record;
        # the site's are named but not kept.
        request_headers = [(k, REDACTED if k.lower() in CREDENTIALS else v)
                           for k, v in request_headers if k.lower() not in HOP_SECRETS]
        return cls(request_line, request_headers, status_line, headers)


def _split_head(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    """(first line, [(name, value)]) of a message head; folded lines join their header."""
    lines = head.decode("latin-1").splitlines()
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line[:1] in (" ", "\t") and headers:  # obs-fold (RFC 9112 5.2)
            name, value = headers[-1]
            headers[-1] = (name, f"{value} {line.strip()}")
        elif ":" in line:
            name, value = line.split(":", 1)
            headers.append((name, value.strip(" \t")))
    return (lines[0] if lines else ""), headers


@dataclass
class Download:
    """A response as the crawler keeps it: the body is at most ``maxsize`` bytes.

    ``request_size`` and ``response_size`` are wire bytes when ``raw`` is there
    (heads exactly; the body as received, before decompression, without chunk
    framing), else estimates.
    """

    url: str
    status: int
    headers: dict[str, str]
    body: bytes
    truncated: bool
    request_size: int
    response_size: int
    elapsed: float = 0.0
    raw: RawExchange | None = None
    #: ``time.monotonic()`` when the request went out (0.0: not known).
    sent_at: float = 0.0
    #: The page's DOM after a browser ran its scripts (``body`` stays the response as
    #: served); None: not rendered.
    dom: str | None = None
    #: How it was rendered (:class:`~crawler_tasks.core.render.RenderReport`); None: not rendered.
    rendered: RenderReport | None = None

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def byte_size(n: int) -> str:
    """``512 B``, ``20.1 KB``, ``3.4 MB`` (powers of 1,000)."""
    for unit, scale in (("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def page_line(method: str, url: str, result: Download | Exception) -> str:
    """The worker's log line of one download: ``fetched 200 GET <url> 123 ms 20.1 KB``, or
    ``fetch failed GET <url>: <why>``."""
    if isinstance(result, Download):
        return (f"fetched {result.status} {method} {url} {result.elapsed * 1000:.0f} ms "
                f"{byte_size(len(result.body))}{' (truncated)' if result.truncated else ''}")
    return f"fetch failed {method} {url}: {getattr(result, 'description', None) or result}"
