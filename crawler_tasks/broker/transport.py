"""kombu's Redis transport: one list per band only where bands exist, acks without
transactions, and a message taken and noted as unacked in one step.

kombu gives every queue one Redis list per priority step. Only ``crawl.fetch``
and ``crawl.render`` have bands; the other queues carry their messages in their
base list whatever priority a sender gave, so a worker reads 14 lists, not 50,
in the same order as kombu would (every queue's base list first, then the bands
by step).

kombu takes a message with ``BRPOP`` and notes it as unacked (the copy its
restore sweep gives back when the worker dies) in a second round trip. A Redis
killed between the two (or after it wrote the take to its AOF and before it sent
the reply, which with ``appendfsync always`` lasts as long as an fsync) leaves
the message only in the worker's memory or nowhere: a page lost across a Redis
restart. Here a worker takes with a script (:data:`TAKE`) that pops the first
messages of its lists in order (as many as its prefetch has room for, up to
:data:`TAKE_MOST`) and writes kombu's note in the same step, so a
take either happened with its note or not at all; a reply that never arrives
leaves a noted message the sweep gives back. A script cannot block, so a take
that finds nothing (or empties the lists, when the take also drops their stale
tokens) is followed by a ``BRPOP`` on the queues' wake lists
(:func:`~crawler_tasks.broker.lists.wake_list`): whoever pushes a message —
this transport's publish and restore, the fetch queue's pushes, a take that
leaves more behind — pushes a token there (one at most), which wakes one
waiting worker at once. A message pushed without a token (stock kombu from
another app) is taken when the wait ends, within ``brpop_timeout`` (1 s).

kombu also wraps the two commands that note a message (and the two that ack it)
in MULTI/EXEC; the acks here go without: the ack deletes the copy before its
index entry, so an ack cut short leaves an index entry that kombu's restore
sweep drops (it restores nothing without the copy).

All of this applies only to a connection whose transport options name the banded
queues (``banded_queues``, set by :func:`crawler_tasks.service.celery_app.celery_config`);
its bands are named ``crawl.fetch:5`` (its ``sep`` option, which Flower reads too); the
bindings every app reads (control commands) keep kombu's form. Registered under kombu's
own ``redis`` and ``rediss`` names, URLs read as written (Flower picks its queue-length
reader by the scheme); other apps in the process keep kombu's behaviour, and stock
kombu reaches the crawl queues too (a base list unless it names a priority).
Publishes, notes and acks go through a :class:`~crawler_tasks.state.pool.LeanPool`.

Such an app's connection, which takes with ``BRPOP`` and notes after, keeps a
message whose note failed because Redis went away: it is held (:data:`.acks.held`)
and put back at the front of its queue once Redis answers (the next restore
sweep, or the channel's close), where kombu would drop it.
"""

from __future__ import annotations

import hashlib
import numbers
import time
from queue import Empty
from typing import Any

import kombu.transport
from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError

from ..state import scripts
from ..state.pool import LeanPool
from . import acks
from .bindings import KOMBU_SEP
from .lists import BAND_SEP, PipeBatch, redis_list, wake, wake_commands, wake_list
from .messages import loads, register_json

#: The transport option naming the queues with one list per priority step.
BANDED_OPTION = "banded_queues"
#: The script taking a message and noting it in one step (``state/lua/broker_take.lua``).
TAKE = scripts.source("broker_take.lua").encode()
TAKE_SHA = hashlib.sha1(TAKE).hexdigest()
#: Messages one take brings at most: as many as the worker's prefetch has room for, so
#: that a worker far from Redis is not held to one message a round trip.
TAKE_MOST = 32

