"""Fetch stage: download one request, decide (:mod:`crawler_tasks.core.policy`), apply the outcome.

Applying is the only place with effects: stats, the claim check, publishing.
With ``CRAWLER_PIPELINE=local`` (the default) a kept page is parsed right
here, in the task that fetched it, and its record joins the store queue
(:mod:`crawler_tasks.state.store_queue`) in the task's last round trip: the page
costs one broker message. With ``split`` the body waits in a claim check for a
``crawl.parse`` task, so parsing can run on other nodes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core import routing
from ..core.classify import host_feedback
from ..core.errors import FetchError
from ..core.models import CrawlRequest, PageRecord
from ..core.policy import (
    Counts,
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
)
from ..core.politeness import ALLOW, Feedback, host_key
from ..core.responses import Download
from ..net.download import download
from . import control, enqueue, failures, middleware, parse, render, store
from .holds import FetchHolds
from .middleware import Go

if TYPE_CHECKING:
    from ..core.limits import Limits
    from ..core.program import Middleware
    from .deps import FetchDeps

log = logging.getLogger(__name__)


def fetch_page(rt: FetchDeps, req: CrawlRequest, task_id: str, *, inline: bool = False,
               ack: Callable[[Any], None] | None = None) -> Retry | Defer | PageRecord | None:
    """Fetch ``req`` as task ``task_id``; a returned Retry tells the task to re-send it.

    Before the download, robots.txt and the host limiter have their say (a
    disallowed URL is skipped, a busy host makes the fetch wait in Redis);
    after it, the host's slot is freed with what the response told about it.
    A request that says ``render`` has its downloaded document rendered in this process's
    browser (:mod:`crawler_tasks.stages.render`) and its DOM parsed.
    ``inline`` (``crawl.page``, which must answer for its own page): a fetch that
    must wait comes back as its Defer instead of waiting in Redis, and a page
    handed on comes back as its record. ``ack`` queues the task message's ack onto
    the page's last round trip with the slot's release (the broker is the state Redis).
    """
    # Whatever this fetch holds (a slot the mover reserved for it, the slot it acquires, a
    # large-body permit) is given back once, on every way out: the finally.
    holds = FetchHolds(rt, host_key(req.url), task_id, ack)
    try:
        return _fetch(rt, req, task_id, holds, inline=inline)
    finally:
        holds.close()


def _fetch(rt: FetchDeps, req: CrawlRequest, task_id: str, holds: FetchHolds, *,
           inline: bool) -> Retry | Defer | PageRecord | None:
    s = rt.settings
    limits = rt.limits(req.crawl_id)  # the crawl's limits, resolved once for the page
    if limits.control is not None:  # paused or cancelled (seen within the config cache)
        if inline and limits.control == control.PAUSED:  # crawl.page waits in its own task
            return Defer(req, time.time() + rt.crawls.cache_seconds)
        control.controlled(rt, req, task_id, limits.control, holds)
        return None
    robots = rt.robots.check(req, task_id) if s.robotstxt_obey else ALLOW
    if robots.wait_until is not None or not robots.allowed:
        refused = before_fetch(req, robots, None)
        assert refused is not None  # robots.txt not known yet, or disallowed: never "go"
        return apply(rt, req, task_id, refused, release=holds, limits=limits, inline=inline)
    slot = rt.hosts.acquire(holds.host, task_id, crawl_delay=robots.crawl_delay)
    early = before_fetch(req, robots, slot)
    if early is not None:
        return apply(rt, req, task_id, early, release=holds, limits=limits, inline=inline)
    holds.acquired(robots.crawl_delay, slot.proxy)
    if slot.wait:  # handed over just before the host's next time: it goes at that time
        time.sleep(slot.wait)
    result: Download | FetchError | None = None
    chain: tuple[Middleware, ...] = ()
    go = Go(req, None)
    if rt.program.middlewares:
        chain = rt.program.middlewares_for(limits.plugins)
        step = middleware.before_download(chain, req, limits)
        if not isinstance(step, Go):
            return apply(rt, req, task_id, step, release=holds, limits=limits, inline=inline)
        go, req = step, step.request
    pool_proxy = None if go.proxy else slot.proxy  # a middleware's own proxy is not the pool's
    proxy_url = go.proxy or rt.proxies.url(slot.proxy)
    before = store.previous(rt, req)
    try:
        # A large body keeps its permit until its record is in the store queue (the finally).
        result = download(rt.session, conditional(req, before), timeout=s.download_timeout,
                          maxsize=s.download_maxsize, proxy=proxy_url, permit=holds.permit)
    except FetchError as err:
        result = err
    feedback = holds.feedback = host_feedback(result, rt.proxies, pool_proxy)
    # What may switch the host to the proxies is told at once; the rest rides along.
    proxied = False
    if tell_at_once(feedback, len(rt.proxies)):
        proxied = holds.now()
    outcome: Outcome | None = _rerouted(rt, req, feedback, direct=pool_proxy is None, proxied=proxied)
    if outcome is None and req.render and isinstance(result, Download) and render.renders(result):
        result = render.render(rt, req, result, proxy_url)  # the host heard of the download already
    if outcome is None:
        if chain and isinstance(result, Download):
            answered = middleware.after_download(chain, req, go.proxy, result, limits, s)
            if isinstance(answered, Download):
                result = answered
            else:
                outcome = answered
        if outcome is None:
            outcome = decide(req, result, s, limits, previous=before)
    if isinstance(outcome, HandOn) and isinstance(result, Download) and result.rendered is not None:
        outcome = render.handed_on(rt, outcome, result)
    shown = middleware.shown_proxy(go.proxy) if go.proxy else rt.proxies.shown(slot.proxy)
    return apply(rt, req, task_id, _via(outcome, shown), release=holds, limits=limits, inline=inline)


def _rerouted(rt: FetchDeps, req: CrawlRequest, feedback: Feedback, *, direct: bool,
              proxied: bool) -> Retry | None:
    """The retry :func:`~crawler_tasks.core.policy.reroute_reason` calls for, logged: a
    direct request blocked (``proxied``: its host goes through the proxies now) or a failed
    proxy (benched, the next one is tried)."""
    reason = reroute_reason(feedback, direct=direct, proxies=len(rt.proxies))
    if reason is None:
        return None
    if reason is Reroute.PROXY_FAILED:
        log.warning("proxy %s failed for %s: benched for %gs", rt.proxies.shown(feedback.proxy),
                    req.url, rt.settings.proxy_bench_s)
    elif proxied:
        log.info("%s is blocking direct requests: %s goes through a proxy", host_key(req.url), req.url)
    return reroute(req, rt.settings, reason)


def _via(outcome: Outcome, proxy: str | None) -> Outcome:
    """``outcome`` with the proxy its request went through named on its record."""
    record = getattr(outcome, "record", None)
    if proxy is not None and record is not None:
        record.proxy = proxy
    return outcome


def apply(rt: FetchDeps, req: CrawlRequest, task_id: str, outcome: Outcome, *,
          release: FetchHolds | None = None, limits: Limits | None = None,
          inline: bool = False) -> Retry | Defer | PageRecord | None:
    """Carry out ``outcome`` of task ``task_id``; a Retry goes back to the task layer.

    ``release`` (the download's host slot) joins the page's last round trip when the
    outcome ends the task here. ``limits``: the crawl's, when the caller resolved them
    (looked up here otherwise). ``inline``: see :func:`fetch_page`.
    """
    limits = limits or rt.limits(req.crawl_id)
    if isinstance(outcome, Retry):
        log.info("retry %s of %s: %s", outcome.request.retries, req.url, outcome.reason)
        rt.gate.count_once(req.crawl_id, task_id, f"retry:{outcome.request.retries}", outcome.counts)
        return outcome
    if isinstance(outcome, Defer) and inline:
        return outcome
    if isinstance(outcome, Defer):
        # Not a retry: the same task id (still outstanding in its crawl) waits in Redis
        # for its host, and comes back in its band with no retry used.
        rt.hosts.park(host_key(req.url), task_id, outcome.request, outcome.until)
        if release is not None:
            release.given_back()  # the park freed whatever slot the task held
        return None
    if isinstance(outcome, Drop):  # a middleware's choice: no record; its replacement, if any, is gated
        enqueue.complete(rt, req, task_id, list(outcome.follow), outcome.counts,
                         last=release.queue if release is not None else None, limits=limits)
        return None
    if isinstance(outcome, HandOn):
        hand_on(rt, req, task_id, outcome.record, outcome.body, outcome.counts, release=release,
                limits=limits)
    elif isinstance(outcome, Redirect):
        hand_on(rt, req, task_id, outcome.record, None, outcome.counts, [outcome.target], release=release,
                limits=limits)
    elif isinstance(outcome, Fail):
        log.warning("failed %s: %s", req.url, outcome.record.description)
        follow: list[CrawlRequest] = []
        counts = outcome.counts
        if rt.program.error_handler is not None:
            failure = failures.failure_of(outcome.kind, outcome.reason, outcome.record.description or "",
                                          req, outcome.record.status)
            follow, told = failures.tell(rt.program, failure, req, limits)
            counts = {**counts, **told}
        hand_on(rt, req, task_id, outcome.record, None, counts, follow, release=release, limits=limits)
    elif isinstance(outcome, Skip):
        log.warning("skipped %s: %s", req.url, outcome.record.description)
        hand_on(rt, req, task_id, outcome.record, None, outcome.counts, release=release, limits=limits)
    record = getattr(outcome, "record", None)
    return record if inline else None


def hand_on(rt: FetchDeps, req: CrawlRequest, task_id: str, record: PageRecord,
            body: bytes | None, counts: Counts, redirects: list[CrawlRequest] | None = None, *,
            limits: Limits, release: FetchHolds | None = None) -> None:
    """Parse (when ``body`` is HTML) and queue the page's record for the store, here or
    through the split pipeline's parse step."""
    last = release.queue if release is not None else None
    children = list(redirects or [])
    if body is not None and rt.settings.pipeline == "split":
        rt.claims.write(req.crawl_id, task_id, record, body)
        enqueue.complete(rt, req, task_id, children, counts, stage=routing.PARSE_TASK, last=last,
                         limits=limits)
        return
    if body is not None:
        links, parse_counts = parse.parse_page(rt, req, record, body, limits)
        children += links
        counts = {**counts, **parse_counts}
    enqueue.complete(rt, req, task_id, children, counts, record=record, last=last, limits=limits)
