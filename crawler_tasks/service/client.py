"""What another Python app calls: :func:`submit` seeds to the running workers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Unpack

from ..stages.runtime import current
from ..stages.seed import SubmitOptions, submit_to
from .celery_app import default_app


def submit(url_or_urls: str | dict[str, Any] | Iterable[str | dict[str, Any]],
           **options: Unpack[SubmitOptions]) -> int:
    """Enqueue seeds for crawling; returns how many the gate accepted and enqueued.

    ``priority``: higher is sooner (0 normal). ``dont_filter``: bypass the gate
    (recrawl a URL already seen). ``plugins``: the plugin modules (of the workers'
    ``CRAWLER_PLUGINS``) whose rules and item pipelines apply to this crawl; by default
    every loaded one. ``on_page``: a task name or a Celery signature, sent a small JSON
    summary of each page of this submission once it is stored (``url``, ``status``,
    ``fingerprint``, ``crawl_id``, ``depth``, ``items``, ``store``, ``description``),
    exactly once per page; ``on_page_follow``: of the pages found from them too.
    ``on_done``: sent ``{"crawl_id", "stats"}`` when the crawl next drains. Both go to
    the queue ``crawl.callbacks`` unless the signature names one. ``revisit``: seconds;
    the crawl keeps a revisit schedule, each stored page first due again after that long,
    then as often as it changes (``docs/recrawl.md``); ``on_change``: a task name or a
    Celery signature its revisits send a small JSON summary to (``url``, ``fingerprint``,
    ``crawl_id``, ``status``, ``changed_at``, ``previous_fetched_at``, ``signature``,
    ``store``) once for each page they find changed, after it is stored again. Raises
    :class:`~crawler_tasks.core.errors.InvalidURL` before enqueuing anything when a
    seed is not an http(s) URL.
    """
    return submit_to(current(default_app()), url_or_urls, **options)
