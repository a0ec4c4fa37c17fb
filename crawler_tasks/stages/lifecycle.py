"""Item pipelines and middlewares with a lifecycle: ``open(crawl)`` before a worker process
first runs them for a crawl, ``close(crawl)`` once the crawl drains.

Each worker process keeps the crawls it opened (:class:`Lifecycle`). Its once-a-second
housekeeping closes those found drained (nothing outstanding), and a worker that
stops closes what it still holds, so ``close`` runs on every process that ran
``open``, once per opening. A crawl that gets work again after it drained (a later
``submit``) is opened again. A hook that raises is logged and changes nothing else.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..core.limits import Limits
from ..core.program import Hooks, Program

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CrawlInfo:
    """What ``open`` and ``close`` are told of the crawl."""

    crawl_id: str
    store: str
    plugins: tuple[str, ...]
    domains: frozenset[str]
    max_depth: int
    max_pages: int

    @classmethod
    def of(cls, crawl_id: str, limits: Limits) -> CrawlInfo:
        return cls(crawl_id, limits.store, limits.plugins, limits.domains, limits.max_depth, limits.max_pages)


class Lifecycle:
    """The crawls this process opened, and their hooks."""

    def __init__(self, program: Program) -> None:
        self.program = program
        #: Whether any pipeline or middleware has hooks (most programs: none, nothing to do per page).
        self._hooked = bool(program.hooks_for(()))
        self._open: dict[str, tuple[CrawlInfo, tuple[Hooks, ...]]] = {}
        self._lock = threading.Lock()

    def opening(self, crawl_id: str, limits: Limits) -> None:
        """Open the crawl here (its hooks' ``open``) unless it is open already."""
        if not self._hooked or crawl_id in self._open:
            return
        hooks = self.program.hooks_for(limits.plugins)
        if not hooks:
            return
        with self._lock:
            if crawl_id in self._open:
                return
            info = CrawlInfo.of(crawl_id, limits)
            for hook in hooks:
                _call(hook, "open", info)
            self._open[crawl_id] = (info, hooks)

    def close_drained(self, outstanding: Callable[[list[str]], dict[str, int]]) -> list[str]:
        """Close the open crawls ``outstanding`` finds drained; their ids."""
        ids = list(self._open)
        if not ids:
            return []
        drained = [crawl_id for crawl_id, left in outstanding(ids).items() if left == 0]
        self.close(drained)
        return drained

    def close(self, crawl_ids: Iterable[str] | None = None) -> None:
        """Close ``crawl_ids`` (every open crawl when None): their hooks' ``close``."""
        with self._lock:
            ids = list(self._open) if crawl_ids is None else [c for c in crawl_ids if c in self._open]
            closing = [self._open.pop(crawl_id) for crawl_id in ids]
        for info, hooks in closing:
            for hook in hooks:
                _call(hook, "close", info)


def _call(hook: Hooks, which: str, info: CrawlInfo) -> Any:
    func = getattr(hook, which)
    if func is None:
        return None
    try:
        return func(info)
    except Exception as exc:  # noqa: BLE001 - user code
        log.warning("%s of %s failed for crawl %s: %s: %s", which, hook.name, info.crawl_id, type(exc).__name__, exc)
        return None
