"""The Celery tasks: thin adapters from messages to the stages.

Task names are stable; other apps may ``send_task`` them:

``crawl.submit``  kwargs ``urls`` (URLs or seed objects), ``priority``, ``meta``,
                  ``crawl_id``, ``dont_filter`` — gated like ``submit()``.
``crawl.fetch``   args ``[request]`` — one request object; bypasses the gate.
``crawl.render``  args ``[request]`` — the same, its page rendered in a browser (queue
                  ``crawl.render``, served by the render workers only).
``crawl.parse``   args ``[claim_id, request]`` — internal (split pipeline).
``crawl.store``   args ``[claim_id, request]`` — sent by earlier releases only: the
                  record of the claim joins the store queue (:mod:`crawler_tasks.stages.store`).
``crawl.store_batch`` args ``[writer]`` — internal: write one batch of the store queue
                  (sent by each worker's store dispatcher when a batch is due).
``crawl.feed``    args ``[feed]`` (optional, default ``start_urls``; or ``seed_file``,
                  ``sitemaps``) — one tick of a seed feed (Beat runs them).

Records are written by store tasks on the ``crawl.store`` queue, one batch each,
sent by a dispatcher thread in each worker process when a batch is due; so only the
workers that serve that queue write to the backends. Beside the dispatcher runs the
host mover (:mod:`crawler_tasks.stages.mover`), which hands fetches that waited for
their host back to the broker.

However a crawl task ends, its id leaves its crawl's outstanding set exactly
once: through :func:`crawler_tasks.stages.enqueue.complete` when it finished its work,
or through :meth:`crawler_tasks.state.gate.Gate.abandon` (counted under
``errors/<Exception>``) when it raised something unexpected, ran out of
retries, or its worker died under it too often. A failing state Redis never
fails a task: the task waits for it holding its message, and gives the
message back to the broker if it stays down (:func:`_run`); a broker that
cannot take a publish puts the message back.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from celery import Task, shared_task, signals
from celery.exceptions import Reject
from kombu.exceptions import OperationalError

from ..core import counters, routing
from ..core.errors import BadInput, BrokerUnavailable, ClaimMissing, QueueFull, StateUnavailable, StoreUnavailable
from ..core.models import CrawlRequest, PageRecord
from ..core.policy import Defer, Retry, backoff
from ..core.politeness import host_key
from ..core.urls import host_of
from ..stages import dispatcher, enqueue, feeds, fetch, holds, page, parse, render, seed, store
from ..stages.runtime import Runtime, current
from ..state.connection import is_outage
from ..state.gate import Adoption
from . import redis_transport

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Extra deliveries allowed when a worker process dies under a task (SIGKILL, OOM).
WORKER_LOST_RETRIES = 3
#: Task name -> index of the request in its args.
REQUEST_ARG = {routing.FETCH_TASK: 0, routing.RENDER_TASK: 0, routing.PARSE_TASK: 1, routing.STORE_TASK: 1}


class CrawlTask(Task):
    """Base of the crawl tasks: the retry budget comes from the app's settings."""

    #: Name of the setting that bounds this task's own retries (fetch or store), if any.
    own_retries_setting: str | None = None

    @property
    def max_retries(self) -> int:  # type: ignore[override]
        s = self.app.crawler_settings
        own = getattr(s, self.own_retries_setting) if self.own_retries_setting else 0
        return own + WORKER_LOST_RETRIES


