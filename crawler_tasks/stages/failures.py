"""The error handler (``CRAWLER_ERROR_HANDLER``): told of every failure, after the crawler
recorded and counted it, and may ask for follow-up requests.

Follow-ups are resolved against the failed request's URL, kept at its depth and to
its crawl's domains, then gated and banded like any request. A handler that
raises is logged and counted (``plugin/failed/error_handler``); it never fails the
task. A task redelivered after its worker died may tell a failure twice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..core import counters
from ..core.errors import BadInput
from ..core.models import CrawlRequest
from ..core.program import Failure, Program, Request, in_place_of

if TYPE_CHECKING:
    from ..core.limits import Limits

log = logging.getLogger(__name__)


def public_request(req: CrawlRequest) -> Request:
    """What user code sees of a request."""
    return Request(req.url, req.priority, dict(req.meta), req.method, dict(req.headers), req.dont_filter)


def tell(program: Program, failure: Failure, parent: CrawlRequest,
         limits: Limits) -> tuple[list[CrawlRequest], dict[str, int]]:
    """Hand ``failure`` to the error handler; its follow-up requests, and what to count."""
    handler = program.error_handler
    if handler is None:
        return [], {}
    try:
        answer = handler(failure)
        wanted = _requests(answer)
    except Exception as exc:  # noqa: BLE001 - user code
        log.warning("error handler %s failed on %s: %s: %s", program.error_handler_name, failure.url,
                    type(exc).__name__, exc)
        return [], {counters.plugin_failed("error_handler"): 1}
    out: list[CrawlRequest] = []
    counts: dict[str, int] = {}
    offsite = counters.requests_dropped("offsite")
    for r in wanted:
        try:
            child = in_place_of(r, parent, limits)
        except BadInput as exc:
            log.warning("error handler %s asked for a bad request %r: %s", program.error_handler_name, r.url, exc)
            counts[counters.plugin_failed("error_handler")] = 1
            continue
        if child is None:
            counts[offsite] = counts.get(offsite, 0) + 1
        else:
            out.append(child)
    return out, counts


def failure_of(kind: str, reason: str, description: str, req: CrawlRequest, status: int | None = None) -> Failure:
    return Failure(kind=kind, reason=reason, description=description, url=req.url, crawl_id=req.crawl_id,
                   depth=req.depth, request=public_request(req), status=status)


def _requests(answer: Any) -> list[Request]:
    if answer is None:
        return []
    if isinstance(answer, Request):
        return [answer]
    if not isinstance(answer, Iterable):
        raise TypeError(f"returned a {type(answer).__name__}, not None or Requests")
    out = list(answer)
    for r in out:
        if not isinstance(r, Request):
            raise TypeError(f"returned a {type(r).__name__} among its requests")
    return out
