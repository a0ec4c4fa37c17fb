"""Fetch stage: download one request, decide (:mod:`crawler_tasks.core.policy`), apply the outcome.

A fetch is a short pipeline over one :class:`~.visit.Visit` (:data:`STEPS`, run until one
answers); applying the answer is the only place with effects: stats, the claim check,
publishing.
With ``CRAWLER_PIPELINE=local`` (the default) a kept page is parsed right
here, in the task that fetched it, and its record joins the store queue
(:mod:`crawler_tasks.state.store_queue`) in the task's last round trip: the page
costs one broker message. With ``split`` the body waits in a claim check for a
``crawl.parse`` task, so parsing can run on other nodes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..core import routing
from ..core.classify import host_feedback
from ..core.errors import BadInput, FetchError, StoreUnavailable
from ..core.models import CrawlRequest, PageRecord
from ..core.policy import (
    Controlled,
    Defer,
    Drop,
    Fail,
    HandOn,
    Outcome,
    Redirect,
    Reroute,
    Retry,
    Skip,
    before_fetch,
    conditional,
    decide,
    reroute,
    reroute_reason,
    tell_at_once,
    with_headers,
)
from ..core.politeness import ALLOW, Feedback, host_key
from ..core.responses import Download
from ..net.download import download
from . import control, enqueue, failures, middleware, near_dups, parse, render, revisit
from .enqueue import TaskEnd
from .middleware import Go
from .visit import Visit, visiting

if TYPE_CHECKING:
    from .deps import FetchDeps

log = logging.getLogger(__name__)

#: What a fetch's task gives back to the task layer: a Retry to send again, a Defer
#: (``crawl.page`` waits in its own task), a kept page's record (``crawl.page``), or None.
Answer = Retry | Defer | PageRecord | None


def fetch_page(rt: FetchDeps, req: CrawlRequest, task_id: str, *, inline: bool = False,
               ack: Callable[[Any], None] | None = None,
               told: Callable[[str], None] | None = None) -> Answer:
    """Fetch ``req`` as task ``task_id``: its visit goes through :data:`STEPS` until one
    answers, and the answer is applied (:func:`apply`).

    Before the download, robots.txt and the host limiter have their say (a
    disallowed URL is skipped, a busy host makes the fetch wait in Redis);
    after it, the host's slot is freed with what the response told about it.
    A request that says ``render`` has its downloaded document rendered in this process's
    browser (:mod:`crawler_tasks.stages.render`) and its DOM parsed.
    ``inline`` (``crawl.page``, which must answer for its own page): a fetch that
    must wait comes back as its Defer instead of waiting in Redis, and a page
    handed on comes back as its record. ``ack`` queues the task message's ack onto
    the page's last round trip with the slot's release (the broker is the state Redis).
    Whatever the fetch holds is given back once, on every way out (:func:`~.visit.visiting`).
    ``told`` hears what became of it (:func:`~crawler_tasks.core.policy.outcome_label`).
    """
    with visiting(rt, req, task_id, inline=inline, ack=ack) as visit:
        outcome = first_answer(visit, STEPS)
        if told is not None:
            told(outcome_label(outcome))
        return apply(visit, outcome)


Step = Callable[[Visit], Outcome | None]


def first_answer(visit: Visit, steps: Sequence[Step]) -> Outcome:
    """Run ``steps`` on ``visit`` in order until one answers; the last always does."""
    for step in steps:
        outcome = step(visit)
        if outcome is not None:
            return outcome
    raise AssertionError(f"no step answered for {visit.req.url}")


def check_control(v: Visit) -> Outcome | None:
    """A paused, cancelled or purged crawl's fetch goes no further (seen within the
    crawl configuration's cache time); ``crawl.page`` waits out a pause in its own task."""
    state = v.limits.control
    if state is None:
        return None
    if v.inline and state == control.PAUSED:
        return Defer(v.req, time.time() + v.rt.crawls.cache_seconds)
    return Controlled(state)


def take_slot(v: Visit) -> Skip | Defer | None:
    """robots.txt, then the host's slot: a disallowed URL is skipped; robots.txt not known
    yet or a busy host makes the fetch wait. A slot handed over just before the host's
    next time is used at that time."""
    rt = v.rt
    robots = rt.robots.check(v.req, v.task_id) if rt.settings.robotstxt_obey else ALLOW
    if robots.wait_until is not None or not robots.allowed:
        return before_fetch(v.req, robots, None)
    own = v.limits
    slot = v.progress.slot = rt.hosts.acquire(v.holds.host, v.task_id, crawl_delay=robots.crawl_delay,
                                              delay=own.delay, concurrency=own.host_concurrency)
    early = before_fetch(v.req, robots, slot)
    if early is not None:
        return early
    v.holds.acquired(robots.crawl_delay, slot.proxy, own.delay, own.host_concurrency)
    if slot.wait:
        time.sleep(slot.wait)
    return None


