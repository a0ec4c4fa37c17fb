"""The fetch queues of a Redis broker (``crawl.fetch``, and ``crawl.render`` for pages
rendered in a browser), written without a round trip per fetch.

Celery sends each message on its own (one ``LPUSH``, one round trip, and half a
millisecond of CPU in Celery and kombu). A page that finds new links has them
gated in one round trip already; here their messages (:func:`~crawler_tasks.broker.messages.fetch_message`)
go out in one ``LPUSH`` per band, and, when the broker is the state Redis itself
(the quick start and the docker cluster run one Redis for both), inside the page's
last round trip, in the same transaction that lets the page leave its crawl: the
children are in the broker exactly when their parent is done. A worker reads them
as any Celery message: kombu's lists, names and priorities, as ``send_task`` would
write them through :mod:`crawler_tasks.broker.transport`.

With RabbitMQ (or a ``redis+socket://`` broker) there is no :class:`FetchQueue` and
fetches go through Celery.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import redis

from ..core import routing
from ..core.models import CrawlRequest
from ..core.settings import Settings
from ..state.connection import redis_from_url
from ..state.round_trip import is_cluster
from ..state.waiting_room import Handoff
from .lists import redis_list, wake, wake_list
from .messages import TAG_TAIL, fetch_head, fetch_message

#: Broker URL schemes whose fetch queue is written here.
SCHEMES = ("redis://", "rediss://")


class FetchQueue:
    """Pushes fetch messages onto the bands of ``crawl.fetch`` (or ``crawl.render``) on the broker Redis."""

    def __init__(self, client: redis.Redis, *, shared: bool) -> None:
        #: The broker Redis.
        self.redis = client
        #: Whether the broker is the state Redis (never a Redis Cluster): pushes may join the
        #: state's round trips, transactions included.
        self.shared = shared

    @classmethod
    def of(cls, settings: Settings, state: redis.Redis) -> FetchQueue | None:
        """The fetch queue of ``settings``' broker (None: not a Redis one); ``state``
        serves it when the broker is the state Redis (one URL for both)."""
        if not settings.broker_url.startswith(SCHEMES):
            return None
        if settings.broker_url == settings.redis_url and not is_cluster(state):
            return cls(state, shared=True)
        return cls(redis_from_url(settings.broker_url, check=False), shared=False)

    def messages(self, fetches: Sequence[tuple[CrawlRequest, str]]) -> list[tuple[str, bytes]]:
        """The band list and the message of each of ``fetches`` (request, task id)."""
        out = []
        for request, task_id in fetches:
            queue, priority = _band(request)
            out.append((redis_list(queue, priority),
                        fetch_message(request.to_dict(), task_id, url=request.url, priority=priority)))
        return out

    #: What closes a message after its delivery tag (:func:`~.messages.fetch_head`).
    tail = TAG_TAIL

    def handoffs(self, fetches: Sequence[tuple[CrawlRequest, str]]) -> list[Handoff]:
        """What each of ``fetches`` (request, task id) needs to go onto its band from inside a
        script (:class:`~crawler_tasks.state.hosts.Handover`): its band list, its queue's wake
        list, its message up to the delivery tag."""
        out = []
        for request, task_id in fetches:
            queue, priority = _band(request)
            out.append(Handoff(redis_list(queue, priority), wake_list(queue),
                               fetch_head(request.to_dict(), task_id, url=request.url, priority=priority)))
        return out

    def queue(self, pipe: Any, fetches: Sequence[tuple[CrawlRequest, str]]) -> None:
        """Add the messages of ``fetches`` (request, task id: tracked already) to ``pipe``,
        a pipeline on the broker Redis: one ``LPUSH`` per band, in their order, and a token
        on each queue's wake list (:func:`~crawler_tasks.broker.lists.wake_list`)."""
        bands: dict[str, list[bytes]] = defaultdict(list)
        for name, message in self.messages(fetches):
            bands[name].append(message)
        for name, messages in bands.items():
            pipe.lpush(name, *messages)
        for queue in {routing.fetch_route(request.render)[1] for request, _ in fetches}:
            wake(pipe, queue)

    def push(self, fetches: Sequence[tuple[CrawlRequest, str]]) -> None:
        """Send the messages of ``fetches`` in one round trip of their own."""
        if not fetches:
            return
        with self.redis.pipeline(transaction=False) as pipe:
            self.queue(pipe, fetches)
            pipe.execute()


def _band(request: CrawlRequest) -> tuple[str, int]:
    """The queue of ``request`` and its broker priority on a Redis broker."""
    return routing.fetch_route(request.render)[1], routing.broker_priority(request.priority, redis=True)
