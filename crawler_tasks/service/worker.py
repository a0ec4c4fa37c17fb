"""What a worker process runs beside its tasks: the store dispatcher and the host mover.

One of each per worker process: in the worker itself for the threads pool, in each
child for prefork (a forked child must not share its parent's threads or
connections). They stop when the process shuts down; records that wait stay in Redis
for the store tasks.
"""

from __future__ import annotations

import ctypes
import logging
import os
from typing import Any

import redis
from celery import current_app, signals
from celery.app import trace as celery_trace
from celery.worker.control import inspect_command

from ..broker.bindings import rewrite_bindings
from ..broker.queues import monitor_listening
from ..core import routing
from ..stages.dispatcher import Dispatcher
from ..stages.mover import Mover
from ..stages.runtime import current

#: The dispatcher and mover running in this process, by process id (a forked child starts its own).
_running: dict[int, tuple[Dispatcher, Mover]] = {}
#: Whether this worker's pool forks children (prefork): the threads then run in each child.
_forking_pool = False
#: Seconds a stopping worker that serves the store queue spends writing what waits, at most.
DRAIN_S = 15.0


log = logging.getLogger(__name__)
#: mallopt's parameter number for the most arenas (glibc's malloc.h).
M_ARENA_MAX = -8


def cap_malloc_arenas(n: int) -> bool:
    """Cap glibc's malloc arenas of this process (and the children it forks) at ``n``;
    False where the C library is not glibc or refuses."""
    try:
        libc = ctypes.CDLL(None)  # this process's own symbols, the C library's among them (no ldconfig run)
        return bool(libc.mallopt(M_ARENA_MAX, n))
    except (OSError, AttributeError):
        return False


@signals.worker_init.connect
def _malloc_arenas(sender: Any = None, **_: Any) -> None:
    """``CRAWLER_MALLOC_ARENAS``, before the pool starts its threads or children."""
    settings = getattr(getattr(sender, "app", None), "crawler_settings", None)
    if settings is not None and settings.malloc_arenas > 0 and not cap_malloc_arenas(settings.malloc_arenas):
        log.info("CRAWLER_MALLOC_ARENAS: not glibc, left as it is")


@signals.worker_init.connect
def _bindings_in_kombu_form(sender: Any = None, **_: Any) -> None:
    """Exchange bindings an earlier version wrote with ``:`` rewritten in kombu's form, which
    a plain Celery app on the same broker reads (Redis broker only)."""
    settings = getattr(getattr(sender, "app", None), "crawler_settings", None)
    if settings is None or not settings.broker_is_redis:
        return
    try:
        client = redis.Redis.from_url(settings.broker_url, socket_timeout=5)
        try:
            rewritten = rewrite_bindings(client)
        finally:
            client.close()
    except redis.RedisError as exc:
        log.info("could not look at the exchange bindings (%s)", exc)
        return
    if rewritten:
        log.warning("%d exchange bindings written by an earlier version rewritten in kombu's form", rewritten)


@signals.worker_init.connect
def _events_when_watched(sender: Any = None, **_: Any) -> None:
    """``CRAWLER_TASK_EVENTS=auto`` on Redis: task events from the start when a monitor
    listens now (Flower switches them on later otherwise, within its few seconds)."""
    settings = getattr(getattr(sender, "app", None), "crawler_settings", None)
    if settings is None or settings.task_events != "auto" or not settings.broker_is_redis \
            or getattr(sender, "task_events", True):
        return
    try:
        watched = monitor_listening(settings)
    except redis.RedisError as exc:
        log.info("CRAWLER_TASK_EVENTS=auto: could not see whether a monitor listens (%s)", exc)
        return
    if watched:
        sender.task_events = True
        log.info("a monitor listens to task events: sending them from the start")


@signals.worker_init.connect
def _note_pool(sender: Any = None, **_: Any) -> None:
    global _forking_pool
    pool = getattr(sender, "pool_cls", None)
    _forking_pool = "prefork" in str(getattr(pool, "__module__", pool))


@signals.worker_process_init.connect
def _start_in_child(**_: Any) -> None:
    start()


@signals.worker_ready.connect
def _start_in_worker(**_: Any) -> None:
    if not _forking_pool:
        start()


def start() -> None:
    """Start this process's store dispatcher and mover (once per process), on the worker's own app."""
    if os.getpid() not in _running:
        rt = current(current_app._get_current_object())
        if rt.settings.log_pages:
            quiet_task_lines()
        _running[os.getpid()] = (Dispatcher(rt).start(), Mover(rt).start())


#: Celery's logger of a line per task received, at INFO.
TASK_LINE_LOGGERS = ("celery.worker.strategy",)


#: Tasks whose response the crawler's own line tells (``fetched 200 GET <url> 12 ms 20 KB``).
PAGE_LOGGED_TASKS = frozenset((routing.FETCH_TASK, routing.RENDER_TASK))


class _PageLoggedSuccess(logging.Filter):
    """Drops Celery's line for a fetch that succeeded: the crawler's line for its response
    said as much (a fetch that failed, and every other task's line, stay)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        return not (record.msg is celery_trace.LOG_SUCCESS and isinstance(args, dict)
                    and args.get("name") in PAGE_LOGGED_TASKS)


def quiet_task_lines() -> None:
    """With a line per response of the crawler's own (``CRAWLER_LOG_PAGES``), Celery's INFO
    line per task received says less and is left out, and so is its line per fetch that
    succeeded; its line per other task ended stays (``12 records: …``), and warnings stay."""
    for name in TASK_LINE_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    trace_log = logging.getLogger(celery_trace.logger.name)
    if not any(isinstance(f, _PageLoggedSuccess) for f in trace_log.filters):
        trace_log.addFilter(_PageLoggedSuccess())


@signals.worker_process_shutdown.connect
@signals.worker_shutdown.connect
def stop(**_: Any) -> None:
    """Stop them: the mover first (what it took and did not publish goes back after its
    lease), then the dispatcher, which in a worker that serves the store queue writes
    what waits first (warm shutdown); then the browser, in a render worker, and the
    stores (a SQLite file is left whole, without its write-ahead log)."""
    running = _running.pop(os.getpid(), None)
    if running is not None:
        dispatcher, mover = running
        mover.stop()
        dispatcher.stop(drain_s=DRAIN_S if _serves_store() else 0.0)
        rt = current(current_app._get_current_object())
        rt.close_browser()
        rt.close_stores()


def _serves_store() -> bool:
    """Whether this worker consumes ``crawl.store`` (all queues, or ``-Q`` naming it): its
    warm shutdown then writes the records of the pages it finished."""
    queues = current_app.amqp.queues
    return routing.STORE_QUEUE in (queues.consume_from or queues)


@inspect_command()
def crawler_holds(state: Any) -> dict[str, int]:
    """What this worker process holds now (``celery inspect crawler_holds``): its large-body
    permits (``permits``, ``permits_free``) and the host-slot releases Redis has not taken
    yet (``owed``). Once its fetches are done, every permit is free and nothing is owed.
    With prefork the tasks run in children: this answers for the main process only."""
    rt = current(state.consumer.app)
    return {"permits": rt.large_bodies.slots, "permits_free": rt.large_bodies.free, "owed": rt.hosts.owed}
