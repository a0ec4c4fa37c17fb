"""Crawl counters in a Redis hash per crawl; the overall figures are their sum.

The names of these counters, and what each counts, are in one registry:
:mod:`crawler_tasks.core.counters` (those whose ``where`` is ``crawl``); the list in
docs/stores.md is generated from it.

Counters that end a task move in the same atomic call that ends it in its
crawl's outstanding set (:mod:`crawler_tasks.state.gate`); a step that does not end it
(a retry, a store retry) is counted once per step and attempt while the task is
outstanding (:meth:`~crawler_tasks.state.gate.Gate.count_once`). A record's store
counters move when its token settles (:meth:`~crawler_tasks.state.gate.Gate.settle`),
once. A redelivered task never counts twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import redis

from .keys import Keys


class Stats:
    """Reads crawl counters; they are written only by the gate's atomic scripts. Also keeps
    what each crawl's counters were when last written to its store (the flushed digests)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def read(self, crawl_id: str | None = None) -> dict[str, int]:
        """Counters of one crawl, or summed over every crawl when ``crawl_id`` is None."""
        if crawl_id is not None:
            return self.read_many([crawl_id])[crawl_id]
        total: Counter[str] = Counter()
        members = [m.decode() for m in self.client.smembers(self.keys.crawls())]
        for counts in self.read_many(members).values():
            total.update(counts)
        return dict(sorted(total.items()))

    def _hashes(self, crawl_id: str) -> list[str]:
        """The crawl's counter hashes: its own, and each gate shard's when there are several."""
        if self.keys.gate_shards == 1:
            return [self.keys.stats(crawl_id)]
        return [self.keys.stats(crawl_id), *(self.keys.stats(crawl_id, k) for k in range(self.keys.gate_shards))]

    def read_many(self, crawl_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        """Counters of each of ``crawl_ids`` (summed over its hashes), in one round trip."""
        hashes = {cid: self._hashes(cid) for cid in crawl_ids}
        with self.client.pipeline(transaction=False) as pipe:
            for keys in hashes.values():
                for key in keys:
                    pipe.hgetall(key)
            raw = iter(pipe.execute())
        out: dict[str, dict[str, int]] = {}
        for cid, keys in hashes.items():
            total: Counter[str] = Counter()
            for _ in keys:
                total.update({k.decode(): int(v) for k, v in next(raw).items()})
            out[cid] = dict(sorted(total.items()))
        return out

    def flushed(self, crawl_ids: Sequence[str]) -> dict[str, bytes | None]:
        """Each crawl's counters as last written to its store's statistics (the digest
        :meth:`mark_flushed` kept), None where never; one round trip ({} for no crawl)."""
        ids = list(crawl_ids)
        return dict(zip(ids, self.client.hmget(self.keys.stats_flushed(), ids))) if ids else {}

    def mark_flushed(self, crawl_id: str, digest: bytes) -> None:
        """Keep ``digest``: the crawl's counters as just written to its store."""
        self.client.hset(self.keys.stats_flushed(), crawl_id, digest)
