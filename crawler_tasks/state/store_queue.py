"""The store queue: page records wait in Redis for a batch write, and are never lost.

A task that finished a page pushes its record here (in the same round trip as
its completion) instead of writing it to the backend itself; the crawl keeps a
token of the record outstanding until a batch carrying it is written. Batches
are written by store tasks (writers, on the ``crawl.store`` queue), which take
them with the reliable-queue pattern:

``pending``  LIST of entries, oldest first; ``since`` holds when a worker first saw
             it non-empty (Redis time, so every node's clock agrees).
``dispatch`` tells a worker's poll to send a writer once a batch is due: the list
             holds a full batch, its oldest entry has waited
             ``CRAWLER_STORE_FLUSH_S``, or nothing was added since a worker last
             looked (a crawl's last pages, a quiet spell: no batch is coming, so
             nobody waits for one); more writers only while more full batches wait
             than writers hold a lease, at most ``CRAWLER_STORE_WRITERS``. The
             writer's lease (``CRAWLER_STORE_LEASE_S``) starts then, so a writer
             whose task was lost is replaced once it runs out.
``take``     moves up to ``CRAWLER_STORE_BATCH`` entries (and at most
             ``CRAWLER_STORE_BATCH_BYTES``, or one) to the writer's own
             ``taken:<consumer>`` list, by the same rule (or whatever waits, for a
             writer sent because a batch was due), and renews its lease while it
             writes. A writer whose last batch did not settle (Redis failed, its
             task delivered again) gets that batch again first.
``release``  drops the taken list once every entry in it is written, retried
             (``delayed`` ZSET, scored by when) or a dead letter.
``tick``     puts the taken list of a worker whose lease ran out (SIGKILL, lost
             node) back at the head of ``pending``, and due ``delayed`` entries
             at its tail.

So an entry leaves Redis only after its batch was written to every backend of
its store; a worker killed mid-batch leaves its entries to the next tick, and
the rewrite is idempotent (document id = fingerprint).

The queue is split over ``CRAWLER_STORE_SHARDS`` shards (one on one Redis), each with
these keys under a hash tag of its own (``{store}``, or ``{store:k…}``), so each script
(``lua/store_*.lua``) runs on one slot of a Redis Cluster and the shards spread over its
masters. A worker process queues its records in one shard, its *home*, taken once from
a counter in Redis; a writer's id names its shard (``<id>.<k>``). So a process's
dispatcher looks at one shard each poll, as with one queue, and at every shard once a
second (a process that stopped leaves its shard to the others); had the records gone to
a shard by their fingerprint, every dispatcher would look at every shard at each poll.

An entry is its fields' JSON, a newline, and its record's JSON (:mod:`crawler_tasks.core.codec`,
the form with a JSON tail), compressed above 4 KiB: the store stage reads the record and
keeps that JSON beside it, and a store that keeps records as JSON (SQLite, Kafka) writes
it as it is, not encoded a second time. The entry of a record with a
large body (over :data:`~crawler_tasks.core.memory.LARGE_BODY` characters) is
written as it goes into zlib, the JSON head first and then, after a newline, the
body as UTF-8 (the codec's form with a text tail): it is never whole in memory
as JSON (where a NUL takes 6 bytes), and a 10 MiB body of zeros waits in Redis
in 10 KB.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import redis

from ..core import codec
from ..core.models import PageRecord
from ..core.shards import shard_task_id, spread_order
from ..core.store_uris import masked
from . import scripts
from .keys import Keys, template
from .round_trip import pipeline, run_scripts

#: Entries a tick moves back from ``delayed`` at most.
TICK_MOVES = 1000


@dataclass(frozen=True)
class StoreEntry:
    """One record on its way to its crawl's store."""

    #: Id of the record in its crawl's outstanding set (``<task id>.write``).
    token: str
    crawl_id: str
    #: The store URI (or comma list) the record goes to, passwords masked.
    store: str
    record: PageRecord
    #: Failed writes so far.
    attempts: int = 0
    #: The callback to tell once the record is stored (the request's ``notify``), if any.
    notify: dict[str, Any] | None = None
    #: The page's counters (status, bytes...), added to its crawl's when the token leaves:
    #: a batch adds them once per name instead of every page once per counter.
    counts: dict[str, int] | None = None

    def encode(self, *, compress: bool = True) -> bytes:
        """The entry as stored: JSON, compressed above
        :data:`~crawler_tasks.core.codec.COMPRESS_OVER` bytes (Zstandard at its fastest
        level: a page's entry goes into Redis at about a third of its size, for about
        0.1 ms of CPU); ``compress=False`` keeps it as plain JSON. A large body is always
        compressed, and never whole as JSON (module docstring)."""
        if self.record.large:
            record = self.record.to_dict()
            tail = "body" if len(record["body"] or "") >= len(record["body_base64"] or "") else "body_base64"
            return self._streamed(record, tail)
        data = self.record.kept_json() or codec.dumps(self.record.to_dict())
        return codec.encode_with_json(self._head(None), data, compress=compress)

    def _head(self, record: dict[str, Any] | None) -> dict[str, Any]:
        """The entry's fields; ``record`` in it, or None when the record's JSON follows it
        (``"j"`` says so)."""
        head: dict[str, Any] = {"t": self.token, "c": self.crawl_id, "s": masked(self.store), "a": self.attempts}
        if record is not None:
            head["r"] = record
        else:
            head["j"] = 1
        if self.notify is not None:
            head["n"] = self.notify
        if self.counts:
            head["k"] = self.counts
        return head

    def _streamed(self, record: dict[str, Any], tail: str) -> bytes:
        """The head, with ``record[tail]`` as the codec's text tail (and its name in ``tail``)."""
        body = record.pop(tail)
        return codec.encode_with_tail(self._head(record) | {"tail": tail}, body)

    @classmethod
    def decode(cls, raw: bytes) -> StoreEntry:
        return cls.decode_sized(raw)[0]

    @classmethod
    def decode_sized(cls, raw: bytes) -> tuple[StoreEntry, int]:
        """The entry, and its size in bytes decompressed (what a batch is measured in)."""
        head, tail, size = codec.decode_head(raw)
        if tail is not None and head.get("j"):  # the record's JSON, kept for the store to write as it is
            record = PageRecord.from_dict(codec.loads(tail)).keep_json(tail)
        else:
            if tail is not None:  # a large body, as text
                head["r"][head.pop("tail")] = str(tail, "utf-8", "surrogatepass")
            record = PageRecord.from_dict(head["r"])
        entry = cls(head["t"], head["c"], head["s"], record, head["a"], head.get("n"), head.get("k"))
        return entry, size

    def failed_again(self) -> StoreEntry:
        """This entry after one more failed write."""
        return replace(self, attempts=self.attempts + 1)


