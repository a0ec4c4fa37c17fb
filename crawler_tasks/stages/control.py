"""Crawl control: pause, resume and cancel one crawl without touching the others.

The state is in Redis (the crawl's ``control`` field), so it holds across worker
restarts. A worker sees it within :attr:`~crawler_tasks.state.crawls.Crawls.cache_seconds`
when a fetch of the crawl comes up: a paused crawl's fetch is held in Redis (its task
id stays outstanding, so the crawl is not drained and nothing is lost) until
:func:`resume` publishes it again; a cancelled crawl's fetch ends unfetched, counted
``cancelled``. Pages already fetched still reach their stores.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..core import counters
from ..core.models import CrawlRequest
from . import enqueue

if TYPE_CHECKING:
    from .deps import FetchDeps

PAUSED, CANCELLED = "paused", "cancelled"


def controlled(rt: FetchDeps, req: CrawlRequest, task_id: str, control: str) -> None:
    """What a fetch of a paused or cancelled crawl does instead of fetching."""
    if control == PAUSED:
        rt.crawls.hold(req.crawl_id, task_id, req.to_dict())
    else:
        enqueue.complete(rt, req, task_id, [], {counters.CANCELLED: 1})


def pause(rt: FetchDeps, crawl_id: str) -> None:
    """Hold the crawl's fetches in Redis from now on (the others go on)."""
    rt.crawls.set_control(crawl_id, PAUSED)


def resume(rt: FetchDeps, crawl_id: str, *, settle_s: float | None = None) -> int:
    """Run the crawl again: its held fetches are published (same task ids, their bands);
    once more after the workers' cache time, for fetches held by a worker that had not
    yet seen the resume. Returns how many were published."""
    rt.crawls.set_control(crawl_id, None)
    sent = _release(rt, crawl_id)
    time.sleep(rt.crawls.cache_seconds + 0.5 if settle_s is None else settle_s)
    return sent + _release(rt, crawl_id)


def cancel(rt: FetchDeps, crawl_id: str, *, settle_s: float | None = None) -> int:
    """Drop the crawl's queued, waiting and held fetches as they come up (counted
    ``cancelled``, no record); returns how many held ones were dropped now."""
    rt.crawls.set_control(crawl_id, CANCELLED)
    dropped = _drop_held(rt, crawl_id)
    time.sleep(rt.crawls.cache_seconds + 0.5 if settle_s is None else settle_s)
    return dropped + _drop_held(rt, crawl_id)


def _release(rt: FetchDeps, crawl_id: str) -> int:
    sent = 0
    while held := rt.crawls.take_held(crawl_id):
        for i, (task_id, request) in enumerate(held):
            try:
                enqueue.publish_fetch(rt, CrawlRequest.from_dict(request), task_id)
            except Exception:
                for tid, req in held[i:]:  # not lost: held again for the next resume
                    rt.crawls.hold(crawl_id, tid, req)
                raise
            sent += 1
    return sent


def _drop_held(rt: FetchDeps, crawl_id: str) -> int:
    dropped = 0
    while held := rt.crawls.take_held(crawl_id):
        for task_id, request in held:
            enqueue.complete(rt, CrawlRequest.from_dict(request), task_id, [], {counters.CANCELLED: 1})
            dropped += 1
    return dropped
