"""The store queue: page records wait in Redis for a batch write, and are never lost.

A task that finished a page pushes its record here (in the same round trip as
its completion) instead of writing it to the backend itself; the crawl keeps a
token of the record outstanding until a batch carrying it is written. Workers
take batches with the reliable-queue pattern:

``pending``  LIST of entries, oldest first; ``since`` holds when a worker first saw
             it non-empty (Redis time, so every node's clock agrees).
``take``     moves up to ``CRAWLER_STORE_BATCH`` entries to the worker's own
             ``taken:<consumer>`` list, once the list holds a full batch, its
             oldest entry has waited ``CRAWLER_STORE_FLUSH_S``, or nothing was
             added since a worker last looked (a crawl's last pages, a quiet
             spell: no batch is coming, so nobody waits for one), and gives the
             worker a lease of ``CRAWLER_STORE_LEASE_S`` (renewed while it lives).
             A worker whose last batch did not settle (Redis failed) gets that
             batch again first.
``release``  drops the taken list once every entry in it is written, retried
             (``delayed`` ZSET, scored by when) or a dead letter.
``tick``     puts the taken list of a worker whose lease ran out (SIGKILL, lost
             node) back at the head of ``pending``, and due ``delayed`` entries
             at its tail.

So an entry leaves Redis only after its batch was written to every backend of
its store; a worker killed mid-batch leaves its entries to the next tick, and
the rewrite is idempotent (document id = fingerprint). Every key has the hash
tag ``{store}``, so each script runs on one slot of a Redis Cluster.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import redis

from .backends.refs import masked
from .keys import Keys
from .models import PageRecord

#: Bytes of entry JSON above which an entry waiting on a retry is kept zlib-compressed.
COMPRESS_OVER = 4096
#: Entries a tick moves back from ``delayed`` at most.
TICK_MOVES = 1000

_NOW = "local t = redis.call('TIME'); local now = t[1] + t[2] / 1e6\n"

# KEYS[1] pending · KEYS[2] since · KEYS[3] leases · KEYS[4] taken · KEYS[5] length at the
# last look · ARGV[1] batch size · ARGV[2] flush seconds · ARGV[3] lease seconds · ARGV[4] '1' = now
# ARGV[5] consumer
_TAKE = _NOW + """
if redis.call('LLEN', KEYS[4]) > 0 then  -- what this worker took before and did not settle
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[5])
  return redis.call('LRANGE', KEYS[4], 0, -1)
end
local len = redis.call('LLEN', KEYS[1])
if len == 0 then return {} end
local n = tonumber(ARGV[1])
local since = tonumber(redis.call('GET', KEYS[2]))
if not since then
  since = now
  redis.call('SET', KEYS[2], now)
end
local before = tonumber(redis.call('GETSET', KEYS[5], len))
local idle = before == len  -- nothing arrived since the last look: nobody is adding to it
if len < n and ARGV[4] ~= '1' and not idle and now - since < tonumber(ARGV[2]) then return {} end
local items = redis.call('LRANGE', KEYS[1], 0, n - 1)
redis.call('LTRIM', KEYS[1], n, -1)
for i = 1, #items, 1000 do
  redis.call('RPUSH', KEYS[4], unpack(items, i, math.min(i + 999, #items)))
end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[5])
if len <= n then redis.call('DEL', KEYS[2], KEYS[5]) else redis.call('SET', KEYS[5], len - n) end
return items
"""

# KEYS[1] pending · KEYS[2] since · KEYS[3] leases · KEYS[4] delayed
# ARGV[1] stem of the taken lists · ARGV[2] most delayed entries to move
_TICK = _NOW + """
local moved = 0
for _, c in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 20)) do
  local key = ARGV[1] .. c
  local items = redis.call('LRANGE', key, 0, -1)
  for i = #items, 1, -1 do redis.call('LPUSH', KEYS[1], items[i]) end
  moved = moved + #items
  redis.call('DEL', key)
  redis.call('ZREM', KEYS[3], c)
