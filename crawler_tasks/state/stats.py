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
            raw = self.client.hgetall(self.keys.stats(crawl_id))
            return {k.decode(): int(v) for k, v in sorted(raw.items())}
        total: Counter[str] = Counter()
        with self.client.pipeline(transaction=False) as pipe:
            for member in self.client.smembers(self.keys.crawls()):
                pipe.hgetall(self.keys.stats(member.decode()))
            for raw in pipe.execute():
                total.update({k.decode(): int(v) for k, v in raw.items()})
        return dict(sorted(total.items()))

    def read_many(self, crawl_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        """Counters of each of ``crawl_ids``, in one round trip."""
        with self.client.pipeline(transaction=False) as pipe:
            for crawl_id in crawl_ids:
                pipe.hgetall(self.keys.stats(crawl_id))
            raw = pipe.execute()
        return {cid: {k.decode(): int(v) for k, v in sorted(r.items())} for cid, r in zip(crawl_ids, raw)}

    def flushed(self, crawl_ids: Sequence[str]) -> dict[str, bytes | None]:
        """Each crawl's counters as last written to its store's statistics (the digest
        :meth:`mark_flushed` kept), None where never; one round trip ({} for no crawl)."""
        ids = list(crawl_ids)
        return dict(zip(ids, self.client.hmget(self.keys.stats_flushed(), ids))) if ids else {}

    def mark_flushed(self, crawl_id: str, digest: bytes) -> None:
        """Keep ``digest``: the crawl's counters as just written to its store."""
        self.client.hset(self.keys.stats_flushed(), crawl_id, digest)
