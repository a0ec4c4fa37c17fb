"""The Celery tasks: thin adapters from messages to the stages.

Task names are stable; other apps may ``send_task`` them:

``crawl.submit``  kwargs ``urls`` (URLs or seed objects), ``priority``, ``meta``,
                  ``crawl_id``, ``dont_filter`` — gated like ``submit()``.
``crawl.fetch``   args ``[request]`` — one request object; bypasses the gate.
``crawl.parse``   args ``[claim_id, request]`` — internal.
``crawl.store``   args ``[claim_id, request]`` — internal.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Task

from . import fetch as fetch_stage
from . import parse as parse_stage
from . import routing, seed
from . import store as store_stage
from .celery_app import app
from .enqueue import fetches
from .errors import BadInput, ClaimMissing, StoreUnavailable
from .models import CrawlRequest
from .runtime import Runtime, current

log = logging.getLogger(__name__)

#: Extra deliveries allowed when a worker process dies under a task (SIGKILL, OOM).
WORKER_LOST_RETRIES = 3

_settings = app.crawler_settings


def _request(data: Any) -> CrawlRequest | None:
    try:
        return CrawlRequest.from_dict(data)
    except BadInput as exc:
        log.error("dropped a malformed request: %s", exc)
        return None


@app.task(name=routing.FETCH_TASK, bind=True,
          max_retries=_settings.max_retries + WORKER_LOST_RETRIES)
def fetch(self: Task, request: dict[str, Any]) -> None:
    """Download one request; retries go back demoted, after a backoff."""
    req = _request(request)
    if req is None:
        return
    rt = current(self.app)
    retry = fetch_stage.run(rt, req, self.request.id)
    if retry is not None:
        prio = routing.broker_priority(retry.request.priority, redis=rt.settings.broker_is_redis)
        raise self.retry(args=[retry.request.to_dict()], countdown=retry.countdown, priority=prio)


@app.task(name=routing.PARSE_TASK, bind=True, max_retries=WORKER_LOST_RETRIES)
def parse(self: Task, claim_id: str, request: dict[str, Any]) -> None:
    """Parse a fetched page, enqueue its links through the gate, send it to store."""
    req = _request(request)
    if req is None:
        return
    rt = current(self.app)
    try:
        parse_stage.run(rt, claim_id, req, self.request.id)
    except ClaimMissing:
        _refetch(rt, req, self.request.id)


@app.task(name=routing.STORE_TASK, bind=True, max_retries=_settings.store_max_retries)
def store(self: Task, claim_id: str, request: dict[str, Any]) -> None:
    """Write the page record; a dead backend means a retry, not a dropped page."""
    req = _request(request)
    if req is None:
        return
    rt = current(self.app)
    try:
        store_stage.run(rt, claim_id, req, self.request.id)
    except ClaimMissing:
        _refetch(rt, req, self.request.id)
    except StoreUnavailable as exc:
        if self.request.retries >= self.max_retries:
            log.error("giving up on storing %s after %s retries (claim %s kept for %ss): %s",
                      req.url, self.request.retries, claim_id, rt.settings.claim_ttl, exc)
            rt.stats.add(req.crawl_id, {"store/failed": 1})
            rt.crawls.finish(req.crawl_id, self.request.id)
            raise
        countdown = fetch_stage.backoff(rt.settings, self.request.retries)
        log.warning("store of %s failed, retry in %.1fs: %s", req.url, countdown, exc)
        rt.stats.add(req.crawl_id, {"store/retries": 1})
        raise self.retry(exc=exc, countdown=countdown,
                         priority=routing.pipeline_priority(redis=rt.settings.broker_is_redis))


@app.task(name=routing.SUBMIT_TASK, bind=True)
def submit(self: Task, urls: list[Any], priority: int = 0, meta: dict[str, Any] | None = None,
           crawl_id: str | None = None, dont_filter: bool = False) -> int:
    """Gate and enqueue seeds sent by another app; returns how many were enqueued."""
    try:
        return seed.submit_to(current(self.app), urls, priority=priority, meta=meta,
                              crawl_id=crawl_id, dont_filter=dont_filter)
    except BadInput as exc:
        log.error("refused seeds: %s", exc)
        return 0


def _refetch(rt: Runtime, req: CrawlRequest, task_id: str) -> None:
    """The body expired before this step read it: fetch the page again, demoted."""
    if not rt.crawls.is_outstanding(req.crawl_id, task_id):
        return  # this step already completed; this is a late redelivery
    log.warning("claim check of %s expired; fetching it again", req.url)
    again = req.replace(dont_filter=True,
                        priority=req.priority + rt.settings.retry_priority_adjust)
    fetches(rt, [again], parent_id=task_id)
    rt.stats.add(req.crawl_id, {"claim/missing": 1})
    rt.crawls.finish(req.crawl_id, task_id)
