"""Seeds a Bloom gate admitted but the broker did not take, kept to publish later.

A Bloom gate cannot forget a fingerprint, so a seed it admitted whose message the broker
refused would never pass it again: such seeds wait in the crawl's ``unpublished`` LIST
(:meth:`~crawler_tasks.state.keys.Keys.unpublished`), as JSON requests, and the crawl's
next seed call takes them back (:mod:`crawler_tasks.stages.enqueue`).
"""

from __future__ import annotations

import json
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
