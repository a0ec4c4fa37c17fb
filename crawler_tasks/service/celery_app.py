"""The Celery app, built from :class:`~crawler_tasks.core.settings.Settings`.

Every process that sends to the banded queues with a priority (workers, Beat, other
apps that ``apply_async`` there) must load this configuration: the Redis transport
computes band list names from ``priority_steps`` and ``sep`` on both sides, and a
message sent without a priority must land in the normal band (``docs/gate.md``,
"Priorities and ordering"). The exchange bindings keep kombu's own separator whatever
``sep`` says, so a plain Celery app on the same broker reads them: its control commands
and the crawler's work side by side.

A ``rediss://`` or ``amqps://`` broker gets ``broker_use_ssl`` from its URL
(:func:`~crawler_tasks.state.connection.broker_params`): certificates are verified
unless the URL says ``ssl_cert_reqs=none``.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import redis
from celery import Celery, signals

from ..broker import lists, transport
from ..core import routing
from ..core.errors import CrawlerError, PluginError, SettingsError, UnknownStore
from ..core.program import idle_warning, program_of
from ..core.settings import POOLS, Settings, pool_missing
from ..net.render import browser_problem
from ..state.connection import broker_params, redis_from_url
from ..state.crawls import check_layout
from ..state.keys import Keys
from . import tasks, worker  # noqa: F401  (the shared crawl tasks; the worker's store dispatcher and mover)
from .beat import beat_schedule

transport.register()


def _transport_options(settings: Settings) -> dict[str, Any]:
    if not settings.broker_is_redis:
        return {}
    vt = settings.visibility_timeout
    return {
        "visibility_timeout": vt,
        "priority_steps": list(range(routing.MAX_BAND + 1)),
        # The bands' list names (crawl.fetch:5), as Flower reads them for queue lengths; the
        # transport keeps kombu's own separator in the exchange bindings (broker.bindings).
        "sep": lists.BAND_SEP,
        "queue_order_strategy": "priority",
        # Only the fetch queues have a list per band, and acks skip MULTI/EXEC (broker.transport).
        transport.BANDED_OPTION: list(routing.BANDED_QUEUES),
        # Sweep for messages of dead workers often enough that a small
        # visibility timeout really recovers within about a minute.
        "unacked_restore_interval": max(1, min(10, vt // 4)),
        "unacked_restore_throttle": 1,
        # Every thread of a threads-pool worker acks through this pool: one connection each, and room.
        "max_connections": max(200, settings.worker_concurrency + 20),
    }


def time_limits(settings: Settings) -> tuple[int, int]:
    """(soft, hard) time limits of every task, in seconds: within the visibility timeout."""
    vt = settings.visibility_timeout
    return max(1, int(vt * 0.8)), max(2, int(vt * 0.9))


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery configuration for ``settings`` (JSON only, late acks, strict priority)."""
    redis = settings.broker_is_redis
    broker_url, broker_ssl = broker_params(settings.broker_url)
    return {
        "broker_url": broker_url,
        "broker_use_ssl": broker_ssl or False,
        "broker_transport_options": _transport_options(settings),
        "broker_connection_retry_on_startup": True,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "task_ignore_result": True,  # crawl.page keeps its result, when there is a backend
        "result_backend": settings.result_backend or None,
        "task_queues": routing.queues(),
        "task_default_queue": routing.FETCH_QUEUE,
        "task_routes": routing.ROUTES,
        "task_default_priority": routing.broker_priority(0, redis=redis),
        "task_queue_max_priority": None,  # set per queue (routing.queues)
        "task_inherit_parent_priority": False,
        "task_acks_late": True,
        # No task may hold its message past the visibility timeout, when the broker would hand
        # it to another worker: every wait inside a task has a bound below it (the download
        # timeout, the state-Redis hold, the permit wait), and these limits stop what is
        # left (prefork enforces them; Celery's threads pool does not enforce time limits).
        "task_soft_time_limit": time_limits(settings)[0],
        "task_time_limit": time_limits(settings)[1],
        "task_reject_on_worker_lost": False,
        "task_retry_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        # After a lost broker connection Celery 5.7 lowers the prefetch count by the
        # tasks still running and raises it again as they are acked; their acks
        # fail on the dead connection, so it stayed lowered and, measured on
        # RabbitMQ restarts under load, the worker took no message again.
        "worker_enable_prefetch_count_reduction": False,
        "worker_pool": settings.worker_pool,
        "worker_concurrency": settings.worker_concurrency,
        "worker_max_memory_per_child": settings.worker_max_memory * 1024 or None,  # KiB
        # A task received before Flower switched events on (enable_events) would show
        # in Flower with no name and no arguments: "auto" turns them on at a worker's
        # start when a monitor listens (service.worker), from the start on RabbitMQ.
        "worker_send_task_events": settings.task_events == "on" or (settings.task_events == "auto"
                                                                     and not redis),
        # A fourth event per task, from its sender, for a state Flower shows as queued;
        # its name and URL come with the worker's "received" event.
        "task_send_sent_event": False,
        "worker_hijack_root_logger": True,
        "beat_schedule": beat_schedule(settings),
        "timezone": "UTC",
    }