def _shaped(fn: Callable[..., T]) -> Callable[..., T | None]:
    """A task body that logs one line and drops a message whose arguments do not fit its
    signature (another app's mistake), instead of failing with a traceback."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def task(self: Task, *args: Any, **kwargs: Any) -> T | None:
        try:
            signature.bind(self, *args, **kwargs)
        except TypeError as exc:
            log.error("%s[%s]: dropped a message with arguments of the wrong shape: %s (args %.200r, "
                      "kwargs %.200r)", self.name, self.request.id, exc, args, kwargs)
            return None
        return fn(self, *args, **kwargs)

    return task


def _request(data: Any) -> CrawlRequest | None:
    try:
        return CrawlRequest.from_dict(data)
    except BadInput as exc:
        log.error("dropped a malformed request: %s", exc)
        return None


def _run(rt: Runtime, what: str, step: Callable[[], T]) -> T:
    """Run ``step`` (the work of one message about ``what``) so that no outage loses it.

    A state Redis that is away or refuses writes for now
    (:func:`~crawler_tasks.state.connection.is_outage`) never fails the task: it waits, holding its message
    (so a worker whose state is down takes no new work), until the state answers
    a ping, then runs the step again; after ``CRAWLER_STATE_MAX_RETRIES`` such
    runs, or when the state stayed down for :attr:`Settings.state_hold_s`, the
    message goes back to the broker. A broker that refuses a publish puts the
    message back too. Any other Redis error is a bug: the task fails (counted under
    ``errors/<Exception>``), logged with its traceback.
    """
    runs = 0
    while True:
        try:
            return step()
        except redis.RedisError as exc:
            if not is_outage(exc):
                log.exception("Redis refused a command for %s: a bug, not an outage (the task fails)", what)
                raise
            runs += 1
            if runs > rt.settings.state_max_retries or not _await_state(rt, what, exc):
                log.warning("state Redis still failing for %s: message back to the broker", what)
                raise Reject(StateUnavailable(f"state Redis failed: {exc}"), requeue=True) from None
        except OperationalError as exc:
            log.warning("broker refused a publish for %s, message requeued: %s", what, exc)
            raise Reject(exc, requeue=True) from None


#: Set when this worker process begins a warm shutdown: a task waiting for its state
#: Redis gives its message back at once instead of holding the shutdown up.
_stopping = threading.Event()


@signals.worker_shutting_down.connect
def _note_stopping(**_: Any) -> None:
    _stopping.set()


def _await_state(rt: Runtime, what: str, exc: Exception) -> bool:
    """Ping the state Redis with backoff until it answers (True) or the hold runs out."""
    s = rt.settings
    log.warning("state Redis failed for %s (%s): waiting for it, the message held for up to %.0fs",
                what, exc, s.state_hold_s)
    deadline = time.monotonic() + s.state_hold_s
    for attempt in itertools.count():
        left = deadline - time.monotonic()
        if left <= 0 or _stopping.wait(min(backoff(s, attempt), left)):
            return False  # held long enough, or the worker is stopping: back to the broker
        try:
            rt.crawls.ping()
        except redis.RedisError:
            continue
        log.info("state Redis answers again: running %s again", what)
        return True
    return False  # unreachable: itertools.count() does not end


def _resend(task: Task, **options: Any) -> None:
    """``self.retry`` that requeues the message when the retry itself cannot be published."""
    try:
        raise task.retry(**options)
    except Reject as exc:
        raise Reject(exc.reason, requeue=True) from None


def _worker_lost_too_often(task: Task, rt: Runtime, req: CrawlRequest) -> bool:
    """Count a redelivery (its worker died or stopped); give the task up past the bound."""
    if not task.request.delivery_info.get("redelivered"):
        return False
    deliveries = rt.gate.redelivered(req.crawl_id, task.request.id)
    if deliveries <= WORKER_LOST_RETRIES:
        return False
    rt.gate.abandon(req.crawl_id, task.request.id,
                    f"worker lost {deliveries} times ({req.url})", {counters.ERRORS: 1, counters.WORKER_LOST: 1})
    holds.give_back_abandoned(rt, host_key(req.url), task.request.id)
    return True


def _in_band_ack(task: Task, rt: Runtime) -> Callable[[Any], None] | None:
    """The message's ack for the page's last round trip, when the broker is the state Redis
    and this process consumes it (:func:`crawler_tasks.service.redis_transport.in_band_ack`):
    the page then leaves its crawl and its message at once, one round trip fewer."""
    tag = (task.request.properties or {}).get("delivery_tag")
    if not tag or rt.fetch_queue is None or not rt.fetch_queue.shared:
        return None
    return redis_transport.in_band_ack(tag)


def _tracked(task: Task, rt: Runtime, req: CrawlRequest) -> bool:
    """Whether the fetch should run: ours, or sent by another app and adopted into its
    crawl now (False: a late duplicate of one adopted before)."""
    if (task.request.headers or {}).get(routing.TRACKED_HEADER) or \
            getattr(task.request, routing.TRACKED_HEADER, None):
        return True
    adoption = rt.gate.adopt(req.crawl_id, task.request.id)
    if adoption is Adoption.STALE:
        log.info("dropped a late duplicate of direct fetch %s (%s)", task.request.id, req.url)
        return False
    if adoption is Adoption.ADOPTED:
        rt.crawls.register(req.crawl_id, domains=[host_of(req.url)])
    return True


@shared_task(name=routing.FETCH_TASK, bind=True, base=CrawlTask, own_retries_setting="max_retries")
@_shaped
def fetch_page(self: Task, request: dict[str, Any]) -> None:
    """Download one request; parse and store it, or retry it demoted after a backoff. A
    request to render goes on to ``crawl.render`` under the same task id."""
    _fetch(self, request, renderer=False)


@shared_task(name=routing.RENDER_TASK, bind=True, base=CrawlTask, own_retries_setting="max_retries")
@_shaped
def render_page(self: Task, request: dict[str, Any]) -> None:
    """Download one request and render it in this process's browser; parse its DOM and
    store it, or retry it demoted after a backoff."""
    _fetch(self, request, renderer=True)


def _fetch(task: Task, request: dict[str, Any], *, renderer: bool) -> None:
    req = _request(request)
    if req is None:
        return
    rt = current(task.app)
    if renderer and not req.render:
        req = req.replace(render=True)

    def step() -> Retry | None:
        if _worker_lost_too_often(task, rt, req) or not _tracked(task, rt, req):
            return None
        if not renderer and render.needs_render(rt, req, rt.limits(req.crawl_id)):
            # Fetch workers never start a browser: the page goes to the render workers.
            enqueue.publish_fetch(rt, req.replace(render=True), task.request.id)
            log.info("%s goes to the render workers", req.url)
            return None
        return fetch.fetch_page(rt, req, task.request.id, ack=_in_band_ack(task, rt))

    outcome = _run(rt, req.url, step)
    if isinstance(outcome, Retry):
        prio = routing.broker_priority(outcome.request.priority, redis=rt.settings.broker_is_redis)
        _resend(task, args=[outcome.request.to_dict()], countdown=outcome.countdown, priority=prio)


#: What ``crawl.page`` does with a page to render, delivered to a worker that does not render.
_TO_RENDER = object()


class PageTask(CrawlTask):
    """``crawl.page`` retries itself while its host makes it wait: no bound of Celery's own
    (the fetch's retries are bounded by ``CRAWLER_MAX_RETRIES`` as for any fetch)."""

    max_retries = None  # type: ignore[assignment]


@shared_task(name=routing.PAGE_TASK, bind=True, base=PageTask, ignore_result=False)
@_shaped
def crawl_page(self: Task, url: str | dict[str, Any], crawl_id: str | None = None, dont_filter: bool = False,
               priority: int = 0, meta: dict[str, Any] | None = None,
               request: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Crawl one page now and return its summary: through the gate (unless ``dont_filter``),
    robots.txt, politeness, middlewares, rules and pipelines, written to its crawl's store.
    A page to render (``request["render"]``, its rule, ``CRAWLER_RENDER_HOSTS``) moves the
    task to ``crawl.render``, where a render worker renders it.
    For Celery's canvas: ``chain(crawl_page.s(url), myapp.handle.s())``."""
    try:
        req = CrawlRequest.from_dict(request) if request is not None else seed.build_requests(
            url, crawl_id=crawl_id, dont_filter=dont_filter, priority=priority, meta=meta)[0]
    except BadInput as exc:
        log.error("crawl.page: refused: %s", exc)
        return {"url": str(url)[:500], "error": str(exc), "written": False}
    rt = current(self.app)
    task_id = self.request.id

    rendering = (self.request.delivery_info or {}).get("routing_key") == routing.RENDER_QUEUE

    def step() -> Any:
        if not page.track(rt, req, task_id):
            return page.summary(rt, req, None, duplicate=True)
        if not rendering and render.needs_render(rt, req, rt.limits(req.crawl_id)):
            return _TO_RENDER  # fetch workers never start a browser: this task goes to the render workers
        return fetch.fetch_page(rt, req.replace(render=rendering or req.render), task_id, inline=True)

    outcome = _run(rt, req.url, step)
    if outcome is _TO_RENDER:
        _resend(self, args=[req.url], kwargs={"request": req.replace(render=True).to_dict()},
                queue=routing.RENDER_QUEUE, countdown=0)
    if isinstance(outcome, dict):
        return outcome
    if isinstance(outcome, Retry):
        _resend(self, args=[req.url], kwargs={"request": outcome.request.to_dict()}, countdown=outcome.countdown)
    if isinstance(outcome, Defer):  # its host is busy: this task waits, not a message in Redis
        _resend(self, args=[req.url], kwargs={"request": req.to_dict()},
                countdown=min(max(outcome.until - time.time(), 0.05), 30.0))
    try:
        page.wait_stored(rt, req, task_id, timeout=max(60.0, rt.settings.store_flush_s * 10))
    except page.StoreTooSlow as exc:
        log.warning("crawl.page: %s; waiting again", exc)
        _resend(self, args=[req.url], kwargs={"request": req.to_dict()}, countdown=5.0)
    return page.summary(rt, req, outcome if isinstance(outcome, PageRecord) else None)


@shared_task(name=routing.PARSE_TASK, bind=True, base=CrawlTask)
@_shaped
def parse_page(self: Task, claim_id: str, request: dict[str, Any]) -> None:
    """Parse a fetched page, enqueue its links through the gate, send it to store."""
    _claimed_step(self, claim_id, request, parse.parse_claim)


@shared_task(name=routing.STORE_TASK, bind=True, base=CrawlTask)
@_shaped
def store_page(self: Task, claim_id: str, request: dict[str, Any]) -> None:
    """A store message of an earlier release: its record joins the store queue."""
    _claimed_step(self, claim_id, request, store.queue_claim)


@shared_task(name=routing.STORE_BATCH_TASK, bind=True, ignore_result=True)
@_shaped
def store_batch(self: Task, writer: str) -> int:
    """Write one batch of the store queue to its stores (the writer ``writer``), then send
    the next store task if another batch is due already. Returns how many records it took."""
    rt = current(self.app)

    def turn() -> int:
        taken = dispatcher.write_turn(rt, writer)
        dispatcher.dispatch(rt)
        return taken

    return _run(rt, f"store batch {writer}", turn)


def _claimed_step(task: Task, claim_id: str, request: dict[str, Any],
                  step: Callable[[Runtime, str, CrawlRequest, str], None]) -> None:
    """A split-pipeline step on a claimed body; a body that expired is fetched again."""
    req = _request(request)
    if req is None:
        return
    rt = current(task.app)

    def run() -> None:
        try:
            step(rt, claim_id, req, task.request.id)
        except ClaimMissing:
            _refetch(rt, req, task.request.id)

    _run(rt, req.url, run)


@shared_task(name=routing.SUBMIT_TASK, bind=True)
@_shaped
def submit(self: Task, urls: list[Any], priority: int = 0, meta: dict[str, Any] | None = None,
           crawl_id: str | None = None, dont_filter: bool = False,
           plugins: list[str] | None = None, on_page: Any = None, on_page_follow: bool = False,
           on_done: Any = None) -> int:
    """Gate and enqueue seeds sent by another app; returns how many were enqueued. Each seed
    is judged on its own: a bad one is logged, counted (``seeds/invalid``) and left out.

    While the broker holds more fetches than ``CRAWLER_MAX_QUEUED`` the seeds
    wait in this task's retries (in the seed queue), not in the fetch queue.
    """
    rt = current(self.app)
    try:
        return _run(rt, f"{len(urls) if isinstance(urls, list) else 1} seed(s)",
                    lambda: seed.submit_to(rt, urls, priority=priority, meta=meta,
                                           crawl_id=crawl_id, dont_filter=dont_filter,
                                           plugins=plugins, on_page=on_page, on_page_follow=on_page_follow,
                                           on_done=on_done, each=True))
    except BadInput as exc:
        log.error("refused seeds: %s", exc)
        return 0
    except (QueueFull, BrokerUnavailable) as exc:  # the admissions were undone: try again later
        log.info("seeds wait: %s", exc)
        _resend(self, countdown=min(rt.settings.retry_backoff_max, 30.0), max_retries=None)
        return 0


@shared_task(name=routing.STATS_TASK, bind=True, ignore_result=True)
@_shaped
def flush_stats(self: Task) -> int:
    """Write changed crawl counters to the stores that keep statistics (Beat runs it)."""
    try:
        return store.flush_stats(current(self.app))
    except StoreUnavailable as exc:
        log.warning("crawl statistics not written, next tick tries again: %s", exc)
        return 0


@shared_task(name=routing.FEED_TASK, bind=True, ignore_result=True)
@_shaped
def feed(self: Task, name: str = feeds.START_URLS) -> int:
    """One tick of the seed feed ``name``; returns how many seeds it admitted."""
    rt = current(self.app)
    try:
        result = feeds.tick(rt, name)
    except BadInput as exc:
        log.error("crawl.feed: %s", exc)
        return 0
    log.info("feed %s: %s", result.feed, result.describe())
    if result.fed and result.fed.invalid and result.feed == feeds.START_URLS:
        log.warning("start URLs: %s entries refused, see %s:rejected",
                    result.fed.invalid, rt.settings.start_urls_key)
    return result.fed.admitted if result.fed else 0


def _refetch(rt: Runtime, req: CrawlRequest, task_id: str) -> None:
    """The body expired before this step read it: fetch the page again, demoted."""
    log.warning("claim check of %s expired; fetching it again", req.url)
    again = req.replace(dont_filter=True, priority=req.priority + rt.settings.retry_priority_adjust)
    enqueue.complete(rt, req, task_id, [again], {counters.CLAIM_MISSING: 1})


@signals.task_failure.connect
def _abandon_failed(sender: Task | None = None, task_id: str | None = None,
                    exception: BaseException | None = None, args: Any = None, **_: Any) -> None:
    """An unexpected error ended a crawl task: release its id from the crawl, counted once."""
    index = REQUEST_ARG.get(getattr(sender, "name", ""))
    if index is None or not task_id or not args or len(args) <= index:
        return
    req = _request(args[index])
    if req is None:
        return
    name = type(exception).__name__
    try:
        current(sender.app).gate.abandon(req.crawl_id, task_id, f"{name}: {exception} ({req.url})",
                                         {counters.ERRORS: 1, counters.error(name): 1})
    except redis.RedisError as exc:
        log.error("could not release failed task %s of crawl %s: %s", task_id, req.crawl_id, exc)
