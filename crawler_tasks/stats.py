"""Crawl counters in Redis hashes: one per crawl and one overall.

Counter names a user reads in ``crawler-tasks stats``:

``total_num`` URLs downloaded (any response) · ``total_request_size`` /
``total_response_size`` bytes · ``status/<code>`` responses per status ·
``retries`` · ``redirects`` · ``duplicates`` rejected by the gate ·
``gate/admitted`` · ``gate/over_budget`` · ``failures`` (failure records) ·
``stored`` records written · ``store/retries`` writes retried while a backend was down ·
``store/failed`` records given up on · ``truncated`` bodies cut at the size limit ·
``claim/missing`` bodies that expired before parse or store.
"""

from __future__ import annotations

from collections.abc import Mapping

import redis

from .keys import Keys


class Stats:
    """Increments and reads crawl counters."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def incr(self, pipe: redis.client.Pipeline, crawl_id: str, counts: Mapping[str, int]) -> None:
        """Queue HINCRBYs for the crawl's and the overall hash on ``pipe``."""
        for key in (self.keys.stats(crawl_id), self.keys.stats()):
            for name, amount in counts.items():
                if amount:
                    pipe.hincrby(key, name, amount)

    def add(self, crawl_id: str, counts: Mapping[str, int]) -> None:
        """Increment counters now, in one round trip."""
        with self.client.pipeline(transaction=False) as pipe:
            self.incr(pipe, crawl_id, counts)
            pipe.execute()

    def read(self, crawl_id: str | None = None) -> dict[str, int]:
        """Counters of one crawl, or overall when ``crawl_id`` is None."""
        raw = self.client.hgetall(self.keys.stats(crawl_id))
        return {k.decode(): int(v) for k, v in sorted(raw.items())}
