"""The unacked notes and acks of :mod:`crawler_tasks.broker.transport`'s channels.

A message taken by the transport's take script is noted as unacked in the same step
(kombu's own note then sends nothing); a fetch's ack may ride in its page's last round
trip (:func:`in_band_ack`; kombu's ack then sends nothing); a message whose note failed
as Redis went away is held and put back once Redis answers (:class:`QoS`).
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

#: Delivery tags noted by the take script itself: kombu's note sends nothing.
noted_in_take: set[str] = set()
#: Delivery tags acked in a task's own round trip (:func:`in_band_ack`): kombu sends nothing.
acked_in_band: set[str] = set()
#: Messages taken from a queue whose unacked note failed (Redis went away): each
#: ``(payload, exchange, routing_key)``, put back when Redis answers.
held: deque[tuple[dict[str, Any], str, str]] = deque()
logger = logging.getLogger(__name__)
#: The process whose channels take messages (a forked pool child inherits the module, not
#: the consumer; it may publish, or close a channel, but takes nothing).
consumer_pid: int | None = None


def in_band_ack(delivery_tag: str) -> Callable[[Any], None] | None:
    """What acks the message ``delivery_tag`` inside a pipeline on the broker Redis (the
    page's last round trip, when the broker is the state Redis), so that kombu's ack
    after the task sends nothing; None when this process does not consume (a prefork
    child: its parent acks)."""
    if consumer_pid != os.getpid():
        return None

    def queue(pipe: Any) -> None:
        pipe.hdel(kombu_redis.Channel.unacked_key, delivery_tag)
        pipe.zrem(kombu_redis.Channel.unacked_index_key, delivery_tag)
        acked_in_band.add(delivery_tag)

    return queue


def consuming() -> None:
    """This process takes messages (its channels consume)."""
    global consumer_pid
    consumer_pid = os.getpid()


class QoS(kombu_redis.QoS):
    """kombu's ack emulation, in plain pipelines on a crawler connection (no MULTI/EXEC):
    kombu's own note and ack take their pipeline from :meth:`pipe_or_acquire`; a message
    its task acked in band (:func:`in_band_ack`) is only forgotten here."""

    def append(self, message: Any, delivery_tag: str) -> None:
        """Note ``message`` as unacked (a message taken by the take script is noted already);
        when Redis fails under the note, hold the message to put back
        (:meth:`give_back_held`) and fail as kombu does."""
        if delivery_tag in noted_in_take:
            noted_in_take.discard(delivery_tag)
            virtual.QoS.append(self, message, delivery_tag)
            return
        try:
            super().append(message, delivery_tag)
        except self.channel.connection_errors:
            delivery = message.delivery_info
            held.append((message._raw, delivery["exchange"], delivery["routing_key"]))
            raise

    def give_back_held(self) -> None:
        """Put each message held by :meth:`append` back at the front of its queue (raises
        the connection error while Redis is still away; what is left stays held)."""
        while held:
            payload, exchange, routing_key = held[0]
            with self.channel.conn_or_acquire() as client, client.pipeline() as pipe:
                self.channel._do_restore_message(payload, exchange, routing_key, pipe)
                pipe.execute()
            held.popleft()
            logger.warning("put back task %s, taken as the broker went away",
                           payload.get("headers", {}).get("id"))

    def restore_visible(self, *args: Any, **kwargs: Any) -> None:
        self.give_back_held()
        super().restore_visible(*args, **kwargs)

    def restore_unacked(self, client: Any = None) -> Any:
        self.give_back_held()
        return super().restore_unacked(client)

    def ack(self, delivery_tag: str) -> None:
        if delivery_tag in acked_in_band:
            acked_in_band.discard(delivery_tag)
            virtual.QoS.ack(self, delivery_tag)
            return
        super().ack(delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        acked_in_band.discard(delivery_tag)
        super().reject(delivery_tag, requeue=requeue)

    @contextmanager
    def pipe_or_acquire(self, pipe: Any = None, client: Any = None) -> Iterator[Any]:
        if pipe:  # a caller's transaction (kombu's restore)
            yield pipe
        else:
            with self.channel.conn_or_acquire(client) as conn:
                yield conn.pipeline(transaction=self.channel.banded_queues is None)

    def _remove_from_indices(self, delivery_tag: str, pipe: Any = None) -> Any:
        with self.pipe_or_acquire(pipe) as pipe:  # the copy first: see the module's docstring
            return pipe.hdel(self.unacked_key, delivery_tag).zrem(self.unacked_index_key, delivery_tag)


