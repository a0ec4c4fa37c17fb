"""A feed's lock: one tick feeds at a time, and a tick that lost its lock stops.

``SET NX PX`` of a random token, renewed before each chunk and each sitemap
fetch, released by compare-and-delete (scripts ``feed_lock_renew.lua`` and
``feed_lock_release.lua``): a tick that finds it held is skipped
(``skipped/busy``). A tick that outlives the lock's TTL without renewing it
stops at its next chunk rather than feed beside the tick that took the lock
over. The lock itself (:class:`~crawler_tasks.state.feeds.FeedLock`) is in the state
layer; here is how long a tick holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...state.feeds import FeedLock

if TYPE_CHECKING:
    from ...core.settings import Settings

__all__ = ["FeedLock", "lock_ttl"]


def lock_ttl(settings: Settings) -> float:
    """Seconds a tick's lock lasts between renewals: longer than one sitemap download."""
    return max(60.0, 3 * settings.download_timeout)