class Channel(kombu_redis.Channel):
    """A Redis channel whose queues but the banded ones are a single list each."""

    QoS = acks.QoS
    #: Queues with a list per priority step; None: every queue (kombu's behaviour).
    banded_queues: frozenset[str] | None = None
    from_transport_options = (*kombu_redis.Channel.from_transport_options,  # type: ignore[assignment]
                              BANDED_OPTION)  # (one option more than kombu's typed tuple)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._sync_client: Any = None
        #: Whether the next read takes (else it waits on the wake lists), what the last sent.
        self._taking = self._sent_take = True
        self._lmpop: bool | None = None
        #: Queues consumed without acks: their messages are taken without a note.
        self._no_ack_queues: set[str] = set()
        super().__init__(*args, **kwargs)
        if self.banded_queues is not None:
            self.banded_queues = frozenset(self.banded_queues)
            self.sep = KOMBU_SEP  # bindings every app reads; the bands are named by _q_for_pri

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

    def _get_pool(self, asynchronous: bool = False) -> Any:
        if asynchronous:  # the event loop's, for the takes
            return super()._get_pool(asynchronous=True)
        params = self._connparams()
        self.keyprefix_fanout = self.keyprefix_fanout.format(db=params["db"])  # as kombu's
        return LeanPool(**params)

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
            raise RedisConnectionError("the broker connection was released")
        return super()._connparams(asynchronous=asynchronous)

    def basic_consume(self, queue: str, no_ack: bool, *args: Any, **kwargs: Any) -> Any:
        acks.consuming()
        if no_ack:  # a take for it notes nothing (kombu's reply consumers ack nothing)
            self._no_ack_queues.add(queue)
        else:
            self._no_ack_queues.discard(queue)
        return super().basic_consume(queue, no_ack, *args, **kwargs)

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        acks.consuming()
        was = queue in self._no_ack_queues
        if no_ack:
            self._no_ack_queues.add(queue)
        try:
            return super().basic_get(queue, no_ack, **kwargs)
        finally:
            if no_ack and not was:
                self._no_ack_queues.discard(queue)

    def _q_for_pri(self, queue: str, pri: int) -> str:
        """A band's list (``crawl.fetch:5``), an unbanded queue's one list, or kombu's own."""
        if self.banded_queues is None:
            return super()._q_for_pri(queue, pri)
        if queue not in self.banded_queues:
            return queue
        return redis_list(queue, self.priority(pri))

    def _lists(self, queues: list[str]) -> list[str]:
        """The lists of ``queues`` in kombu's order (by step, then queue), each once."""
        return list(dict.fromkeys(self._q_for_pri(queue, pri) for pri in self.priority_steps
                                  for queue in queues))

    def _brpop_start(self, timeout: float | None = None) -> None:
        """Send the next read of the consumed queues: a take (:data:`TAKE`), or, after a
        take found nothing, a ``BRPOP`` on their wake lists (``timeout``, kombu's
        ``brpop_timeout``, bounds the wait for a message pushed without a token)."""
        if self.banded_queues is None or self.global_keyprefix:
            return super()._brpop_start(timeout)
        queues = self._queue_cycle.consume(len(self.active_queues))
        if not queues:
            return None
        self._in_poll = self.client.connection
        self._brpop_sent_at = kombu_redis.monotonic()  # type: ignore[assignment]  # typed None in kombu
        self._sent_take = self._taking
        if self._taking:
            free = self.qos.can_consume_max_estimate()
            command_args = self._take_args(queues, max(1, min(TAKE_MOST, free or 1)))
        else:
            wakes = list(dict.fromkeys(wake_list(queue) for queue in queues))
            command_args = ["BRPOP", *wakes, timeout if timeout is not None else self.brpop_timeout]
        self.client.connection.send_command(*command_args)
        return None

    def _take_args(self, queues: list[str], most: int = 1) -> list[Any]:
        """The take of up to ``most`` messages from ``queues``, as ``EVALSHA`` arguments."""
        lists = self._lists(queues)
        wakes = [wake_list(self._of_queue(name, queues)) for name in lists]
        noted = "".join("0" if self._of_queue(name, queues) in self._no_ack_queues else "1"
                        for name in lists)
        return ["EVALSHA", TAKE_SHA, 2 + 2 * len(lists), self.unacked_key, self.unacked_index_key,
                *lists, *wakes, time.time(), int(self._has_lmpop()), noted, most]

    def _of_queue(self, name: str, queues: list[str]) -> str:
        """The queue of list ``name`` (a queue's base list, or one of its bands)."""
        return name if name in queues else name.rsplit(BAND_SEP, 1)[0]

    def _has_lmpop(self) -> bool:
        if self._lmpop is None:
            with self.conn_or_acquire() as client:
                version = str(client.info("server").get("redis_version", "0"))
            self._lmpop = int(version.split(".")[0]) >= 7
        return self._lmpop

    def _load_take(self) -> None:
        with self.conn_or_acquire() as client:
            client.script_load(TAKE)

    def _brpop_read(self, **options: Any) -> bool:
        """Read the reply of :meth:`_brpop_start`: a message taken (delivered, noted by the
        take; take again while its lists hold more, else wait), nothing (wait next), or
        a wake (take next)."""
        if self.banded_queues is None or self.global_keyprefix:
            return super()._brpop_read(**options)
        try:
            try:
                reply = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except NoScriptError:  # a Redis restarted since
                self._load_take()
                raise Empty() from None
            except self.connection_errors:
                self.client.connection.disconnect()
                raise
            if not self._sent_take:
                self._taking = True
                raise Empty()
            if not reply:
                self._taking = False
                raise Empty()
            dest, more, *taken = reply
            self._taking = bool(more)  # none left: wait for a token next
            queue = self._of_queue(kombu_redis.bytes_to_str(dest), self.active_queues)
            self._queue_cycle.rotate(queue)
            for item, noted in zip(taken[::2], taken[1::2]):
                payload = loads(item)
                if noted:
                    acks.noted_in_take.add(payload["properties"]["delivery_tag"])
                self.connection._deliver(payload, queue)
            return True
        finally:
            self._in_poll = None  # type: ignore[assignment]  # kombu types it as its first value
            self._flush_brpop_reauth()

    def _get(self, queue: str, timeout: Any = None) -> Any:
        """One message of ``queue`` (``basic_get``), taken and noted in one step."""
        if self.banded_queues is None or self.global_keyprefix:
            return super()._get(queue)
        args = self._take_args([queue])[1:]
        with self.conn_or_acquire() as client:
            try:
                reply = client.evalsha(*args)
            except NoScriptError:  # a Redis restarted since
                self._load_take()
                reply = client.evalsha(*args)
        if not reply:
            raise Empty()
        payload = loads(reply[2])
        if reply[3]:
            acks.noted_in_take.add(payload["properties"]["delivery_tag"])
        return payload

    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:
        """kombu's publish and a token on the queue's wake list (:meth:`_brpop_start`), in
        one round trip (kombu's own batch when the publisher gives one)."""
        if self.banded_queues is None:
            return super()._put(queue, message, **kwargs)
        batch = kwargs.pop("_publish_batch", None)
        if batch is not None:
            super()._put(queue, message, _publish_batch=batch, **kwargs)
            for command in wake_commands(queue):
                batch.add(*command)
            return None
        with self.conn_or_acquire() as client, client.pipeline(transaction=False) as pipe:
            super()._put(queue, message, _publish_batch=PipeBatch(pipe), **kwargs)
            wake(pipe, queue)
            pipe.execute()
        return None

    def _do_restore_message(self, payload: Any, exchange: str, routing_key: str,
                            pipe: Any, leftmost: bool = False) -> None:
        """kombu's restore of a message to its queue, and a token on the queue's wake list."""
        super()._do_restore_message(payload, exchange, routing_key, pipe, leftmost)
        if self.banded_queues is not None:
            for queue in self._lookup(exchange, routing_key):
                wake(pipe, queue)

    def _size(self, queue: str) -> int:
        with self.conn_or_acquire() as client, client.pipeline() as pipe:
            for name in self._lists([queue]):
                pipe = pipe.llen(name)
            return sum(int(size) for size in pipe.execute() if isinstance(size, numbers.Integral))


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with :class:`Channel`."""

    Channel = Channel


def register() -> None:
    """Make kombu's ``redis://`` and ``rediss://`` this transport, JSON read by ``messages.loads`` (idempotent)."""
    register_json()
    cache = getattr(kombu.transport, "_transport_cache", {})  # names resolved before this
    for scheme in ("redis", "rediss"):
        TRANSPORT_ALIASES[scheme] = f"{__name__}:Transport"
        cache.pop(scheme, None)
