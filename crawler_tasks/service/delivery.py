"""How a crawl task takes its message: the delivery machinery every task shares.

A task body whose arguments do not fit is dropped in one log line (:func:`shaped`); a
request that does not parse, too (:func:`request_of`). A state Redis that is away never
fails a task: :func:`run_step` waits for it holding the message and gives it back to
the broker if it stays down. A message redelivered too often after its worker died is
given up, its host slot given back (:func:`worker_lost_too_often`); a direct fetch another
app sent is adopted into its crawl once (:func:`tracked`); and a task an unexpected
error ended leaves its crawl once, counted (the ``task_failure`` handler).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import logging
import threading
import time
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from celery import Task, signals
from celery.exceptions import Reject
from kombu.exceptions import OperationalError

from ..broker import acks
from ..core import counters, routing
from ..core.errors import BadInput, StateUnavailable
from ..core.models import CrawlRequest
from ..core.politeness import host_key
from ..core.timing import backoff
from ..core.urls import host_of
from ..stages import holds
from ..stages.runtime import Runtime, current
from ..stages.seed import check_options
from ..state.connection import is_outage
from ..state.gate import Adoption

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Extra deliveries allowed when a worker process dies under a task (SIGKILL, OOM).
WORKER_LOST_RETRIES = 3
#: Task name -> index of the request in its args.
REQUEST_ARG = {routing.FETCH_TASK: 0, routing.RENDER_TASK: 0, routing.PARSE_TASK: 1}


class CrawlTask(Task):
    """Base of the crawl tasks: the retry budget comes from the app's settings."""

    #: Name of the setting that bounds this task's own retries (fetch or store), if any.
    own_retries_setting: str | None = None

    @property
    def max_retries(self) -> int:
        s = self.app.crawler_settings
        own = getattr(s, self.own_retries_setting) if self.own_retries_setting else 0
        return own + WORKER_LOST_RETRIES


def shaped(fn: Callable[..., T]) -> Callable[..., T | None]:
    """A task body that logs one line and drops a message whose arguments do not fit its
    signature (another app's mistake), instead of failing with a traceback."""
    signature = inspect.signature(fn)
    options = _options_shape(fn, signature)

    @functools.wraps(fn)
    def task(self: Task, *args: Any, **kwargs: Any) -> T | None:
        try:
            bound = signature.bind(self, *args, **kwargs)
            if options is not None:
                check_options(bound.kwargs.get(options[0], {}), options[1])
        except TypeError as exc:
            log.error("%s[%s]: dropped a message with arguments of the wrong shape: %s (args %.200r, "
                      "kwargs %.200r)", self.name, self.request.id, exc, args, kwargs)
            return None
        return fn(self, *args, **kwargs)

    return task


def _options_shape(fn: Callable[..., Any], signature: inspect.Signature) -> tuple[str, type] | None:
    """The name and TypedDict of ``fn``'s ``**options: Unpack[...]``, if it has one."""
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            hint = typing.get_type_hints(fn).get(param.name)
            if typing.get_origin(hint) is typing.Unpack:
                return param.name, typing.get_args(hint)[0]
    return None


def request_of(data: Any) -> CrawlRequest | None:
    try:
        return CrawlRequest.from_dict(data)
    except BadInput as exc:
        log.error("dropped a malformed request: %s", exc)
        return None


def run_step(rt: Runtime, what: str, step: Callable[[], T]) -> T:
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


def resend(task: Task, **options: Any) -> None:
    """``self.retry`` that requeues the message when the retry itself cannot be published."""
    try:
        raise task.retry(**options)
    except Reject as exc:
        raise Reject(exc.reason, requeue=True) from None


def worker_lost_too_often(task: Task, rt: Runtime, req: CrawlRequest) -> bool:
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


def in_band_ack(task: Task, rt: Runtime) -> Callable[[Any], None] | None:
    """The message's ack for the page's last round trip, when the broker is the state Redis
    and this process consumes it (:func:`crawler_tasks.broker.acks.in_band_ack`):
    the page then leaves its crawl and its message at once, one round trip fewer."""
    tag = (task.request.properties or {}).get("delivery_tag")
    if not tag or rt.fetch_queue is None or not rt.fetch_queue.shared:
        return None
    return acks.in_band_ack(tag)


def tracked(task: Task, rt: Runtime, req: CrawlRequest) -> bool:
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


@signals.task_failure.connect
def _abandon_failed(sender: Task | None = None, task_id: str | None = None,
                    exception: BaseException | None = None, args: Any = None, **_: Any) -> None:
    """An unexpected error ended a crawl task: release its id from the crawl, counted once."""
    index = REQUEST_ARG.get(getattr(sender, "name", ""))
    if sender is None or index is None or not task_id or not args or len(args) <= index:
        return
    req = request_of(args[index])
    if req is None:
        return
    name = type(exception).__name__
    try:
        current(sender.app).gate.abandon(req.crawl_id, task_id, f"{name}: {exception} ({req.url})",
                                         {counters.ERRORS: 1, counters.error(name): 1})
    except redis.RedisError as exc:
        log.error("could not release failed task %s of crawl %s: %s", task_id, req.crawl_id, exc)
