"""The revisit schedule in Redis: one sorted set per crawl, URL -> due time and slot.

A member is the URL itself; its score packs the due second with the interval, the pin
and the depth (:func:`crawler_tasks.core.revisit.pack`), so a URL costs one member and
nothing else. The crawls that keep one are listed in a set, for Beat's tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from ..core.revisit import CODE_BITS, Slot, due_score, pack, unpack
from . import scripts
from .keys import Keys


@dataclass(frozen=True)
class Outlook:
    """A crawl's schedule at a glance: URLs kept, due now, and the next due time (None: none)."""

    scheduled: int
    due: int
    next_due: float | None


class Revisits:
    """The revisit schedules of every crawl (see the module docstring)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._take = scripts.register(client, "revisit_take.lua")

    def schedule(self, crawl_id: str, url: str, slot: Slot, pipe: Any = None) -> None:
        """Keep ``url`` due at ``slot`` (replacing where it was)."""
        target = pipe if pipe is not None else self.client.pipeline(transaction=False)
        target.zadd(self.keys.revisits(crawl_id), {url: pack(slot)})
        target.sadd(self.keys.revisit_crawls(), crawl_id)
        if pipe is None:
            target.execute()

    def take_due(self, crawl_id: str, batch: int, lease_s: float) -> list[tuple[str, Slot]]:
        """Up to ``batch`` URLs due now, each leased ``lease_s`` seconds (due again after it
        unless its fetch schedules it first), with their slots."""
        raw = self._take(keys=[self.keys.revisits(crawl_id)], args=[batch, lease_s, CODE_BITS])
        return [(raw[i].decode(), unpack(float(raw[i + 1]))) for i in range(0, len(raw), 2)]

    def crawls(self) -> list[str]:
        """The crawls that keep a schedule."""
        return sorted(m.decode() for m in self.client.smembers(self.keys.revisit_crawls()))

    def drop(self, crawl_id: str) -> None:
        """Forget ``crawl_id``'s schedule (a cancelled or purged crawl)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(self.keys.revisits(crawl_id))
        pipe.srem(self.keys.revisit_crawls(), crawl_id)
        pipe.execute()

    def outlook(self, crawl_id: str, now: float) -> Outlook:
        """How many URLs ``crawl_id`` keeps, how many are due at ``now``, and the next due time."""
        return self.outlooks([crawl_id], now)[crawl_id]

    def outlooks(self, crawl_ids: Sequence[str], now: float) -> dict[str, Outlook]:
        """:meth:`outlook` of each of ``crawl_ids``, in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for crawl_id in crawl_ids:
            key = self.keys.revisits(crawl_id)
            pipe.zcard(key)
            pipe.zcount(key, "-inf", due_score(now))
            pipe.zrange(key, 0, 0, withscores=True)
        raw = pipe.execute()
        return {crawl_id: Outlook(scheduled, due, unpack(first[0][1]).due if first else None)
                for crawl_id, (scheduled, due, first) in zip(crawl_ids, zip(*[iter(raw)] * 3))}