@dataclass(frozen=True)
class QueueDepth:
    """How many entries wait (``pending``), wait on a retry (``delayed``) and are being
    written (``taken``), and by how many workers (``writers``)."""

    pending: int
    delayed: int
    taken: int
    writers: int

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class StoreQueue:
    """The Redis side of the store stage (see the module docstring)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self.shards = keys.store_shards
        self._take = scripts.register(client, "store_take.lua")
        self._tick = scripts.register(client, "store_tick.lua")
        self._delay = scripts.register(client, "store_delay.lua")
        self._renew = scripts.register(client, "store_renew.lua")
        self._dispatch = scripts.register(client, "store_dispatch.lua")
        #: Where the tick's script finds, in each shard, the taken list of a worker whose lease ran out.
        self._taken = [json.dumps(template(partial(keys.store_taken_in, k))) for k in range(self.shards)]
        self._home: int | None = None

    def home(self) -> int:
        """The shard this process queues its records in: with several, the next of
        :func:`~crawler_tasks.core.shards.spread_order` by a counter in Redis, taken once."""
        if self._home is None:
            self._home = 0 if self.shards == 1 else \
                spread_order(self.shards)[(int(self.client.incr(self.keys.store_homes())) - 1) % self.shards]
        return self._home

    def order(self) -> list[int]:
        """Every shard, this process's :meth:`home` first."""
        home = self.home()
        return [home, *(k for k in range(self.shards) if k != home)]

    def writer(self, shard: int | None = None) -> str:
        """A new writer's id, in ``shard`` (this process's :meth:`home` by default)."""
        return shard_task_id(uuid.uuid4().hex, self.home() if shard is None else shard, self.shards)

    def push(self, entries: Sequence[StoreEntry], pipe: Any = None) -> None:
        """Queue ``entries`` in this process's shard (on ``pipe`` when given, to go out with
        other commands)."""
        if entries:
            (pipe or self.client).rpush(self.keys.store_pending(self.home()), *[e.encode() for e in entries])

    def take(self, consumer: str, batch: int, flush_s: float, lease_s: float, *,
             now: bool = False, max_bytes: int = 0) -> list[bytes]:
        """Up to ``batch`` entries of ``consumer``'s shard for it once a batch is full, its
        oldest waited ``flush_s``, or nothing arrived since the last look (``now``: whatever
        waits); [] if none is due. ``max_bytes`` caps the entries' total size as kept (0 = no
        cap; the first entry is taken whatever its size)."""
        k = self.keys.store_shard(consumer)
        keys = [self.keys.store_pending(k), self.keys.store_since(k), self.keys.store_leases(k),
                self.keys.store_taken(consumer), self.keys.store_looked(k)]
        return self._take(keys=keys, args=[batch, flush_s, lease_s, "1" if now else "0", consumer,
                                           max_bytes])

    def dispatch(self, writers: Sequence[str], batch: int, flush_s: float, lease_s: float,
                 most: int) -> list[str]:
        """Of ``writers`` (one per shard at most), those to send a store task for: in its
        shard a batch is due and no writer is on it yet, or more full batches wait than
        writers hold a lease (at most ``most``). Each one given gets a lease of ``lease_s``,
        so that its task counts while it waits in the broker and, lost, is replaced once the
        lease runs out. One script per shard, in one round trip (one per master)."""
        calls = []
        for writer in writers:
            k = self.keys.store_shard(writer)
            calls.append((self._dispatch, [self.keys.store_pending(k), self.keys.store_since(k),
                                           self.keys.store_leases(k), self.keys.store_looked(k)],
                          [batch, flush_s, lease_s, most, writer]))
        return [w for w, sent in zip(writers, run_scripts(self.client, calls)) if sent]

    def renew(self, consumer: str, lease_s: float) -> None:
        """Extend ``consumer``'s lease on what it took (a sign of life)."""
        self._renew(keys=[self.keys.store_leases(self.keys.store_shard(consumer))], args=[lease_s, consumer])

    def delay(self, consumer: str, entries: Sequence[tuple[float, StoreEntry | bytes]]) -> None:
        """Put ``(seconds, entry)`` back in ``consumer``'s shard, to be taken again that many
        seconds from now (an entry, or one already encoded)."""
        if entries:
            args: list[Any] = []
            for seconds, entry in entries:
                args += [seconds, entry if isinstance(entry, bytes) else entry.encode()]
            self._delay(keys=[self.keys.store_delayed(self.keys.store_shard(consumer))], args=args)

    def release(self, consumer: str) -> None:
        """Everything ``consumer`` took is settled: drop its taken list and lease."""
        with pipeline(self.client) as pipe:
            pipe.delete(self.keys.store_taken(consumer))
            pipe.zrem(self.keys.store_leases(self.keys.store_shard(consumer)), consumer)
            pipe.execute()

    def tick(self) -> int:
        """Give back the batches of workers whose lease ran out and move due retries to
        ``pending``, in every shard; returns how many entries moved."""
        calls = [(self._tick, [self.keys.store_pending(k), self.keys.store_since(k), self.keys.store_leases(k),
                               self.keys.store_delayed(k)], [self._taken[k], TICK_MOVES])
                 for k in range(self.shards)]
        return sum(int(n) for n in run_scripts(self.client, calls))

    def depth(self) -> QueueDepth:
        """The queue's sizes, summed over the shards, for ``crawler-tasks stats``."""
        with pipeline(self.client) as pipe:
            for k in range(self.shards):
                pipe.zrange(self.keys.store_leases(k), 0, -1)
                pipe.llen(self.keys.store_pending(k))
                pipe.zcard(self.keys.store_delayed(k))
            found = pipe.execute()
        writers = [c.decode() for k in range(self.shards) for c in found[3 * k]]
        with pipeline(self.client) as pipe:
            for consumer in writers:
                pipe.llen(self.keys.store_taken(consumer))
            taken = pipe.execute() if writers else []
        return QueueDepth(sum(found[1::3]), sum(found[2::3]), sum(taken), len(writers))
