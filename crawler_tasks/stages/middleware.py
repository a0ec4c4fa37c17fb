"""Request and response middlewares around the download (``CRAWLER_MIDDLEWARES``).

A request passes the crawl's middlewares in ascending priority just before its
download (its host slot held), as an :class:`Outgoing` each may change (headers,
cookies, ``meta``, ``method``, ``proxy``); the response passes them in descending
priority as an :class:`Incoming` (status, headers, body), before the crawler
decides what the response means. At either step a middleware may

* return a :class:`~crawler_tasks.core.asks.Request`: this request ends, neither
  fetched (or kept) nor stored, and the new one goes through the gate and the
  bands (``requests/replaced``);
* raise :class:`~crawler_tasks.core.errors.DropRequest`: it ends, counted
  ``requests/dropped/<reason>``;
* raise :class:`~crawler_tasks.core.errors.RetryRequest` (responses only): it is
  retried as any retry is (demoted, after a back-off, within the retry budget);
* raise anything else: the page gets a failure record saying which middleware
  failed (``plugin/failed/middleware``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ..core import counters
from ..core.asks import Request, in_place_of
from ..core.errors import BadInput, DropRequest, MiddlewareRetry, RetryRequest
from ..core.models import CrawlRequest
from ..core.policy import Drop, Fail, Retry, base_record, decode_text, download_counts, on_error, response_record
from ..core.program import Middleware
from ..core.responses import Download
from .parse.rules import reason_name

if TYPE_CHECKING:
    from ..core.limits import Limits
    from ..core.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Outgoing:
    """The request as request middlewares see it, and change it (the URL stays: return a
    :class:`~crawler_tasks.core.asks.Request` to ask for another one)."""

    url: str
    method: str
    headers: dict[str, str]
    meta: dict[str, Any]
    priority: int
    depth: int
    retries: int
    crawl_id: str
    #: A proxy URL for this request (``http://user:pass@host:port``); None: the crawler's choice.
    proxy: str | None = None

    @classmethod
    def of(cls, req: CrawlRequest, proxy: str | None = None) -> Outgoing:
        """``req`` as middlewares see it (copies of its headers and meta to change)."""
        return cls(req.url, req.method, dict(req.headers), dict(req.meta), req.priority, req.depth,
                   req.retries, req.crawl_id, proxy)


@dataclass
class Incoming:
    """The response as response middlewares see it, and change it."""

    url: str
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        """The body decoded (its charset, a BOM, or UTF-8 with replacement)."""
        return decode_text(self.body, self.headers.get("content-type"))[1]


@dataclass(frozen=True)
class Go:
    """Download ``request`` (through ``proxy`` when a middleware chose one)."""

    request: CrawlRequest
    proxy: str | None


def before_download(chain: Sequence[Middleware], req: CrawlRequest, limits: Limits) -> Go | Drop | Fail:
    """``req`` through the request middlewares, in ascending priority."""
    out = Outgoing.of(req)
    for mw in chain:
        if mw.process_request is None:
            continue
        try:
            answer = mw.process_request(out)
        except DropRequest as drop:
            return Drop({counters.requests_dropped(reason_name(drop.reason)): 1})
        except Exception as exc:  # noqa: BLE001 - user code
            return _failed(mw, "request", exc, req)
        if isinstance(answer, Request):
            return replaced(mw, answer, req, limits)
        if answer is not None and answer is not out:
            return _failed(mw, "request", TypeError(f"returned a {type(answer).__name__}, not None, "
                                                    "the request or a Request"), req)
    try:
        sent = req.replace(method=out.method, headers=dict(out.headers), meta=dict(out.meta))
    except BadInput as exc:
        return _failed(mw, "request", exc, req)
    return Go(sent, out.proxy)


def after_download(chain: Sequence[Middleware], req: CrawlRequest, proxy: str | None, dl: Download,
                   limits: Limits, settings: Settings) -> Download | Drop | Fail | Retry:
    """``dl`` through the response middlewares, in descending priority."""
    out = Outgoing.of(req, proxy)
    seen = Incoming(dl.url, dl.status, dict(dl.headers), dl.body)
    for mw in reversed(chain):
        if mw.process_response is None:
            continue
        try:
            answer = mw.process_response(out, seen)
        except DropRequest as drop:
            return Drop({counters.requests_dropped(reason_name(drop.reason)): 1})
        except RetryRequest as again:
            return on_error(req, MiddlewareRetry(mw.name, reason_name(again.reason)), dl, settings)
        except Exception as exc:  # noqa: BLE001 - user code
            return _failed(mw, "response", exc, req, dl, settings)
        if isinstance(answer, Request):
            return replaced(mw, answer, req, limits, dl)
        if answer is not None and answer is not seen:
            return _failed(mw, "response", TypeError(f"returned a {type(answer).__name__}, not None, "
                                                     "the response or a Request"), req, dl, settings)
    if (seen.status, seen.headers, seen.body) == (dl.status, dl.headers, dl.body):
        return dl
    return dataclasses.replace(dl, status=int(seen.status), headers={k.lower(): str(v) for k, v in seen.headers.items()},
                               body=bytes(seen.body))


def replaced(mw: Middleware, wanted: Request, req: CrawlRequest, limits: Limits,
             dl: Download | None = None) -> Drop | Fail:
    """``req`` ends; ``wanted`` (relative to it, at its depth) goes through the gate when the
    crawl's domains allow it."""
    try:
        child = in_place_of(wanted, req, limits)
    except BadInput as exc:
        return _failed(mw, "response" if dl else "request", exc, req)
    if child is None:
        return Drop({counters.requests_dropped("offsite"): 1})
    return Drop({counters.REQUESTS_REPLACED: 1}, (child,))


def shown_proxy(url: str) -> str:
    """A proxy URL without its credentials, as records and logs show it."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return urlunsplit((parts.scheme, f"{host}:{parts.port}" if parts.port else host, "", "", ""))


def _failed(mw: Middleware, step: str, exc: BaseException, req: CrawlRequest,
            dl: Download | None = None, settings: Settings | None = None) -> Fail:
    description = f"{step} middleware {mw.name} failed: {type(exc).__name__}: {str(exc)[:300]}"
    log.warning("%s on %s", description, req.url)
    record = base_record(req) if dl is None or settings is None else \
        response_record(req, dl, keep_body=settings.store_body)
    record.description = description
    counts = download_counts(dl) if dl is not None else {}
    return Fail(record, {**counts, counters.FAILURES: 1, counters.plugin_failed("middleware"): 1},
                kind="middleware", reason=type(exc).__name__)
