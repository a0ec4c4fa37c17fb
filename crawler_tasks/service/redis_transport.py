"""kombu's Redis transport with one list per band only where bands exist, acks
without transactions, and no message lost between its take and its note.

kombu gives every queue one Redis list per priority step, and every ``BRPOP``
a worker sends names each list of each queue it consumes: ten steps over five
queues made 50 list names, about 950 bytes sent with each message a worker
took. Only ``crawl.fetch`` has bands; the other queues carry their messages in
their base list whatever priority a sender gave, so a ``BRPOP`` names 14 lists,
in the same order as before (every queue's base list first, then the fetch
bands by step).

kombu also wraps the two commands that note a message taken (and the two that
ack it) in MULTI/EXEC: four of a page's Redis commands. The transaction
protects nothing here: a message whose note failed half-way is put back as
one whose note failed whole (below), and the ack deletes the
copy before its index entry, so an ack cut short leaves an index entry that
kombu's restore sweep drops (it restores nothing without the copy).

Both apply only to a connection whose transport options name the banded
queues (``banded_queues``, set by :func:`crawler_tasks.service.celery_app.celery_config`).
The transport is registered under kombu's own ``redis`` and ``rediss`` names,
so URLs read as they are written (Flower picks its queue-length reader by the
scheme); any other app in the same process keeps kombu's behaviour, as its
options name no banded queues. An app that sends to the crawl queues with
stock kombu reaches them too: it sends to a base list unless it names a
priority, and a worker of this package still reads every band of
``crawl.fetch``.

Every connection of this transport also keeps a message it took when Redis
dies before the message is noted: ``BRPOP`` took it (the AOF has the take) and
the note that would let the restore sweep give it back never arrived, so the
message is only in the worker's memory, where kombu drops it. It is held
(:data:`_held`) and put back at the front of its queue once Redis answers (the
next restore sweep, or the channel's close); lost only when that worker dies
too before Redis is back. Should the note have reached Redis after all (its
reply lost), the sweep gives a second copy back a visibility timeout later,
which the gate refuses as a duplicate.
"""

from __future__ import annotations

import logging
import numbers
import os
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import kombu.transport
from kombu.transport import TRANSPORT_ALIASES, virtual
from kombu.transport import redis as kombu_redis

#: The transport option naming the queues with one list per priority step.
BANDED_OPTION = "banded_queues"


#: Delivery tags acked in a task's own round trip (:func:`in_band_ack`): kombu's ack of
#: them sends nothing more.
_acked_in_band: set[str] = set()
#: Messages taken from a queue whose unacked note failed (Redis went away): each
#: ``(payload, exchange, routing_key)``, put back when Redis answers.
_held: deque[tuple[dict[str, Any], str, str]] = deque()
logger = logging.getLogger(__name__)
#: The process whose channels take messages (a forked pool child inherits the module, not
#: the consumer; it may publish, or close a channel, but takes nothing).
_consumer_pid: int | None = None


def in_band_ack(delivery_tag: str) -> Callable[[Any], None] | None:
    """What acks the message ``delivery_tag`` inside a pipeline on the broker Redis (the
    page's last round trip, when the broker is the state Redis), so that kombu's ack
    after the task sends nothing; None when this process does not consume (a prefork
    child: its parent acks)."""
    if _consumer_pid != os.getpid():
        return None

    def queue(pipe: Any) -> None:
        pipe.hdel(kombu_redis.Channel.unacked_key, delivery_tag)
        pipe.zrem(kombu_redis.Channel.unacked_index_key, delivery_tag)
        _acked_in_band.add(delivery_tag)

    return queue


def _consuming() -> None:
    global _consumer_pid
    _consumer_pid = os.getpid()


