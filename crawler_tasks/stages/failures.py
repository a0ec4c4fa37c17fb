"""A request's errback and the error handler (``CRAWLER_ERROR_HANDLER``): told of failures,
after the crawler recorded and counted them, and may ask for follow-up requests.

The errback hears of its own request's download failing (kind ``download``,
``http`` or ``middleware``); the error handler of every failure, after the errback.

Follow-ups are resolved against the failed request's URL, kept at its depth and to
its crawl's domains, then gated and banded like any request. A handler that
raises is logged and counted (``plugin/failed/error_handler``, ``plugin/failed/errback``);
it never fails the task. A task redelivered after its worker died may tell a failure twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..core import counters
from ..core.asks import Failure, Request, in_place_of
from ..core.errors import BadInput
from ..core.models import CrawlRequest
from ..core.program import Program

if TYPE_CHECKING:
    from ..core.limits import Limits

log = logging.getLogger(__name__)


#: The failures a request's errback hears of: its download's.
ERRBACK_KINDS = frozenset({"download", "http", "middleware"})


def public_request(req: CrawlRequest) -> Request:
    """What user code sees of a request."""
    return Request(req.url, req.priority, dict(req.meta), req.method, dict(req.headers), req.dont_filter,
                   req.render, req.callback, req.errback, dict(req.cb_kwargs), req.handle_status)


def tell(program: Program, failure: Failure, parent: CrawlRequest,
         limits: Limits) -> tuple[list[CrawlRequest], dict[str, int]]:
    """Hand ``failure`` to the request's errback (when it has one and the failure is its
    download's), then to the error handler; their follow-up requests, and what to count."""
    out: list[CrawlRequest] = []
    counts: dict[str, int] = {}
    if parent.errback and failure.kind in ERRBACK_KINDS:
        errback = program.function(parent.errback, limits.plugins)
        if errback is None:
            log.warning("errback %s of %s is not a function of a plugin loaded on this worker",
                        parent.errback, failure.url)
            counts[counters.plugin_failed("callback_missing")] = 1
        else:
            out, counts = _ask(errback, "errback", parent.errback, failure, parent, limits)
    if program.error_handler is not None:
        more, told = _ask(program.error_handler, "error_handler", program.error_handler_name, failure, parent,
                          limits)
        out += more
        for name, n in told.items():
            counts[name] = counts.get(name, 0) + n
    return out, counts


def _ask(handler: Callable[[Failure], Any], kind: str, name: str, failure: Failure, parent: CrawlRequest,
         limits: Limits) -> tuple[list[CrawlRequest], dict[str, int]]:
    """Tell ``handler`` (the ``kind`` named ``name``) of ``failure``: the requests it asks
    for, and what to count."""
    out: list[CrawlRequest] = []
    counts: dict[str, int] = {}
    try:
        wanted = _requests(handler(failure))
    except Exception as exc:  # noqa: BLE001 - user code
        log.warning("%s %s failed on %s: %s: %s", kind.replace("_", " "), name, failure.url,
                    type(exc).__name__, exc)
        return [], {counters.plugin_failed(kind): 1}
    offsite = counters.requests_dropped("offsite")
    for r in wanted:
        try:
            child = in_place_of(r, parent, limits)
        except BadInput as exc:
            log.warning("%s %s asked for a bad request %r: %s", kind.replace("_", " "), name, r.url, exc)
            counts[counters.plugin_failed(kind)] = 1
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
