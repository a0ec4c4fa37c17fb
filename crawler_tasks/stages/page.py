"""One page on demand (``crawl.page``): through the gate, fetched, parsed (rules included),
its items through the pipelines and its record written, then its summary returned,
so another app composes it with Celery's canvas (chain, group, chord).

It takes the same stages as any page: the gate (unless ``dont_filter``), robots.txt
and the host's politeness, middlewares, rules, pipelines and the store queue. Only
the waits differ: a fetch its host makes wait is retried by its own task (so the
task's result is still its page) instead of waiting in Redis, and the task waits
for its record to be written before it returns.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..core import routing
from ..core.errors import BadInput, StoreTooSlow, StoreUnavailable
from ..core.models import CrawlRequest, PageRecord
from ..core.store_uris import masked
from ..core.timing import now_iso
from ..core.urls import host_of
from ..state.gate import Candidate
from .dispatcher import write_turn
from .enqueue import stage_task_id, store_token

if TYPE_CHECKING:
    from .deps import FetchDeps


def track(rt: FetchDeps, req: CrawlRequest, task_id: str) -> bool:
    """Whether the page is task ``task_id``'s to fetch: tracked already (a retry, a
    redelivery), or admitted by the gate now (False: the gate has seen it)."""
    if rt.gate.pending(req.crawl_id, [task_id])[0]:
        return True
    rt.crawls.register(req.crawl_id, domains=[host_of(req.url)])
    limits = rt.limits(req.crawl_id)
    [admitted] = rt.gate.admit(req.crawl_id, [Candidate(req.fingerprint, task_id, req.dont_filter)],
                               max_pages=limits.max_pages)
    if admitted is not None:
        rt.crawls.running(req.crawl_id, now_iso())
    return admitted is not None


def wait_stored(rt: FetchDeps, req: CrawlRequest, task_id: str, timeout: float) -> None:
    """Return once the record of task ``task_id``'s page is written (its ids have left the
    crawl's outstanding set); :class:`StoreTooSlow` after ``timeout`` seconds.

    A record still waiting once a store task should have written it (a batch is due
    after ``CRAWLER_STORE_FLUSH_S``) is written here, with its batch: a group of
    ``crawl.page`` tasks that fills every slot of a worker must not wait on a store
    task that finds no slot."""
    ids = [store_token(task_id)]
    if rt.settings.pipeline == "split":
        parse_id = stage_task_id(task_id, routing.PARSE_TASK)
        ids += [parse_id, store_token(parse_id)]
    deadline = time.monotonic() + timeout
    help_at = time.monotonic() + rt.settings.store_flush_s + 0.25
    while any(rt.gate.pending(req.crawl_id, ids)):
        if time.monotonic() > deadline:
            raise StoreTooSlow(f"the record of {req.url} was not written within {timeout:.0f}s")
        if time.monotonic() > help_at:
            write_turn(rt, rt.store_queue.writer())
            help_at = time.monotonic() + rt.settings.store_flush_s
            continue
        time.sleep(0.05)


def summary(rt: FetchDeps, req: CrawlRequest, record: PageRecord | None, *, duplicate: bool = False) -> dict[str, Any]:
    """What ``crawl.page`` returns: the page's record as stored (read back from the
    crawl's store when it can answer; a WARC store cannot), in brief, with its items."""
    store = rt.limits(req.crawl_id).store
    try:
        stored = rt.store(store).get(req.fingerprint, req.crawl_id)
    except (StoreUnavailable, BadInput):
        stored = None
    r = stored or record
    return {"url": req.url, "fingerprint": req.fingerprint, "crawl_id": req.crawl_id, "store": masked(store),
            "duplicate": duplicate, "written": r is not None,
            "status": r.status if r else None, "depth": r.depth if r else req.depth,
            "title": r.title if r else None, "description": r.description if r else None,
            "redirect_to": r.redirect_to if r else None, "rule": r.rule if r else None,
            "items": list(r.items) if r else []}