class QoS(kombu_redis.QoS):  # type: ignore[misc]
    """kombu's ack emulation, in plain pipelines on a crawler connection (no MULTI/EXEC):
    kombu's own note and ack take their pipeline from :meth:`pipe_or_acquire`; a message
    its task acked in band (:func:`in_band_ack`) is only forgotten here."""

    def append(self, message: Any, delivery_tag: str) -> None:
        """Note ``message`` as unacked; when Redis fails under the note, hold the message
        to put back (:meth:`give_back_held`) and fail as kombu does."""
        try:
            super().append(message, delivery_tag)
        except self.channel.connection_errors:
            delivery = message.delivery_info
            _held.append((message._raw, delivery["exchange"], delivery["routing_key"]))
            raise

    def give_back_held(self) -> None:
        """Put each message held by :meth:`append` back at the front of its queue (raises
        the connection error while Redis is still away; what is left stays held)."""
        while _held:
            payload, exchange, routing_key = _held[0]
            with self.channel.conn_or_acquire() as client, client.pipeline() as pipe:
                self.channel._do_restore_message(payload, exchange, routing_key, pipe)
                pipe.execute()
            _held.popleft()
            logger.warning("put back task %s, taken as the broker went away",
                           payload.get("headers", {}).get("id"))

    def restore_visible(self, *args: Any, **kwargs: Any) -> None:
        self.give_back_held()
        super().restore_visible(*args, **kwargs)

    def restore_unacked(self, client: Any = None) -> Any:
        self.give_back_held()
        return super().restore_unacked(client)

    def ack(self, delivery_tag: str) -> None:
        if delivery_tag in _acked_in_band:
            _acked_in_band.discard(delivery_tag)
            virtual.QoS.ack(self, delivery_tag)
            return
        super().ack(delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        _acked_in_band.discard(delivery_tag)
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


class Channel(kombu_redis.Channel):  # type: ignore[misc]
    """A Redis channel whose queues but the banded ones are a single list each."""

    QoS = QoS
    #: Queues with a list per priority step; None: every queue (kombu's behaviour).
    banded_queues: frozenset[str] | None = None
    from_transport_options = (*kombu_redis.Channel.from_transport_options, BANDED_OPTION)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._sync_client: Any = None
        super().__init__(*args, **kwargs)
        if self.banded_queues is not None:
            self.banded_queues = frozenset(self.banded_queues)

    def _create_client(self, asynchronous: bool = False) -> Any:
        """kombu builds a new ``redis.Redis`` for every publish, note and ack (over a tenth of
        a millisecond each: redis-py copies its table of reply parsers per client); a
        client is safe to share between threads, so one serves them all, per pool."""
        if asynchronous:
            return super()._create_client(asynchronous=True)
        client = self._sync_client
        if client is None or client.connection_pool is not self.pool:
            client = self._sync_client = super()._create_client()
        return client

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        """kombu's connection parameters; a connection error once the connection is released.

        A worker that loses the broker closes its channel twice (Celery's ``collect()``,
        then ``close()``); when the first close stops early (the read of a pending reply
        fails), the second one gives back the unacked messages through a new pool of a
        connection kombu has already let go, and kombu's AttributeError stops the worker.
        As a connection error it is ignored like the broker being away: the messages stay
        unacked in Redis, and the restore sweep gives them back.
        """
        if self.connection.client is None:
            raise kombu_redis.redis.ConnectionError("the broker connection was released")
        return super()._connparams(asynchronous=asynchronous)  # type: ignore[no-any-return]

    def basic_consume(self, *args: Any, **kwargs: Any) -> Any:
        _consuming()
        return super().basic_consume(*args, **kwargs)

    def basic_get(self, *args: Any, **kwargs: Any) -> Any:
        _consuming()
        return super().basic_get(*args, **kwargs)

    def _q_for_pri(self, queue: str, pri: int) -> str:
        if self.banded_queues is not None and queue not in self.banded_queues:
            return queue
        return super()._q_for_pri(queue, pri)  # type: ignore[no-any-return]

    def _lists(self, queues: list[str]) -> list[str]:
        """The lists of ``queues`` in kombu's order (by step, then queue), each once."""
        return list(dict.fromkeys(self._q_for_pri(queue, pri) for pri in self.priority_steps
                                  for queue in queues))

    def _brpop_start(self, timeout: float | None = None) -> None:
        if self.banded_queues is None:
            return super()._brpop_start(timeout)  # type: ignore[no-any-return]
        if timeout is None:
            timeout = self.brpop_timeout
        queues = self._queue_cycle.consume(len(self.active_queues))
        if not queues:
            return None
        self._in_poll = self.client.connection
        self._brpop_sent_at = kombu_redis.monotonic()
        command_args: list[Any] = ["BRPOP", *self._lists(queues), timeout or 0]
        if self.global_keyprefix:
            command_args = self.client._prefix_args(command_args)
        self.client.connection.send_command(*command_args)
        return None

    def _size(self, queue: str) -> int:
        with self.conn_or_acquire() as client, client.pipeline() as pipe:
            for name in self._lists([queue]):
                pipe = pipe.llen(name)
            return sum(size for size in pipe.execute() if isinstance(size, numbers.Integral))


class Transport(kombu_redis.Transport):  # type: ignore[misc]
    """kombu's Redis transport with :class:`Channel`."""

    Channel = Channel


def register() -> None:
    """Make kombu's ``redis://`` and ``rediss://`` this transport (idempotent)."""
    cache = getattr(kombu.transport, "_transport_cache", {})  # names resolved before this
    for scheme in ("redis", "rediss"):
        TRANSPORT_ALIASES[scheme] = f"{__name__}:Transport"
        cache.pop(scheme, None)
