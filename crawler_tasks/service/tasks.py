"""The Celery tasks: thin adapters from messages to the stages.

Task names are stable; other apps may ``send_task`` them:

``crawl.submit``  kwargs ``urls`` (URLs or seed objects), ``priority``, ``meta``,
                  ``crawl_id``, ``dont_filter`` — gated like ``submit()``.
``crawl.fetch``   args ``[request]`` — one request object; bypasses the gate.
``crawl.render``  args ``[request]`` — the same, its page rendered in a browser (queue
                  ``crawl.render``, served by the render workers only).
``crawl.parse``   args ``[claim_id, request]`` — internal (split pipeline).
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
message back to the broker if it stays down (:func:`.delivery.run_step`); a broker that
cannot take a publish puts the message back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Unpack

from celery import Task, shared_task

from ..core import counters, routing
from ..core.errors import BadInput, BrokerUnavailable, ClaimMissing, QueueFull, StoreTooSlow, StoreUnavailable
from ..core.models import CrawlRequest, PageRecord
from ..core.policy import Defer, Retry
from ..stages import dispatcher, enqueue, feeds, fetch, page, parse, render, revisit, seed, statistics
from ..stages.runtime import Runtime, current
from . import delivery

log = logging.getLogger(__name__)
@shared_task(name=routing.FETCH_TASK, bind=True, base=delivery.CrawlTask, own_retries_setting="max_retries")
@delivery.shaped
def fetch_page(self: Task, request: dict[str, Any]) -> str | None:
    """Download one request; parse and store it, or retry it demoted after a backoff. A
    request to render goes on to ``crawl.render`` under the same task id. Returns what
    became of it (Flower's result column: ``fetched 200``, ``cancelled``...)."""
    return _fetch(self, request, renderer=False)


@shared_task(name=routing.RENDER_TASK, bind=True, base=delivery.CrawlTask, own_retries_setting="max_retries")
@delivery.shaped
def render_page(self: Task, request: dict[str, Any]) -> str | None:
    """Download one request and render it in this process's browser; parse its DOM and
    store it, or retry it demoted after a backoff. Returns what became of it."""
    return _fetch(self, request, renderer=True)


def _fetch(task: Task, request: dict[str, Any], *, renderer: bool) -> str | None:
    req = delivery.request_of(request)
    if req is None:
        return "refused: not a request"
    rt = current(task.app)
    if renderer and not req.render:
        req = req.replace(render=True)
    told: list[str] = []

    def step() -> fetch.Answer:
        if delivery.worker_lost_too_often(task, rt, req) or not delivery.tracked(task, rt, req):
            told.append("given up or not tracked")
            return None
        if not renderer and render.needs_render(rt, req, rt.limits(req.crawl_id)):
            # Fetch workers never start a browser: the page goes to the render workers.
            enqueue.publish_fetch(rt, req.replace(render=True), task.request.id)
            log.info("%s goes to the render workers", req.url)
            told.append("sent to the render workers")
            return None
        return fetch.fetch_page(rt, req, task.request.id, ack=delivery.in_band_ack(task, rt), told=told.append)

    outcome = delivery.run_step(rt, req.url, step)
    if isinstance(outcome, Retry):
        prio = routing.broker_priority(outcome.request.priority, redis=rt.settings.broker_is_redis)
        delivery.resend(task, args=[outcome.request.to_dict()], countdown=outcome.countdown, priority=prio)
    return told[-1] if told else None


#: What ``crawl.page`` does with a page to render, delivered to a worker that does not render.
_TO_RENDER = object()


class PageTask(delivery.CrawlTask):
    """``crawl.page`` retries itself while its host makes it wait: no bound of Celery's own
    (the fetch's retries are bounded by ``CRAWLER_MAX_RETRIES`` as for any fetch)."""

    max_retries = None  # type: ignore[assignment]


@shared_task(name=routing.PAGE_TASK, bind=True, base=PageTask, ignore_result=False)
@delivery.shaped
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

    outcome = delivery.run_step(rt, req.url, step)
    if outcome is _TO_RENDER:
        delivery.resend(self, args=[req.url], kwargs={"request": req.replace(render=True).to_dict()},
                queue=routing.RENDER_QUEUE, countdown=0)
    if isinstance(outcome, dict):
        return outcome
    if isinstance(outcome, Retry):
        delivery.resend(self, args=[req.url], kwargs={"request": outcome.request.to_dict()}, countdown=outcome.countdown)
    if isinstance(outcome, Defer):  # its host is busy: this task waits, not a message in Redis
        delivery.resend(self, args=[req.url], kwargs={"request": req.to_dict()},
                countdown=min(max(outcome.until - time.time(), 0.05), 30.0))
    try:
        page.wait_stored(rt, req, task_id, timeout=max(60.0, rt.settings.store_flush_s * 10))
    except StoreTooSlow as exc:
        log.warning("crawl.page: %s; waiting again", exc)
        delivery.resend(self, args=[req.url], kwargs={"request": req.to_dict()}, countdown=5.0)
    return page.summary(rt, req, outcome if isinstance(outcome, PageRecord) else None)


@shared_task(name=routing.PARSE_TASK, bind=True, base=delivery.CrawlTask)
@delivery.shaped
def parse_page(self: Task, claim_id: str, request: dict[str, Any]) -> None:
    """Parse a fetched page, enqueue its links through the gate, send it to store."""
    _claimed_step(self, claim_id, request, parse.parse_claim)


@shared_task(name=routing.STORE_BATCH_TASK, bind=True, ignore_result=True)
@delivery.shaped
def store_batch(self: Task, writer: str) -> str:
    """Write one batch of the store queue to its stores (the writer ``writer``), then send
    the next store task if another batch is due already. Returns what it wrote, as Flower
    shows it: ``12 records: crawl-a 10, crawl-b 2``."""
    rt = current(self.app)
    crawls: dict[str, int] = {}

    def turn() -> int:
        taken = dispatcher.write_turn(rt, writer, crawls=crawls)
        dispatcher.dispatch(rt, [rt.store_queue.keys.store_shard(writer)])
        return taken

    taken = delivery.run_step(rt, f"store batch {writer}", turn)
    return batch_label(taken or 0, crawls)


def batch_label(taken: int, crawls: dict[str, int]) -> str:
    """``12 records: crawl-a 10, crawl-b 2``; ``no records`` for an empty turn."""
    if not taken:
        return "no records"
    return f"{taken} record{'s' if taken != 1 else ''}: " + ", ".join(f"{c} {n}" for c, n in sorted(crawls.items()))


def _claimed_step(task: Task, claim_id: str, request: dict[str, Any],
                  step: Callable[[Runtime, str, CrawlRequest, str], None]) -> None:
    """A split-pipeline step on a claimed body; a body that expired is fetched again."""
    req = delivery.request_of(request)
    if req is None:
        return
    rt = current(task.app)

    def run() -> None:
        try:
            step(rt, claim_id, req, task.request.id)
        except ClaimMissing:
            _refetch(rt, req, task.request.id)

    delivery.run_step(rt, req.url, run)


@shared_task(name=routing.SUBMIT_TASK, bind=True)
@delivery.shaped
def submit(self: Task, urls: list[Any], **options: Unpack[seed.SubmitOptions]) -> int:
    """Gate and enqueue seeds sent by another app; returns how many were enqueued. Each seed
    is judged on its own: a bad one is logged, counted (``seeds/invalid``) and left out.

    While the broker holds more fetches than ``CRAWLER_MAX_QUEUED`` the seeds
    wait in this task's retries (in the seed queue), not in the fetch queue.
    """
    rt = current(self.app)
    try:
        return delivery.run_step(rt, f"{len(urls) if isinstance(urls, list) else 1} seed(s)",
                    lambda: seed.submit_to(rt, urls, each=True, **options))
    except BadInput as exc:
        log.error("refused seeds: %s", exc)
        return 0
    except (QueueFull, BrokerUnavailable) as exc:  # the admissions were undone: try again later
        log.info("seeds wait: %s", exc)
        delivery.resend(self, countdown=min(rt.settings.retry_backoff_max, 30.0), max_retries=None)
        return 0


@shared_task(name=routing.STATS_TASK, bind=True, ignore_result=True)
@delivery.shaped
def flush_stats(self: Task) -> int:
    """Write changed crawl counters to the stores that keep statistics (Beat runs it)."""
    try:
        return statistics.flush_stats(current(self.app))
    except StoreUnavailable as exc:
        log.warning("crawl statistics not written, next tick tries again: %s", exc)
        return 0


@shared_task(name=routing.FEED_TASK, bind=True, ignore_result=True)
@delivery.shaped
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


@shared_task(name=routing.REVISIT_TASK, bind=True, ignore_result=True)
@delivery.shaped
def revisit_due(self: Task) -> int:
    """Send every crawl's revisits now due (Beat runs it); returns how many were sent."""
    rt = current(self.app)
    sent = delivery.run_step(rt, "revisit tick", lambda: revisit.send_due(rt))
    if sent:
        log.info("revisits sent: %s", ", ".join(f"{crawl} {n}" for crawl, n in sorted(sent.items())))
    return sum(sent.values())


def _refetch(rt: Runtime, req: CrawlRequest, task_id: str) -> None:
    """The body expired before this step read it: fetch the page again, demoted."""
    log.warning("claim check of %s expired; fetching it again", req.url)
    again = req.replace(dont_filter=True, priority=req.priority + rt.settings.retry_priority_adjust)
    enqueue.complete(rt, req, task_id, enqueue.TaskEnd([again], {counters.CLAIM_MISSING: 1}))