end
local due = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #due, 1000 do
  local part = {unpack(due, i, math.min(i + 999, #due))}
  redis.call('RPUSH', KEYS[1], unpack(part))
  redis.call('ZREM', KEYS[4], unpack(part))
end
moved = moved + #due
if moved > 0 then redis.call('SET', KEYS[2], 0) end
return moved
"""

# KEYS[1] delayed · ARGV (seconds from now, entry) pairs
_DELAY = _NOW + """
for i = 1, #ARGV, 2 do redis.call('ZADD', KEYS[1], now + tonumber(ARGV[i]), ARGV[i + 1]) end
return #ARGV / 2
"""

# KEYS[1] leases · ARGV[1] lease seconds · ARGV[2] consumer
_RENEW = _NOW + """
return redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[2])
"""


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

    def encode(self, *, compress: bool = False) -> bytes:
        """The entry as stored: JSON; with ``compress``, zlib-compressed above
        :data:`COMPRESS_OVER` bytes (entries that wait on a retry: a store can stay down
        a while). The hot path stays uncompressed: an entry waits about a second, and
        compressing a 20 KB page cost more CPU than the rest of its trip through Redis."""
        data = json.dumps({"t": self.token, "c": self.crawl_id, "s": masked(self.store),
                           "a": self.attempts, "r": self.record.to_dict()},
                          ensure_ascii=False).encode()
        return zlib.compress(data, 3) if compress and len(data) > COMPRESS_OVER else data

    @classmethod
    def decode(cls, raw: bytes) -> StoreEntry:
        data: dict[str, Any] = json.loads(raw if raw[:1] == b"{" else zlib.decompress(raw))
        return cls(data["t"], data["c"], data["s"], PageRecord.from_dict(data["r"]), data["a"])

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
        self._take = client.register_script(_TAKE)
        self._tick = client.register_script(_TICK)
        self._delay = client.register_script(_DELAY)
        self._renew = client.register_script(_RENEW)

    def push(self, entries: Sequence[StoreEntry], pipe: Any = None) -> None:
        """Queue ``entries`` (on ``pipe`` when given, to go out with other commands)."""
        if entries:
            (pipe or self.client).rpush(self.keys.store_pending(), *[e.encode() for e in entries])

    def take(self, consumer: str, batch: int, flush_s: float, lease_s: float, *,
             now: bool = False) -> list[bytes]:
        """Up to ``batch`` entries for ``consumer`` once a batch is full, its oldest waited
        ``flush_s``, or nothing arrived since the last look (``now``: whatever waits);
        [] if none is due."""
        keys = [self.keys.store_pending(), self.keys.store_since(), self.keys.store_leases(),
                self.keys.store_taken(consumer), self.keys.store_looked()]
        return self._take(keys=keys, args=[batch, flush_s, lease_s, "1" if now else "0", consumer])

    def renew(self, consumer: str, lease_s: float) -> None:
        """Extend ``consumer``'s lease on what it took (a sign of life)."""
        self._renew(keys=[self.keys.store_leases()], args=[lease_s, consumer])

    def delay(self, entries: Sequence[tuple[float, StoreEntry]]) -> None:
        """Put ``(seconds, entry)`` back to be taken again that many seconds from now."""
        if entries:
            args: list[Any] = []
            for seconds, entry in entries:
                args += [seconds, entry.encode(compress=True)]
            self._delay(keys=[self.keys.store_delayed()], args=args)

    def release(self, consumer: str) -> None:
        """Everything ``consumer`` took is settled: drop its taken list and lease."""
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(self.keys.store_taken(consumer))
        pipe.zrem(self.keys.store_leases(), consumer)
        pipe.execute()

    def tick(self) -> int:
        """Give back the batches of workers whose lease ran out and move due retries to
        ``pending``; returns how many entries moved."""
        keys = [self.keys.store_pending(), self.keys.store_since(), self.keys.store_leases(),
                self.keys.store_delayed()]
        return int(self._tick(keys=keys, args=[self.keys.store_taken(""), TICK_MOVES]))

    def depth(self) -> QueueDepth:
        """The queue's sizes, for ``crawler-tasks stats``."""
        writers = self.client.zrange(self.keys.store_leases(), 0, -1)
        pipe = self.client.pipeline(transaction=False)
        pipe.llen(self.keys.store_pending())
        pipe.zcard(self.keys.store_delayed())
        for consumer in writers:
            pipe.llen(self.keys.store_taken(consumer.decode()))
        pending, delayed, *taken = pipe.execute()
        return QueueDepth(pending, delayed, sum(taken), len(writers))
