"""What another Python app calls: :func:`submit` seeds to the running workers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..stages.runtime import current
from ..stages.seed import submit_to
from .celery_app import default_app


def submit(url_or_urls: str | dict[str, Any] | Iterable[str | dict[str, Any]], *,
           priority: int = 0, meta: dict[str, Any] | None = None,
           crawl_id: str | None = None, dont_filter: bool = False,
           plugins: Iterable[str] | None = None) -> int:
    """Enqueue seeds for crawling; returns how many the gate accepted and enqueued.

    ``priority``: higher is sooner (0 normal). ``dont_filter``: bypass the gate
    (recrawl a URL already seen). ``plugins``: the plugin modules (of the workers'
    ``CRAWLER_PLUGINS``) whose rules and item pipelines apply to this crawl; by default
    every loaded one. Raises
    :class:`~crawler_tasks.core.errors.InvalidURL` before enqueuing anything when a
    seed is not an http(s) URL.
    """
    return submit_to(current(default_app()), url_or_urls, priority=priority, meta=meta,
                     crawl_id=crawl_id, dont_filter=dont_filter, plugins=plugins)
