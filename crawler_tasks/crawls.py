"""Per-crawl configuration and progress: allowed domains, limits, outstanding tasks.

A crawl is drained when its outstanding set is empty: every task id joins it
before its message is published (the gate does that for fetches) and leaves it
only after the task has published its own children, so a queued, running or
countdown-waiting task always keeps the crawl open.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import redis

from .keys import Keys


@dataclass(frozen=True)
class CrawlConfig:
    """What one crawl may do. ``None`` means: use the worker's settings."""

    crawl_id: str
    domains: frozenset[str]
    max_depth: int | None = None
    max_pages: int = 0
    store: str | None = None


class Crawls:
    """Reads and writes crawl configuration and the outstanding-task sets."""

    #: Workers see a crawl's new domains or limits within this many seconds.
    CACHE_SECONDS = 5.0
    CACHE_SIZE = 1024

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._cache: dict[str, tuple[float, CrawlConfig]] = {}

    def register(self, crawl_id: str, *, domains: Iterable[str] = (), max_depth: int | None = None,
                 max_pages: int | None = None, store: str | None = None) -> None:
        """Record a crawl and add ``domains``; limits given here override worker settings."""
        fields: dict[str, str | int] = {}
        if max_depth is not None:
            fields["max_depth"] = max_depth
        if max_pages is not None:
            fields["max_pages"] = max_pages
        if store:
            fields["store"] = store
        pipe = self.client.pipeline(transaction=False)
        pipe.sadd(self.keys.crawls(), crawl_id)
        if fields:
            pipe.hset(self.keys.crawl(crawl_id), mapping=fields)
        domains = [d for d in domains if d]
        if domains:
            pipe.sadd(self.keys.domains(crawl_id), *domains)
        pipe.execute()
        self._cache.pop(crawl_id, None)

    def config(self, crawl_id: str) -> CrawlConfig:
        """The crawl's configuration, cached for a few seconds per process."""
        hit = self._cache.get(crawl_id)
        if hit and time.monotonic() - hit[0] < self.CACHE_SECONDS:
            return hit[1]
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.keys.crawl(crawl_id))
        pipe.smembers(self.keys.domains(crawl_id))
        fields, domains = pipe.execute()
        fields = {k.decode(): v.decode() for k, v in fields.items()}
        config = CrawlConfig(
            crawl_id=crawl_id,
            domains=frozenset(d.decode() for d in domains),
            max_depth=int(fields["max_depth"]) if "max_depth" in fields else None,
            max_pages=int(fields.get("max_pages", 0)),
            store=fields.get("store"),
        )
        if len(self._cache) >= self.CACHE_SIZE:
            self._cache.clear()
        self._cache[crawl_id] = (time.monotonic(), config)
        return config

    def track(self, pipe: redis.client.Pipeline, crawl_id: str, task_id: str) -> None:
        """Queue adding ``task_id`` to the crawl's outstanding set."""
        pipe.sadd(self.keys.outstanding(crawl_id), task_id)

    def finish(self, crawl_id: str, task_id: str,
               pipe: redis.client.Pipeline | None = None) -> None:
        """The task and everything it published are accounted for: drop it.

        With ``pipe`` the commands are only queued, to run with the caller's.
        """
        own = pipe is None
        pipe = self.client.pipeline(transaction=False) if own else pipe
        pipe.srem(self.keys.outstanding(crawl_id), task_id)
        pipe.delete(self.keys.replay(task_id))
        if own:
            pipe.execute()

    def is_outstanding(self, crawl_id: str, task_id: str) -> bool:
        return bool(self.client.sismember(self.keys.outstanding(crawl_id), task_id))

    def outstanding(self, crawl_id: str) -> int:
        """Tasks of the crawl queued, running or waiting on a retry."""
        return int(self.client.scard(self.keys.outstanding(crawl_id)))

    def all_ids(self) -> list[str]:
        return sorted(m.decode() for m in self.client.smembers(self.keys.crawls()))
