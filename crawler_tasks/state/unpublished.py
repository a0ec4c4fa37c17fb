"""Seeds a gate admitted but that were not published, kept to publish later.

A Bloom gate cannot forget a fingerprint, so a seed it admitted whose message the broker
refused would never pass it again: such seeds wait in the crawl's ``unpublished`` LIST
(:meth:`~crawler_tasks.state.keys.Keys.unpublished`), as JSON requests, and the crawl's
next seed call takes them back (:mod:`crawler_tasks.stages.enqueue`).

A seed call killed between the gate and the broker (SIGKILL, a lost node) raises
nothing: its seeds are marked seen and outstanding, but have no message. So each seed
call is journaled (:class:`SeedCalls`) before the gate sees it and forgotten once its
seeds are published or handled; a journal entry older than :data:`STALE_S` belongs to a
call that died, and a worker publishes again those of its seeds still outstanding (a
second message of a task that has one already is harmless: a task completes once).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence

import redis

from ..core.models import CrawlRequest
from .keys import Keys


class Unpublished:
    """A crawl's unpublished seeds: kept at the tail, taken from the head."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def take(self, crawl_id: str, count: int) -> list[CrawlRequest]:
        """Up to ``count`` kept seeds, removed as taken (oldest first)."""
        raw = self.client.lpop(self.keys.unpublished(crawl_id), count) or []
        return [CrawlRequest.from_dict(json.loads(item)) for item in raw]

    def keep(self, crawl_id: str, requests: Sequence[CrawlRequest]) -> None:
        """Put ``requests`` at the tail of the crawl's list (as they are: the caller sets
        ``dont_filter`` on what must bypass the gate when taken back)."""
        if requests:
            self.client.rpush(self.keys.unpublished(crawl_id),
                              *[json.dumps(r.to_dict()) for r in requests])


#: Seconds after which a seed call that is still journaled is taken for dead.
STALE_S = 60.0


class SeedCalls:
    """The journal of running seed calls (see the module doc)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def begin(self, crawl_id: str, seeds: Sequence[tuple[str, CrawlRequest]]) -> str:
        """Journal a call about to gate and publish ``seeds`` (task id, request); its id."""
        call = uuid.uuid4().hex
        entry = json.dumps({"c": crawl_id, "s": [[tid, r.to_dict()] for tid, r in seeds]})
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(self.keys.seeding(), call, entry)
            pipe.zadd(self.keys.seeding_since(), {call: time.time()})
            pipe.execute()
        return call

    def end(self, call: str) -> None:
        """The call's seeds are published, or handled by the caller: forget it."""
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hdel(self.keys.seeding(), call)
            pipe.zrem(self.keys.seeding_since(), call)
            pipe.execute()

    def take_dead(self, limit: int = 10) -> list[tuple[str, list[tuple[str, CrawlRequest]]]]:
        """Calls journaled longer than :data:`STALE_S` ago, each taken by one caller only:
        (crawl id, its seeds) each."""
        out = []
        for call in self.client.zrangebyscore(self.keys.seeding_since(), "-inf", time.time() - STALE_S,
                                              start=0, num=limit):
            if not self.client.zrem(self.keys.seeding_since(), call):
                continue  # another worker took it
            with self.client.pipeline(transaction=True) as pipe:
                pipe.hget(self.keys.seeding(), call)
                pipe.hdel(self.keys.seeding(), call)
                raw, _ = pipe.execute()
            if raw is None:
                continue
            entry = json.loads(raw)
            out.append((entry["c"], [(tid, CrawlRequest.from_dict(r)) for tid, r in entry["s"]]))
        return out