def request_middlewares(v: Visit) -> Drop | Fail | None:
    """The crawl's request middlewares: they may drop or fail the request, replace it,
    or name a proxy of their own."""
    if not v.rt.program.middlewares:
        return None
    chain = v.progress.chain = v.rt.program.middlewares_for(v.limits.plugins)
    step = middleware.before_download(chain, v.req, v.limits)
    if not isinstance(step, Go):
        return step
    v.progress.request, v.progress.proxy = step.request, step.proxy
    return None


def fetch(v: Visit) -> Retry | None:
    """The download (conditional when a recrawl revalidates the stored page), and what it
    tells the host: what may switch the host to the proxies is told at once (then the
    request goes again through one), the rest rides with the slot's release."""
    rt, s, page = v.rt, v.rt.settings, v.progress
    page.previous = previous(rt, v.req)
    try:
        # A large body keeps its permit until its record is in the store queue (the visit's end).
        sent = conditional(with_headers(v.req, v.limits.headers), page.previous)
        page.result = download(rt.session, sent, timeout=s.download_timeout,
                               maxsize=s.download_maxsize, proxy=v.proxy_url, permit=v.holds.permit)
    except FetchError as err:
        page.result = err
    v.holds.requested = True
    rt.page_log.response(sent.method, sent.url, page.result)
    feedback = v.holds.feedback = host_feedback(page.result, rt.proxies, v.pool_proxy)
    proxied = tell_at_once(feedback, len(rt.proxies)) and v.holds.now()
    return _rerouted(v, feedback, proxied=proxied)


def render_page(v: Visit) -> None:
    """A request that says ``render`` has its document rendered in this process's browser
    (the host heard of the download already)."""
    result = v.progress.result
    if v.req.render and isinstance(result, Download) and render.renders(result):
        v.progress.result = render.render(v.rt, v.req, result, v.proxy_url)


def response_middlewares(v: Visit) -> Outcome | None:
    """The crawl's response middlewares: they may answer for the page (drop, fail, retry)
    or replace its response."""
    result = v.progress.result
    if not v.progress.chain or not isinstance(result, Download):
        return None
    answered = middleware.after_download(v.progress.chain, v.req, v.progress.proxy, result, v.limits,
                                         v.rt.settings)
    if isinstance(answered, Download):
        v.progress.result = answered
        return None
    return _dressed(v, answered)


def decide_page(v: Visit) -> Outcome:
    """What the download means (:func:`~crawler_tasks.core.policy.decide`): always an answer."""
    result = v.progress.result
    assert result is not None
    reads_text = bool(v.req.callback) or len(v.rt.program.rules) > 0
    return _dressed(v, decide(v.req, result, v.rt.settings, v.limits, previous=v.progress.previous,
                              reads_text=reads_text))


#: A fetch, step by step; the first to answer ends it.
STEPS: tuple[Step, ...] = (check_control, take_slot, request_middlewares, fetch, render_page,
                           response_middlewares, decide_page)


def previous(rt: FetchDeps, req: CrawlRequest) -> PageRecord | None:
    """The record an earlier fetch of ``req`` stored, when recrawls may revalidate it.

    Only with ``CRAWLER_RECRAWL_AFTER`` set (a URL can pass the gate twice) or in a crawl
    with revisits, and for GET; a store that cannot answer now means a plain fetch.
    """
    if (rt.settings.recrawl_after <= 0 and rt.limits(req.crawl_id).revisit is None) or req.method != "GET":
        return None
    try:
        return rt.store(rt.limits(req.crawl_id).store).get(req.fingerprint)
    except (StoreUnavailable, BadInput):  # down, or not configured here: the write will say so
        return None


def _rerouted(v: Visit, feedback: Feedback, *, proxied: bool) -> Retry | None:
    """The retry :func:`~crawler_tasks.core.policy.reroute_reason` calls for, logged: a
    direct request blocked (``proxied``: its host goes through the proxies now) or a failed
    proxy (benched, the next one is tried)."""
    rt, req = v.rt, v.req
    reason = reroute_reason(feedback, direct=v.pool_proxy is None, proxies=len(rt.proxies))
    if reason is None:
        return None
    if reason is Reroute.PROXY_FAILED:
        log.warning("proxy %s failed for %s: benched for %gs", rt.proxies.shown(feedback.proxy),
                    req.url, rt.settings.proxy_bench_s)
    elif proxied:
        log.info("%s is blocking direct requests: %s goes through a proxy", host_key(req.url), req.url)
    return reroute(req, rt.settings, reason)


