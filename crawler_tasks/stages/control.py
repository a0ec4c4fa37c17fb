"""Crawl control: pause, resume and cancel one crawl without touching the others.

The state is in Redis (the crawl's ``control`` field), so it holds across worker
restarts. A worker sees it within :attr:`~crawler_tasks.state.crawls.Crawls.cache_seconds`
when a fetch of the crawl comes up: a paused crawl's fetch is held in Redis (its task
id stays outstanding, so the crawl is not drained and nothing is lost) until
:func:`resume` publishes it again; a cancelled crawl's fetch ends unfetched, counted
``cancelled``. Pages already fetched still reach their stores.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..core import counters
from ..core.models import CrawlRequest
from . import enqueue

if TYPE_CHECKING:
    from .deps import FetchDeps

log = logging.getLogger(__name__)

PAUSED, CANCELLED = "paused", "cancelled"
#: A purged crawl's mark, kept after its keys went: its fetches still queued end unfetched
#: and uncounted (its counters are gone), never bringing the crawl back.
PURGED = "purged"
#: How the task of a cancelled crawl's fetch ends: unfetched, no record, counted.
CANCELLED_END = enqueue.TaskEnd(counts={counters.CANCELLED: 1})


def set_aside(rt: FetchDeps, req: CrawlRequest, task_id: str, control: str) -> None:
    """What a fetch of a paused or purged crawl does instead of fetching: held in Redis
    until the crawl resumes, or dropped uncounted. (A cancelled crawl's fetch ends its
    task, counted ``cancelled``: :data:`CANCELLED_END`.)"""
    if control == PAUSED:
        rt.crawls.hold(req.crawl_id, task_id, req.to_dict())
    else:
        log.info("dropped fetch %s of purged crawl %s: %s", task_id, req.crawl_id, req.url)


def pause(rt: FetchDeps, crawl_id: str, *, settle_s: float | None = None) -> int:
    """Hold the crawl's fetches in Redis from now on (the others go on): its fetches waiting
    for their hosts leave the waiting rooms at once, so they hold no host back; once more
    after the workers' cache time, for fetches parked by a worker that had not yet seen the
    pause (``settle_s``: that wait; 0, none and no second look, for a crawl whose own
    workers are stopping). Returns how many waiting fetches were held."""
    rt.crawls.set_control(crawl_id, PAUSED)
    held = withdraw_waiting(rt, crawl_id)
    settle = rt.crawls.cache_seconds + 0.5 if settle_s is None else settle_s
    if settle <= 0:
        return held
    time.sleep(settle)
    return held + withdraw_waiting(rt, crawl_id)


def resume(rt: FetchDeps, crawl_id: str, *, settle_s: float | None = None) -> int:
    """Run the crawl again: its held fetches are published (same task ids, their bands);
    once more after the workers' cache time, for fetches held by a worker that had not
    yet seen the resume. Returns how many were published."""
    rt.crawls.set_control(crawl_id, None)
    sent = _release(rt, crawl_id)
    time.sleep(rt.crawls.cache_seconds + 0.5 if settle_s is None else settle_s)
    return sent + _release(rt, crawl_id)


def cancel(rt: FetchDeps, crawl_id: str, *, settle_s: float | None = None) -> int:
    """Drop the crawl's fetches: those waiting for their hosts and those held, at once and
    in bulk; those still queued as they come up (counted ``cancelled``, no record).
    Returns how many were dropped now."""
    rt.crawls.set_control(crawl_id, CANCELLED)
    withdraw_waiting(rt, crawl_id)
    dropped = _drop_held(rt, crawl_id)
    time.sleep(rt.crawls.cache_seconds + 0.5 if settle_s is None else settle_s)
    withdraw_waiting(rt, crawl_id)
    return dropped + _drop_held(rt, crawl_id)


def purge_pending(rt: FetchDeps, crawl_id: str) -> int:
    """For a forced purge: take the crawl's fetches out of the waiting rooms and its held
    list (dropped with the crawl). Returns how many."""
    withdraw_waiting(rt, crawl_id)
    dropped = 0
    while held := rt.crawls.take_held(crawl_id):
        dropped += len(held)
    return dropped


def withdraw_waiting(rt: FetchDeps, crawl_id: str) -> int:
    """Move the crawl's fetches out of the hosts' waiting rooms into its held list (held
    first, then taken out: a fetch the mover took meanwhile is let go from the list, so
    none is lost and none is sent twice). Returns how many moved."""
    waiting = rt.hosts.waiting_of(crawl_id)
    if not waiting:
        return 0
    rt.crawls.hold_many(crawl_id, [(w.task_id, w.request) for w in waiting])
    still = rt.hosts.unwait(waiting)
    gone = [(w.task_id, w.request) for w, here in zip(waiting, still) if not here]
    rt.crawls.unhold(crawl_id, gone)
    if any(still):
        rt.hosts.freed.set()  # the rooms left empty are cleared at the mover's next look
    return len(waiting) - len(gone)


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
            enqueue.complete(rt, CrawlRequest.from_dict(request), task_id, CANCELLED_END)
            dropped += 1
    return dropped
