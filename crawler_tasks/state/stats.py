"""Crawl counters in a Redis hash per crawl; the overall figures are their sum.

Counter names a user reads in ``crawler-tasks stats``:

``total_num`` URLs downloaded (any response) · ``total_request_size`` /
``total_response_size`` bytes · ``status/<code>`` responses per status ·
``retries`` · ``redirects`` · ``duplicates`` rejected by the gate ·
``gate/admitted`` · ``gate/over_budget`` · ``gate/released`` links a failed task
admitted but never published · ``fetch/direct`` fetches another app sent
straight to ``crawl.fetch`` (adopted into their crawl) · ``failures`` (failure records) ·
``stored`` records written · ``store/retries`` record writes retried while a backend was
down · ``store/failed`` records given up on (kept as dead letters) · ``store/refused``
records a backend refused for good · ``truncated`` bodies cut at the size limit ·
``claim/missing`` bodies that expired before parse or store ·
``redirect/offsite`` redirects to a host the crawl may not visit ·
``retry/reason_count/<reason>`` retries per reason (``timeout``, ``http_503``...) ·
``errors`` / ``errors/<Exception>`` tasks ended by an unexpected error ·
``worker_lost`` tasks given up after their worker died under them too often.

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
