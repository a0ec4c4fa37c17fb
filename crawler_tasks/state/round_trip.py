"""One round trip to Redis carrying the commands of several state components.

A page's last step settles its task in its crawl, queues its record for the store and
frees its host's slot (:func:`crawler_tasks.stages.enqueue.complete`): the components
(:class:`~crawler_tasks.state.gate.Gate`, :class:`~crawler_tasks.state.store_queue.StoreQueue`,
:class:`~crawler_tasks.state.hosts.HostLimiter`) each queue their commands onto the
pipeline :class:`RoundTrip` opens, and it goes out once, at the end of the ``with``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis


class RoundTrip:
    """Opens pipelines on the state Redis; knows whether it is a Redis Cluster."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        #: Whether the state Redis is a Redis Cluster (no multi-slot transactions).
        self.cluster = type(client).__name__ == "RedisCluster"

    @contextmanager
    def __call__(self, *, atomic: bool = False) -> Iterator[Any]:
        """A pipeline to queue commands on, executed when the ``with`` block ends without an
        error (``atomic``: as a MULTI/EXEC transaction, all or nothing)."""
        with self.client.pipeline(transaction=atomic) as pipe:
            yield pipe
            pipe.execute()
