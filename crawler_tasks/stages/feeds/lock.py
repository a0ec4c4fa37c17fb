"""A feed's lock: one tick feeds at a time, and a tick that lost its lock stops.

``SET NX PX`` of a random token, renewed before each chunk and each sitemap
fetch, released by compare-and-delete (scripts ``feed_lock_renew.lua`` and
``feed_lock_release.lua``): a tick that finds it held is skipped
(``skipped/busy``). A tick that outlives the lock's TTL without renewing it
stops at its next chunk rather than feed beside the tick that took the lock
over.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import redis

from ...state import scripts

if TYPE_CHECKING:
    from ...core.settings import Settings


class FeedLock:
    """One tick's hold on a feed: ``SET NX PX`` of a random token; renewed and released only while ours."""

    def __init__(self, client: redis.Redis, key: str, ttl: float) -> None:
        self.client, self.key = client, key
        self.ttl_ms = max(1, int(ttl * 1000))
        self.token = uuid.uuid4().hex
        self._renew = scripts.register(client, "feed_lock_renew.lua")
        self._release = scripts.register(client, "feed_lock_release.lua")

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.token, nx=True, px=self.ttl_ms))

    def renew(self) -> bool:
        """Restart the TTL; False when the lock expired and is no longer ours."""
        return bool(self._renew(keys=[self.key], args=[self.token, self.ttl_ms]))

    def release(self) -> None:
        self._release(keys=[self.key], args=[self.token])


def lock_ttl(settings: Settings) -> float:
    """Seconds a tick's lock lasts between renewals: longer than one sitemap download."""
    return max(60.0, 3 * settings.download_timeout)
