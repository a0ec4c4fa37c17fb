"""The one place that maps tasks to queues and crawl priorities to broker priorities.

All fetches share one queue, ``crawl.fetch``, ordered by message priority:
separate queues per band give no cross-queue order on RabbitMQ, one queue with
message priorities orders strictly on both brokers. Requests to
render in a browser go to ``crawl.render`` instead, banded the same way, which only the
render workers consume (``-Q crawl.render``): a worker started without ``-Q`` serves
every queue but that one.

A crawl priority (Scrapy's convention: integer, higher = sooner, 0 normal) is
clamped into a *band* 0..9 (``NORMAL_BAND + priority``; higher band = sooner).
The band becomes the broker's priority number: RabbitMQ serves 9 first, the
Redis transport serves 0 first (one Redis list per number), so Redis gets
``9 - band``. Parse and store run at the top band so pages in flight drain
before new fetches start.
"""

from __future__ import annotations

from typing import Any

from kombu import Exchange, Queue

FETCH_QUEUE = "crawl.fetch"
#: Celery's default queue: where an app that knows only the broker URL sends a task
#: by name. Workers take the crawl tasks from it too (declared without priorities,
#: as such an app declares it).
DEFAULT_QUEUE = "celery"
PARSE_QUEUE = "crawl.parse"
STORE_QUEUE = "crawl.store"
SEED_QUEUE = "crawl.seed"
#: Fetches rendered in a browser: consumed only by workers that name it (``-Q crawl.render``).
RENDER_QUEUE = "crawl.render"
#: Where callbacks into the calling app go unless their signature names a queue: the
#: calling app's workers consume it; the crawler's never do (they would not know the task).
CALLBACK_QUEUE = "crawl.callbacks"

FETCH_TASK = "crawl.fetch"
#: A fetch whose document is rendered in a browser (``render=True``).
RENDER_TASK = "crawl.render"
#: One page on demand, returning its summary (for Celery's canvas).
PAGE_TASK = "crawl.page"
PARSE_TASK = "crawl.parse"
#: One batch of the store queue written to its stores (a writer; stages.store).
STORE_BATCH_TASK = "crawl.store_batch"
SUBMIT_TASK = "crawl.submit"
FEED_TASK = "crawl.feed"
STATS_TASK = "crawl.flush_stats"
#: Beat's tick that sends the revisits now due (stages.revisit).
REVISIT_TASK = "crawl.revisit"

#: Consumption order of a worker that serves every queue: pages in flight first.
QUEUE_ORDER = (PARSE_QUEUE, STORE_QUEUE, SEED_QUEUE, FETCH_QUEUE, DEFAULT_QUEUE)
#: Queues only the workers that name them consume.
OPT_IN_QUEUES = (RENDER_QUEUE,)
#: Every queue declared.
ALL_QUEUES = (*QUEUE_ORDER, *OPT_IN_QUEUES)
#: Queues whose messages carry bands (one Redis list per band on a Redis broker).
BANDED_QUEUES = (FETCH_QUEUE, RENDER_QUEUE)

#: Message header of every fetch this package publishes: its id was added to its crawl's
#: outstanding set first. A fetch without it came from another app and is adopted.
TRACKED_HEADER = "crawler_tracked"

#: Messages name only their queue: Celery then publishes through the default
#: (anonymous) exchange straight to it. No binding lookup per publish on Redis,
#: and no message silently dropped when a restarted Redis lost its bindings
#: while a long-lived producer still believes them declared.
ROUTES = {
    task: {"queue": queue}
    for task, queue in ((FETCH_TASK, FETCH_QUEUE), (RENDER_TASK, RENDER_QUEUE), (PAGE_TASK, FETCH_QUEUE),
                        (PARSE_TASK, PARSE_QUEUE),
                        (STORE_BATCH_TASK, STORE_QUEUE), (SUBMIT_TASK, SEED_QUEUE),
                        (FEED_TASK, SEED_QUEUE), (STATS_TASK, STORE_QUEUE), (REVISIT_TASK, SEED_QUEUE))
}

MIN_BAND, NORMAL_BAND, MAX_BAND = 0, 5, 9
PIPELINE_BAND = MAX_BAND


def queues() -> list[Queue]:
    """Declared queues, each bound to its own direct exchange under its own name.

    The crawl queues are priority queues on RabbitMQ (``x-max-priority``); the default
    queue is declared as a plain Celery app declares it, or one of the two declarations
    would be refused.
    """
    return [Queue(name, Exchange(name, type="direct"), routing_key=name,
                  queue_arguments=None if name == DEFAULT_QUEUE else {"x-max-priority": MAX_BAND})
            for name in ALL_QUEUES]


def fetch_route(render: bool) -> tuple[str, str]:
    """(task, queue) of a fetch: ``crawl.render`` for a page rendered in a browser."""
    return (RENDER_TASK, RENDER_QUEUE) if render else (FETCH_TASK, FETCH_QUEUE)


def band(priority: int) -> int:
    """Band 0..9 of a crawl priority (higher = sooner)."""
    return max(MIN_BAND, min(MAX_BAND, NORMAL_BAND + priority))


def broker_priority(priority: int, *, redis: bool) -> int:
    """The message priority that makes the broker serve ``priority`` in band order."""
    level = band(priority)
    return MAX_BAND - level if redis else level


def pipeline_priority(*, redis: bool) -> int:
    """Message priority of parse and store tasks (the top band)."""
    return MAX_BAND - PIPELINE_BAND if redis else PIPELINE_BAND


def callback_call(spec: dict[str, Any], payload: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any],
                                                                       dict[str, Any]]:
    """The task, arguments, keyword arguments and send options of a callback into the
    calling app (a signature ``spec``) told ``payload``: ``payload`` first, then the
    signature's own arguments; on :data:`CALLBACK_QUEUE` unless the signature names a queue;
    with no priority, so a worker of any configuration reads it."""
    options = {"queue": CALLBACK_QUEUE, **spec.get("options", {}), "priority": 0}
    return spec["task"], [payload, *spec.get("args", [])], spec.get("kwargs", {}), options