class CrawlerApp(Celery):
    """A Celery app that carries the :class:`Settings` it was configured from, for the
    runtime (:func:`~crawler_tasks.stages.runtime.current`), the tasks and the worker's
    signal handlers to read as ``app.crawler_settings``."""

    #: The settings the app was built from (``celery worker -c N`` sets their concurrency).
    crawler_settings: Settings

    def __init__(self, *args: Any, settings: Settings, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.crawler_settings = settings

    def __reduce_keys__(self) -> dict[str, Any]:
        """Celery pickles an app as its constructor's keywords: the settings go with them."""
        return {**super().__reduce_keys__(), "settings": self.crawler_settings}


def create_app(settings: Settings) -> CrawlerApp:
    """A configured Celery app with the crawl tasks registered."""
    # The tasks are shared tasks: every app built here has them.
    app = CrawlerApp("crawler_tasks", settings=settings, include=["crawler_tasks.service.tasks"])
    app.config_from_object(celery_config(settings))
    return app


def _is_celery_command() -> bool:
    """Whether this process is the ``celery`` command (worker, beat, flower...), or the
    worker of a local crawl (:mod:`~crawler_tasks.service.worker_main`), which reads as it."""
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return os.path.basename(sys.argv[0]) == "celery" or sys.argv[0].endswith(
        os.path.join("celery", "__main__.py")) or getattr(main_spec, "name", None) == f"{__package__}.worker_main"


def _refuse(message: str) -> None:
    """One line and exit 2 for the ``celery`` command; Celery would print a traceback."""
    sys.stderr.write(f"crawler_tasks: {message}\n")
    raise SystemExit(2)


#: Flower's task list shows these columns unless told otherwise: the arguments (a page's
#: URL), the keyword arguments (its crawl) and the result (what became of the fetch:
#: ``fetched 200``, ``cancelled``...), which Flower leaves out by default.
FLOWER_TASKS_COLUMNS = "name,uuid,state,args,kwargs,result,received,started,runtime,worker"


def _flower_defaults() -> None:
    """Under ``celery -A crawler_tasks flower``: Flower reads ``FLOWER_*`` variables after
    it loaded this app, and its own flags after those; a default given here yields to both."""
    if _is_celery_command() and "flower" in sys.argv[1:]:
        os.environ.setdefault("FLOWER_TASKS_COLUMNS", FLOWER_TASKS_COLUMNS)


def pool_named(argv: list[str]) -> str | None:
    """The pool a ``celery worker`` command line names (``-P x``, ``-Px``, ``--pool x``,
    ``--pool=x``), or None."""
    for i, arg in enumerate(argv):
        if arg in ("-P", "--pool") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--pool="):
            return arg.split("=", 1)[1]
        if arg.startswith("-P") and len(arg) > 2 and not arg.startswith("--"):
            return arg[2:]
    return None


def _settings_from_env() -> Settings:
    """The settings of this process; under ``celery worker -P <pool>`` that pool is
    ``worker_pool``. (Celery cannot tell ``-P prefork`` from its default, and lets a
    configured ``worker_pool`` win over it: ``-P prefork`` would run CRAWLER_WORKER_POOL.)"""
    try:
        settings = Settings.from_env()
        pool = pool_named(sys.argv[1:]) if _is_celery_command() and "worker" in sys.argv[1:] else None
        if pool in POOLS and pool != settings.worker_pool:
            settings = settings.replace(worker_pool=pool)
        if _is_celery_command() and "worker" in sys.argv[1:]:
            missing = pool_missing(settings.worker_pool)
            if missing is not None:
                _refuse(missing)
        return settings
    except SettingsError as exc:
        if _is_celery_command():
            _refuse(str(exc))
        raise


def _app_of(sender: Any) -> CrawlerApp | None:
    """The app a worker signal's sender runs, if :func:`create_app` built it."""
    app = getattr(sender, "app", None)
    return app if isinstance(app, CrawlerApp) else None


@signals.worker_init.connect
def _pool_size(sender: Any = None, **_: Any) -> None:
    """``celery worker -c N`` overrides ``CRAWLER_WORKER_CONCURRENCY``: the runtime sizes its
    Redis connections and idle HTTP connections per thread for the real pool."""
    app = _app_of(sender)
    concurrency = getattr(sender, "concurrency", None)
    if app is not None and isinstance(concurrency, int) and concurrency > 0 \
            and concurrency != app.crawler_settings.worker_concurrency:
        app.crawler_settings = app.crawler_settings.replace(worker_concurrency=concurrency)


@signals.worker_init.connect
def _check_store(sender: Any = None, **_: Any) -> None:
    """A store URI no backend knows, or a malformed one, stops the worker at start."""
    from ..backends import open_store

    app = _app_of(sender)
    if app is None:
        return
    settings = app.crawler_settings
    try:
        open_store(settings.store, settings).close()
    except (UnknownStore, SettingsError) as exc:
        _refuse(f"CRAWLER_STORE: {exc}")


@signals.worker_init.connect
def _check_layout(sender: Any = None, **_: Any) -> None:
    """A worker whose shard counts differ from those this Redis's keys were laid out by
    would name other keys for the same hosts and crawls: it stops at start with one line."""
    app = _app_of(sender)
    if app is None:
        return
    settings = app.crawler_settings
    keys = Keys.of(settings)
    try:
        client = redis_from_url(settings.redis_url, check=False)
        try:
            check_layout(client, keys, note=True)
        finally:
            client.close()
    except SettingsError as exc:
        _refuse(str(exc))
    except (redis.RedisError, CrawlerError):
        pass  # Redis away: the worker waits for it as usual


@signals.worker_init.connect
def _render_queue(sender: Any = None, **_: Any) -> None:
    """A worker started without ``-Q`` serves every queue but ``crawl.render``; one that
    serves ``crawl.render`` must find its browser, or stops at start with one line."""
    app = _app_of(sender)
    if app is None:
        return
    queues = app.amqp.queues
    if getattr(queues, "_consume_from", None) is None:  # no -Q: the default set
        queues.deselect(list(routing.OPT_IN_QUEUES))
        return
    if routing.RENDER_QUEUE in queues.consume_from:
        problem = browser_problem(app.crawler_settings)
        if problem:
            _refuse(f"cannot serve {routing.RENDER_QUEUE}: {problem}")


@signals.worker_init.connect
def _load_plugins(sender: Any = None, **_: Any) -> None:
    """Import ``CRAWLER_PLUGINS`` and the item pipelines before any task runs (a prefork
    pool's children inherit them); one that fails stops the worker at start."""
    app = _app_of(sender)
    if app is None:
        return
    try:
        program = program_of(app.crawler_settings)
    except PluginError as exc:
        _refuse(str(exc))
        return
    for plugin in program.idle():  # said at start, where the worker's log begins
        sys.stderr.write(f"crawler_tasks: warning: {idle_warning(plugin)}\n")


_default: CrawlerApp | None = None
_default_lock = threading.Lock()


def default_app() -> CrawlerApp:
    """The app of this process, built from the environment on first use: what
    ``celery -A crawler_tasks`` runs and :func:`~crawler_tasks.submit` sends through.
    Nothing is configured at import; :func:`create_app` builds others."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _flower_defaults()
                _default = create_app(_settings_from_env())
    return _default


def __getattr__(name: str) -> Any:
    if name == "app":
        return default_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
