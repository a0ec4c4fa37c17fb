"""The requests of a rendered page, intercepted: what a page of the browser may load.

The browser has no network of its own (:data:`crawler_tasks.net.render.LAUNCH_ARGS`), and
every request its pages make comes here: the page's document is the response the crawler
downloaded already (politeness, robots.txt, the private-network guard and the size cap
applied), and each further request is judged by :func:`crawler_tasks.core.render.verdict`
and fetched by the crawler's own guarded downloader, taken from the browser's cache of
scripts and stylesheets, or refused. A page cannot reach an address the crawler would not.

This module holds that routing, the cache, and the state of each page a tab serves.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import AddressRefused, BadInput, FetchError
from ..core.render import BLOCK, FULFIL, RenderReport, verdict
from ..core.responses import Download
from ..core.settings import Settings

log = logging.getLogger(__name__)

#: Fetches one subresource for a page: ``(url, headers, proxy) -> Download``, raising
#: FetchError (or BadInput for a URL the crawler cannot request).
FetchSub = Callable[[str, dict[str, str], "str | None"], Download]

#: Response headers not passed to the browser: the body it gets is decoded and whole.
_HOP_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"})
#: Request headers of the page not sent on: the crawler's own say who it is and where.
_OWN_HEADERS = frozenset({"host", "connection", "content-length", "user-agent"})
#: Bytes of scripts and stylesheets one browser keeps for its next pages.
CACHE_BYTES = 32 << 20


class Cache:
    """The scripts and stylesheets a browser's pages loaded (status 200, not ``no-store``),
    by URL, up to ``max_bytes``, least recently used out first: a site's app is fetched once
    per browser, not once per page."""

    KINDS = frozenset({"script", "stylesheet"})

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._entries: OrderedDict[str, tuple[int, dict[str, str], bytes]] = OrderedDict()

    def get(self, kind: str, url: str) -> tuple[int, dict[str, str], bytes] | None:
        """The status, headers and body kept for ``url``, or None."""
        if kind not in self.KINDS:
            return None
        hit = self._entries.get(url)
        if hit is not None:
            self._entries.move_to_end(url)
        return hit

    def put(self, kind: str, url: str, got: Download) -> None:
        """Keep ``got`` for ``url`` when it may be kept."""
        if kind not in self.KINDS or got.status != 200 or got.truncated or len(got.body) > self.max_bytes \
                or "no-store" in got.headers.get("cache-control", "").lower():
            return
        self._entries[url] = (got.status, _passed(got.headers), got.body)
        self.size += len(got.body)
        while self.size > self.max_bytes:
            _, (_, _, body) = self._entries.popitem(last=False)
            self.size -= len(body)


@dataclass
class PageState:
    """One render: its report, its document as served, the proxy of its requests."""

    report: RenderReport
    served: Download
    proxy: str | None = None
    #: Set when the page's scripts navigate away.
    away: asyncio.Event = field(default_factory=asyncio.Event)
    document_pending: bool = True


@dataclass
class Tab:
    """A browser tab, kept between renders (a new tab costs a renderer process): the render
    it serves now, if any."""

    page: Any
    state: PageState | None = None


async def intercept(tab: Tab, cache: Cache, route: Any, request: Any, *, settings: Settings,
                    fetch: FetchSub, pool: concurrent.futures.Executor | None) -> None:
    """Every request of a page: its document served, the rest judged, fetched (on ``pool``,
    by ``fetch``; or taken from ``cache``) or refused."""
    from playwright.async_api import Error as PlaywrightError

    state = tab.state
    if state is None:  # an idle tab: nothing may load
        await _quietly(route.abort("blockedbyclient"))
        return
    report = state.report
    report.requests += 1
    try:
        if request.is_navigation_request() and request.frame == tab.page.main_frame:
            await _navigation(state, route, request)
            return
        action, _why = verdict(method=request.method, url=request.url, resource_type=request.resource_type,
                               made=report.requests, block=settings.render_block,
                               max_requests=settings.render_max_requests)
        if action != FULFIL:
            if action == BLOCK:
                report.blocked += 1
            else:
                report.refused += 1
            await route.abort("blockedbyclient")
            return
        kind = request.resource_type
        hit = cache.get(kind, request.url)
        if hit is not None:
            report.cached += 1
            await route.fulfill(status=hit[0], headers=hit[1], body=hit[2])
            return
        got = await _fetched(state, request, fetch, pool)
        if isinstance(got, str):
            await route.abort(got)
            return
        cache.put(kind, request.url, got)
        await route.fulfill(status=got.status, headers=_passed(got.headers), body=got.body)
    except PlaywrightError:
        pass  # the page closed meanwhile


async def _navigation(state: PageState, route: Any, request: Any) -> None:
    """A navigation of the page's main frame: the first serves its document, any later one
    (the page's scripts navigating away) is not followed (aborted, the page stays)."""
    if state.document_pending:
        state.document_pending = False
        await route.fulfill(status=state.served.status, headers=_passed(state.served.headers),
                            body=state.served.body)
        return
    state.report.refused += 1
    state.report.navigated = request.url
    state.away.set()
    await route.abort("aborted")


async def _fetched(state: PageState, request: Any, fetch: FetchSub,
                   pool: concurrent.futures.Executor | None) -> Download | str:
    """The response to a page's request, fetched on ``pool``, or the error the browser gets
    instead (counted in the page's report)."""
    report = state.report
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _OWN_HEADERS}
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(pool, fetch, request.url, headers, state.proxy)
    except (AddressRefused, BadInput):
        report.refused += 1
        log.info("render: refused a request of %s to %.200s (a private or metadata address, or no URL "
                 "the crawler requests)",
                 state.served.url, request.url)
        return "addressunreachable"
    except FetchError:
        report.failed += 1
        return "failed"
    except Exception as exc:  # noqa: BLE001 - whatever the page asked for, its request ends
        log.info("render: a request of %s to %.200s failed: %s: %s", state.served.url, request.url,
                 type(exc).__name__, exc)
        report.failed += 1
        return "failed"


async def _quietly(step: Any) -> None:
    """Await a route's answer; a page closed meanwhile is no error."""
    from playwright.async_api import Error as PlaywrightError

    try:
        await step
    except PlaywrightError:
        pass


def _passed(headers: dict[str, str]) -> dict[str, str]:
    """Response headers as the browser gets them (the body is decoded and whole)."""
    return {k: v for k, v in headers.items() if k.lower() not in _HOP_HEADERS}
