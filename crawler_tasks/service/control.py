"""Crawl control for other apps and the CLI: list the cluster's crawls; pause, resume or
cancel one of them (:mod:`crawler_tasks.stages.control`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..core.errors import BadInput
from ..stages import control
from ..stages.runtime import Runtime, current
from ..state.revisits import Outlook
from .celery_app import default_app

#: Seconds a crawl purged with work outstanding stays marked, so its fetches still queued
#: are dropped when they come up.
PURGED_MARK_S = 7 * 86400


def pause(crawl_id: str, rt: Runtime | None = None) -> None:
    """Hold the crawl's fetches in Redis (within a few seconds) until :func:`resume`; the
    other crawls go on. It stays paused across worker restarts."""
    control.pause(rt or current(default_app()), crawl_id)


def resume(crawl_id: str, rt: Runtime | None = None) -> int:
    """Run a paused crawl again; returns how many held fetches were published."""
    return control.resume(rt or current(default_app()), crawl_id)


def cancel(crawl_id: str, rt: Runtime | None = None) -> int:
    """Drop the crawl's queued, waiting and held fetches (counted ``cancelled``, no
    record); it ends once they have come up. Returns how many held ones were dropped now."""
    return control.cancel(rt or current(default_app()), crawl_id)


def purge(crawl_id: str, rt: Runtime | None = None, *, force: bool = False) -> int:
    """Remove the crawl's state from Redis (gate, counters, claims, configuration, held
    fetches and its fetches waiting for their hosts); returns how many keys went. A crawl
    purged with work outstanding stays marked purged for a week: its fetches still queued
    are dropped when they come up. :class:`~crawler_tasks.core.errors.BadInput` when
    work is outstanding (unless ``force``) or no such crawl exists."""
    rt = rt or current(default_app())
    outstanding = rt.crawls.outstanding(crawl_id)
    if outstanding and not force:
        raise BadInput(f"crawl {crawl_id} has {outstanding} task(s) outstanding: purge it once it "
                       "has drained, or pass --force")
    known = rt.crawls.registered(crawl_id)
    if outstanding:  # forced: nothing of it may run once its keys are gone
        control.purge_pending(rt, crawl_id)
    removed = rt.crawls.purge(crawl_id)
    rt.hosts.forget_crawl(crawl_id)
    if not known and not removed:
        raise BadInput(f"no crawl {crawl_id} in Redis")
    if outstanding:
        rt.crawls.mark_purged(crawl_id, control.PURGED, PURGED_MARK_S)
        control.purge_pending(rt, crawl_id)  # what a worker parked meanwhile
    return removed


def list_crawls(rt: Runtime | None = None, crawl_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every crawl the cluster knows (or those of ``crawl_ids``): ``crawl_id``, ``state``
    (``running`` while work is outstanding, else ``finished``; ``paused``, ``cancelling``,
    ``cancelled``), ``started`` and ``finished`` (ISO times: its first seeds, when a worker
    last found it drained), ``outstanding`` tasks, its ``counters`` and its page budget
    ``max_pages`` (0: none), and its ``settings``: its own limits and what its plugins'
    ``custom_settings`` set (header names only), and its ``revisits`` (``scheduled``,
    ``due`` now, ``next_due``; None without a schedule). ``rt``: this
    process's runtime of the default app when not given."""
    rt = rt or current(default_app())
    ids = rt.crawls.all_ids() if crawl_ids is None else list(crawl_ids)
    stats = rt.stats.read_many(ids)
    left = rt.crawls.outstanding_many(ids)
    life = rt.crawls.standings(ids)
    outlooks = rt.revisits.outlooks(ids, time.time())
    return [{"crawl_id": cid, "state": crawl_state(life[cid].control, left[cid]),
             "started": life[cid].started, "finished": None if left[cid] else life[cid].finished,
             "outstanding": left[cid], "counters": stats[cid], "max_pages": life[cid].max_pages,
             "settings": life[cid].settings, "revisits": _revisits(outlooks[cid])} for cid in ids]


def _revisits(outlook: Outlook) -> dict[str, Any] | None:
    """A crawl's revisit schedule: pages kept, due now, the next due time (None: none kept)."""
    if not outlook.scheduled:
        return None
    due = outlook.next_due
    return {"scheduled": outlook.scheduled, "due": outlook.due,
            "next_due": None if due is None else datetime.fromtimestamp(due, UTC).isoformat()}


#: Every state :func:`crawl_state` names.
CRAWL_STATES = ("running", "paused", "cancelling", "cancelled", "finished")


def crawl_state(held: str | None, outstanding: int) -> str:
    """A crawl's state from its control mark and its outstanding tasks."""
    if held == control.CANCELLED:
        return "cancelled" if not outstanding else "cancelling"
    if held == control.PAUSED:
        return "paused"
    return "running" if outstanding else "finished"
