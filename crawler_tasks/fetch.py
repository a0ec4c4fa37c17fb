"""Fetch stage: download one request, decide (:mod:`crawler_tasks.policy`), apply the outcome.

Applying is the only place with effects: stats, the claim check, publishing.
With ``CRAWLER_PIPELINE=local`` (the default) a kept page is parsed right
here, in the task that fetched it, and its record joins the store queue
(:mod:`crawler_tasks.store_queue`) in the task's last round trip: the page
costs one broker message. With ``split`` the body waits in a claim check for a
``crawl.parse`` task, so parsing can run on other nodes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from . import enqueue, parse, routing, store
from .download import download
from .errors import FetchError
from .models import CrawlRequest, PageRecord
from .policy import Counts, Defer, Fail, HandOn, Outcome, Redirect, Retry, Skip, conditional, decide

if TYPE_CHECKING:
    from .runtime import Runtime

log = logging.getLogger(__name__)


def fetch_page(rt: Runtime, req: CrawlRequest, task_id: str) -> Retry | None:
    """Fetch ``req`` as task ``task_id``; a returned Retry tells the task to re-send it."""
    s = rt.settings
    before = store.previous(rt, req)
    try:
        result = download(rt.session, conditional(req, before), timeout=s.download_timeout,
                          maxsize=s.download_maxsize)
    except FetchError as err:
        result = err  # type: ignore[assignment]
    return apply(rt, req, task_id, decide(req, result, s, rt.limits(req.crawl_id), previous=before))


def apply(rt: Runtime, req: CrawlRequest, task_id: str, outcome: Outcome) -> Retry | None:
    """Carry out ``outcome`` of task ``task_id``; a Retry goes back to the task layer."""
    if isinstance(outcome, Retry):
        log.info("retry %s of %s: %s", outcome.request.retries, req.url, outcome.reason)
        rt.gate.count_once(req.crawl_id, task_id, f"retry:{outcome.request.retries}", outcome.counts)
        return outcome
    if isinstance(outcome, Defer):
        # Not a retry: the same task id (still outstanding) comes back later,
        # at the same priority, with no retry used.
        enqueue.publish_fetch(rt, outcome.request, task_id, countdown=outcome.countdown)
        return None
    if isinstance(outcome, HandOn):
        hand_on(rt, req, task_id, outcome.record, outcome.body, outcome.counts)
    elif isinstance(outcome, Redirect):
        hand_on(rt, req, task_id, outcome.record, None, outcome.counts, [outcome.target])
    elif isinstance(outcome, (Fail, Skip)):
        log.warning("failed %s: %s", req.url, outcome.record.description)
        hand_on(rt, req, task_id, outcome.record, None, outcome.counts)
    return None


def hand_on(rt: Runtime, req: CrawlRequest, task_id: str, record: PageRecord,
            body: bytes | None, counts: Counts, redirects: list[CrawlRequest] | None = None) -> None:
    """Parse (when ``body`` is HTML) and queue the page's record for the store, here or
    through the split pipeline's parse step."""
    children = list(redirects or [])
    if body is not None and rt.settings.pipeline == "split":
        rt.claims.write(req.crawl_id, task_id, record, body)
        enqueue.complete(rt, req, task_id, children, counts, stage=routing.PARSE_TASK)
        return
    if body is not None:
        links, parse_counts = parse.parse_page(rt, req, record, body)
        children += links
        counts = {**counts, **parse_counts}
    enqueue.complete(rt, req, task_id, children, counts, record=record)
