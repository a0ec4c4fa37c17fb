"""One page's visit: what its fetch knows and holds, built once per page.

A :class:`Visit` carries what every step of a fetch (:mod:`crawler_tasks.stages.fetch`)
and every end of its task need: the process's components, the task id, the
crawl's limits (resolved once), what the fetch holds (:class:`~.holds.FetchHolds`)
and whether ``crawl.page`` waits for the answer. What the steps learn on the way
(the slot, the middlewares' request, the download) is its :class:`Progress`.
:func:`visiting` builds it and gives back what it holds on every way out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.politeness import host_key
from .holds import FetchHolds
from .middleware import shown_proxy

if TYPE_CHECKING:
    from ..core.errors import FetchError
    from ..core.limits import Limits
    from ..core.models import CrawlRequest, PageRecord
    from ..core.politeness import Slot
    from ..core.program import Middleware
    from ..core.responses import Download
    from .deps import FetchDeps


@dataclass
class Progress:
    """What a fetch's steps learned so far; each step fills in its part."""

    #: The request as the request middlewares left it (the task's, until one replaces it).
    request: CrawlRequest
    #: The host's slot, once taken.
    slot: Slot | None = None
    #: The crawl's middlewares, in order (none: the program has none).
    chain: tuple[Middleware, ...] = ()
    #: A middleware's own proxy URL (None: the host's proxy, if any).
    proxy: str | None = None
    #: The record an earlier fetch stored, when a recrawl revalidates it.
    previous: PageRecord | None = None
    #: What the download (or the browser) gave.
    result: Download | FetchError | None = None


@dataclass(frozen=True)
class Visit:
    """One fetch of one page, as task ``task_id`` (see the module docstring)."""

    rt: FetchDeps
    task_id: str
    limits: Limits
    holds: FetchHolds
    #: ``crawl.page``: a fetch that must wait comes back as its Defer, a kept page as its record.
    inline: bool
    progress: Progress

    @property
    def req(self) -> CrawlRequest:
        """The request being fetched (as the request middlewares left it)."""
        return self.progress.request

    @property
    def pool_proxy(self) -> int | None:
        """The index of the host's proxy the request goes through (None: direct, or a
        middleware's own proxy, which is not the pool's)."""
        slot = self.progress.slot
        return None if self.progress.proxy or slot is None else slot.proxy

    @property
    def proxy_url(self) -> str | None:
        """The proxy URL the download goes through (None: direct)."""
        return self.progress.proxy or self.rt.proxies.url(self.pool_proxy)

    @property
    def shown_proxy(self) -> str | None:
        """The proxy as the page's record names it, without credentials (None: direct)."""
        if self.progress.proxy:
            return shown_proxy(self.progress.proxy)
        return self.rt.proxies.shown(self.pool_proxy)


@contextmanager
def visiting(rt: FetchDeps, req: CrawlRequest, task_id: str, *, inline: bool = False,
             ack: Callable[[Any], None] | None = None) -> Iterator[Visit]:
    """The visit of ``req`` as task ``task_id``; whatever it holds on leaving is given back.

    ``ack`` queues the task message's ack onto the page's last round trip, with the
    host slot's release (the broker is the state Redis).
    """
    holds = FetchHolds(rt, host_key(req.url), task_id, ack, crawl_id=req.crawl_id)
    try:
        limits = rt.limits(req.crawl_id)
        rt.lifecycle.opening(req.crawl_id, limits)
        yield Visit(rt, task_id, limits, holds, inline, Progress(req))
    finally:
        holds.close()