def _dressed(v: Visit, outcome: Outcome) -> Outcome:
    """The outcome of a downloaded page with what its download adds: a rendered page's
    DOM to parse, and the proxy its request went through named on its record."""
    result = v.progress.result
    if isinstance(outcome, HandOn) and isinstance(result, Download) and result.rendered is not None:
        outcome = render.with_dom(v.rt, outcome, result)
    record = getattr(outcome, "record", None)
    shown = v.shown_proxy
    if shown is not None and record is not None:
        record.proxy = shown
    return outcome


def apply(v: Visit, outcome: Outcome) -> Answer:
    """Carry out ``outcome`` of the visit; a Retry goes back to the task layer.

    An outcome that ends the task ends it in :func:`finish_page`, whose last round
    trip gives the host slot back.
    """
    rt, req, task_id = v.rt, v.req, v.task_id
    match outcome:
        case Retry(request=again, reason=reason, counts=counts):
            log.info("retry %s of %s: %s", again.retries, req.url, reason)
            rt.gate.count_once(req.crawl_id, task_id, f"retry:{again.retries}", counts)
            return outcome
        case Defer() if v.inline:
            return outcome
        case Defer(request=waiting, until=until):
            # Not a retry: the same task id (still outstanding in its crawl) waits in Redis
            # for its host, and comes back in its band with no retry used.
            rt.hosts.park(host_key(req.url), task_id, waiting, until)
            v.holds.given_back()  # the park freed whatever slot the task held
            return None
        case Controlled(control=control.CANCELLED):
            end = control.CANCELLED_END
        case Controlled(control=state):
            control.set_aside(rt, req, task_id, state)
            return None
        case Drop(counts=counts, follow=follow):  # a middleware's choice: no record; its replacement is gated
            end = TaskEnd(follow, counts)
        case HandOn():
            end = near_dups.checked(rt, revisit.observed(rt, req, parsed(v, outcome), v.progress.previous, v.limits))
        case Redirect(record=record, target=target, counts=counts):
            end = TaskEnd([target], counts, record=record)
        case Fail(record=record):
            log.warning("failed %s: %s", req.url, record.description)
            end = TaskEnd(*_told(v, outcome), record=record)
        case Skip(record=record, counts=counts):
            log.warning("skipped %s: %s", req.url, record.description)
            end = TaskEnd((), counts, record=record)
    finish_page(v, end)
    return getattr(outcome, "record", None) if v.inline else None


def finish_page(v: Visit, end: TaskEnd) -> None:
    """End the visit's task as ``end`` says; the host slot's release (and the message's
    ack) ride on its last round trip."""
    enqueue.complete(v.rt, v.req, v.task_id, end, last=v.holds.queue, limits=v.limits)


def parsed(v: Visit, kept: HandOn) -> TaskEnd:
    """How a kept page's task ends: its HTML parsed here (links, items, the record), or,
    with the split pipeline, its body left in a claim check for a ``crawl.parse`` task."""
    rt, req = v.rt, v.req
    if kept.http_error is not None:  # a 4xx/5xx page its request did not accept: stored, and told
        follow, counts = _told(v, Fail(kept.record, kept.counts, kind="http", reason=kept.http_error))
        return TaskEnd(follow, counts, record=kept.record)
    if kept.body is None:
        return TaskEnd((), kept.counts, record=kept.record)
    if rt.settings.pipeline == "split":
        rt.claims.write(req.crawl_id, v.task_id, kept.record, kept.body)
        return TaskEnd((), kept.counts, stage=routing.PARSE_TASK)
    return parse.parse_page(rt, req, kept.record, kept.body, v.limits, kept.counts)


def _told(v: Visit, failed: Fail) -> tuple[list[CrawlRequest], dict[str, int]]:
    """What the request's errback and the program's error handler made of a failed page:
    the requests they ask for and the counts they add (none without either)."""
    if v.rt.program.error_handler is None and v.req.errback is None:
        return [], dict(failed.counts)
    description = failed.record.description or f"HTTP {failed.record.status}"
    failure = failures.failure_of(failed.kind, failed.reason, description, v.req, failed.record.status)
    follow, told = failures.tell(v.rt.program, failure, v.req, v.limits)
    return follow, {**failed.counts, **told}


def outcome_label(outcome: Outcome) -> str:
    """What became of a fetch, in a few words: its task's result, as Flower shows it
    (``fetched 200``, ``skipped: disallowed by robots.txt``, ``waiting for its host``,
    ``cancelled``...)."""
    match outcome:
        case HandOn(record=record):
            return f"fetched {record.status}"
        case Redirect(record=record):
            return f"redirected {record.status}"
        case Retry(request=again, reason=reason):
            return f"retry {again.retries}: {reason}"
        case Fail(reason=reason):
            return f"failed: {reason}"
        case Defer():
            return "waiting for its host"
        case Skip(record=record):
            return f"skipped: {record.description}"
        case Drop():
            return "dropped by a middleware"
        case Controlled(control=state):
            return {"paused": "held: crawl paused"}.get(state, state)
