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

import redis

from .keys import Keys


class Stats:
    """Reads crawl counters; they are written only by the gate's atomic scripts."""

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
