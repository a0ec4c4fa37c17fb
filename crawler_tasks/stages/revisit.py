"""Revisits: a crawl's stored pages fetched again on a schedule that adapts to how often
each changes, and what each revisit found.

A crawl started with ``revisit=seconds`` (``submit()``, ``crawler-tasks crawl --revisit``)
keeps a schedule (:mod:`crawler_tasks.state.revisits`). As each of its pages ends,
:func:`observed` signs its text (:mod:`crawler_tasks.core.signature`), compares it with
the record the store holds, marks the record (``signature``, ``changed``,
``previous_fetched_at``, ``changed_at``), counts ``revisit/changed``,
``revisit/unchanged`` or ``revisit/not_modified``, and schedules the page's next fetch
(:mod:`crawler_tasks.core.revisit`). A page found unchanged is not written again unless
``CRAWLER_REVISIT_STORE_UNCHANGED`` says so.

Beat's ``crawl.revisit`` tick (:func:`send_due`) takes each crawl's due pages in batches
of ``CRAWLER_REVISIT_BATCH`` and sends them through the gate, which lets a revisit by;
the fetch revalidates with the stored page's ``ETag``/``Last-Modified``. A full broker
(``CRAWLER_MAX_QUEUED``) or a paused crawl skips the tick; a cancelled or purged crawl's
schedule is dropped.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..core import counters
from ..core.errors import QueueFull
from ..core.models import CrawlRequest, PageRecord
from ..core.revisit import PIN, REVISIT, RevisitPolicy, Slot, freshness
from ..core.signature import text_signature
from ..core.timing import epoch_of, now_iso
from . import control, enqueue

if TYPE_CHECKING:
    from ..core.limits import Limits
    from .deps import FetchDeps, SeedDeps
    from .enqueue import TaskEnd

log = logging.getLogger(__name__)


def observed(rt: FetchDeps, req: CrawlRequest, end: TaskEnd, previous: PageRecord | None,
             limits: Limits) -> TaskEnd:
    """``end`` (a stored page's) as a crawl with revisits ends it: its record marked and
    maybe left out, its counts, its next fetch scheduled. Unchanged in other crawls."""
    record = end.record
    if limits.revisit is None or record is None or req.method != "GET":
        return end
    not_modified = bool(end.counts.get(counters.NOT_MODIFIED))
    record.signature = previous.signature if not_modified and previous else text_signature(record.text)
    visit = req.meta.get(REVISIT) if isinstance(req.meta.get(REVISIT), dict) else None
    policy = RevisitPolicy.of(rt.settings)
    pinned = _pinned(req, visit)
    hint = freshness(record.headers)
    now = time.time()
    counts = dict(end.counts)
    if previous is None:
        record.changed_at = record.fetched_at
        interval = policy.first(limits.revisit, pinned=pinned, hint=hint)
        keep = True
    else:
        before = previous.signature or text_signature(previous.text)
        changed: bool | str = "not_modified" if not_modified else record.signature != before
        record.changed, record.previous_fetched_at = changed, previous.fetched_at
        last_change = previous.changed_at or previous.fetched_at
        record.changed_at = record.fetched_at if changed is True else last_change
        old = float(visit["i"]) if visit else limits.revisit
        interval = pinned or policy.after_visit(old, changed is True, now=now, hint=hint,
                                                due=float(visit["d"]) if visit else now,
                                                changed_before=epoch_of(last_change) or now)
        name = (counters.REVISIT_NOT_MODIFIED if not_modified
                else counters.REVISIT_CHANGED if changed else counters.REVISIT_UNCHANGED)
        counts[name] = counts.get(name, 0) + 1
        keep = changed is True or rt.settings.revisit_store_unchanged
    base = float(visit["d"]) if visit else now
    due = base + interval if base + interval > now else now + interval
    rt.revisits.schedule(req.crawl_id, req.url, Slot(due, interval, pinned is not None, req.depth))
    return replace(end, counts=counts, record=record if keep else None)


def _pinned(req: CrawlRequest, visit: dict[str, Any] | None) -> float | None:
    """The interval a seed or rule pinned for the URL (``meta={"revisit_every": s}``), or
    the one its schedule kept pinned."""
    if visit and visit.get("p"):
        return float(visit["i"])
    pin = req.meta.get(PIN)
    return float(pin) if isinstance(pin, (int, float)) and not isinstance(pin, bool) and pin > 0 else None


def lease_s(tick_s: float) -> float:
    """How long a sent revisit stays out of the schedule before it is sent again: ten ticks,
    and ten minutes at least."""
    return max(10 * tick_s, 600.0)


def send_due(rt: SeedDeps) -> dict[str, int]:
    """Send every crawl's due pages (at most ``CRAWLER_REVISIT_BATCH`` a crawl) through the
    gate as revisits; returns how many per crawl."""
    sent: dict[str, int] = {}
    for crawl_id in rt.revisits.crawls():
        config = rt.crawls.config(crawl_id)
        state = config.control if rt.crawls.registered(crawl_id) else control.CANCELLED
        if state == control.CANCELLED:  # cancelled, or purged: its schedule goes with it
            rt.revisits.drop(crawl_id)
            continue
        if state == control.PAUSED:
            continue
        try:
            enqueue.ensure_room(rt)
        except QueueFull as exc:
            log.warning("revisit tick skipped: %s", exc)
            return sent
        due = rt.revisits.take_due(crawl_id, rt.settings.revisit_batch, lease_s(rt.settings.revisit_tick_s))
        if not due:
            continue
        notify = {"on_change": config.on_change} if config.on_change else None
        requests = [CrawlRequest(url=url, crawl_id=crawl_id, depth=slot.depth, dont_filter=True, notify=notify,
                                 meta={REVISIT: {"i": slot.interval, "d": slot.due, "p": slot.pinned}})
                    for url, slot in due]
        sent[crawl_id] = enqueue.fetches(rt, requests)
        rt.gate.add_counts(crawl_id, {counters.REVISIT_SENT: sent[crawl_id]})
        rt.crawls.running(crawl_id, now_iso())
    return sent
