"""Fetch stage: download one request, then hand the page on or ask for a retry.

Scrapy's scheme: a retry is the same request one band lower
(``CRAWLER_RETRY_PRIORITY_ADJUST``), after an exponential backoff or the
server's ``Retry-After``; a 3xx is stored and its target becomes a new request
two bands higher (``CRAWLER_REDIRECT_PRIORITY_ADJUST``) through the gate.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from . import enqueue, routing
from .download import REDIRECT_STATUSES, Download, download, status_error
from .errors import FetchError, InvalidURL
from .models import CrawlRequest, PageRecord
from .settings import Settings
from .urls import domain_allowed

if TYPE_CHECKING:
    from .runtime import Runtime

log = logging.getLogger(__name__)

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


@dataclass(frozen=True)
class Retry:
    """Instruction to the task layer: send ``request`` again after ``countdown`` seconds."""

    request: CrawlRequest
    countdown: float


def get_retry_request(req: CrawlRequest, settings: Settings) -> CrawlRequest | None:
    """The retry of ``req`` (demoted, retry count + 1), or None once retries are used up."""
    if req.retries >= settings.max_retries:
        return None
    return req.replace(retries=req.retries + 1,
                       priority=req.priority + settings.retry_priority_adjust)


def backoff(settings: Settings, retries: int) -> float:
    """Seconds before retry number ``retries + 1``: doubling from ``retry_backoff``, capped."""
    return min(settings.retry_backoff * 2 ** retries, settings.retry_backoff_max)


def retry_delay(req: CrawlRequest, settings: Settings, retry_after: float | None) -> float:
    """Seconds before retry number ``req.retries + 1``: ``Retry-After`` if sent, else backoff."""
    if retry_after is not None:
        return min(retry_after, settings.retry_backoff_max)
    return backoff(settings, req.retries)


def get_redirect_request(req: CrawlRequest, location: str, settings: Settings,
                         status: int) -> CrawlRequest:
    """The promoted request for a redirect target; :class:`FetchError` past the hop limit."""
    if req.redirects >= settings.redirect_max_times:
        raise FetchError(f"redirect hops exceeded ({settings.redirect_max_times})", retryable=False)
    method = "GET" if status == 303 else req.method
    return req.replace(url=urljoin(req.url, location), method=method, retries=0,
                       redirects=req.redirects + 1,
                       priority=req.priority + settings.redirect_priority_adjust)


def final_description(err: FetchError, req: CrawlRequest) -> str:
    """What the failure record says, with the attempt count once retries were made."""
    attempts = req.retries + 1
    if attempts == 1 or not err.retryable:
        return err.description
    if err.status is not None:
        return f"{err.description} after {attempts} attempts"
    return f"{err.description} ({attempts} attempts)"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def base_record(req: CrawlRequest) -> PageRecord:
    return PageRecord(url=req.url, fingerprint=req.fingerprint, crawl_id=req.crawl_id,
                      depth=req.depth, fetched_at=now_iso(), method=req.method, meta=req.meta)


def response_record(req: CrawlRequest, dl: Download) -> PageRecord:
    record = base_record(req)
    record.status = dl.status
    record.headers = dl.headers
    record.content_type = dl.content_type or None
    record.size = len(dl.body)
    record.truncated = dl.truncated
    return record


def run(rt: Runtime, req: CrawlRequest, task_id: str) -> Retry | None:
    """Fetch ``req`` as task ``task_id``; a :class:`Retry` tells the caller to re-send it."""
    s = rt.settings
    try:
        dl = download(rt.session, req, timeout=s.download_timeout, maxsize=s.download_maxsize)
    except FetchError as err:
        return _failed(rt, req, task_id, err, None)
    err = status_error(dl)
    if err is not None:
        return _failed(rt, req, task_id, err, dl)
    record = response_record(req, dl)
    counts = _download_counts(dl)
    redirect = _redirect(rt, req, dl, record, counts)
    parse = dl.content_type in HTML_TYPES and bool(dl.body) and 200 <= dl.status < 300
    _hand_on(rt, req, task_id, record, dl.body if parse else None, counts)
    if redirect is not None:
        enqueue.fetches(rt, [redirect], parent_id=task_id)
    rt.crawls.finish(req.crawl_id, task_id)
    return None


def _download_counts(dl: Download) -> dict[str, int]:
    return {"total_num": 1, "total_request_size": dl.request_size,
            "total_response_size": dl.response_size, f"status/{dl.status}": 1,
            "truncated": int(dl.truncated)}


def _redirect(rt: Runtime, req: CrawlRequest, dl: Download, record: PageRecord,
              counts: dict[str, int]) -> CrawlRequest | None:
    location = dl.headers.get("location")
    if dl.status not in REDIRECT_STATUSES or not location:
        return None
    try:
        target = get_redirect_request(req, location, rt.settings, dl.status)
    except (FetchError, InvalidURL) as err:
        record.description = f"redirect not followed: {err}"
        counts["failures"] = 1
        return None
    record.redirect_to = target.url
    if not domain_allowed(target.url, rt.limits(req.crawl_id).domains):
        counts["redirect/offsite"] = 1
        return None
    counts["redirects"] = 1
    return target


def _failed(rt: Runtime, req: CrawlRequest, task_id: str, err: FetchError,
            dl: Download | None) -> Retry | None:
    counts = _download_counts(dl) if dl is not None else {}
    retry = get_retry_request(req, rt.settings) if err.retryable else None
    if retry is not None:
        counts["retries"] = 1
        rt.stats.add(req.crawl_id, counts)
        log.info("retry %s of %s: %s", retry.retries, req.url, err.description)
        return Retry(retry, retry_delay(req, rt.settings, err.retry_after))
    record = response_record(req, dl) if dl is not None else base_record(req)
    record.description = final_description(err, req)
    counts["failures"] = 1
    log.warning("failed %s: %s", req.url, record.description)
    _hand_on(rt, req, task_id, record, None, counts)
    rt.crawls.finish(req.crawl_id, task_id)
    return None


def _hand_on(rt: Runtime, req: CrawlRequest, task_id: str, record: PageRecord,
             body: bytes | None, counts: dict[str, int]) -> None:
    """Write the claim check, track and send the next step: parse when there is HTML."""
    task_name = routing.PARSE_TASK if body is not None else routing.STORE_TASK
    with rt.pipeline() as pipe:
        rt.claims.put(pipe, task_id, record, body)
        rt.crawls.track(pipe, req.crawl_id, enqueue.stage_id(task_id, task_name))
        rt.stats.incr(pipe, req.crawl_id, counts)
        pipe.execute()
    enqueue.publish_stage(rt, task_name, task_id, req)
