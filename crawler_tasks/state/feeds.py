"""The seed feeds' Redis side: the start-URL key, a feed's lock, slot and status, sitemap dates.

What the feeds (:mod:`crawler_tasks.stages.feeds`) keep in Redis, and every command they
send:

* the start-URL key (``CRAWLER_START_URLS_KEY``: a list, set or sorted set other programs
  push onto), the taking list a tick moves its entries to in one step
  (``feed_take.lua``), and ``<key>:rejected``, the malformed entries kept for a user;
* a feed's lock (:class:`FeedLock`: ``SET NX PX`` of a random token, renewed and
  released by compare-and-delete, ``feed_lock_renew.lua`` and ``feed_lock_release.lua``)
  and its interval slot (``SET NX PX``, never released);
* a feed's status hash (:meth:`~crawler_tasks.state.keys.Keys.feed`);
* per crawl, the ``<lastmod>`` a sitemap gave each URL when it was last fed (a sorted set
  of at most ``CRAWLER_SITEMAP_LASTMOD_MAX`` entries).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

import redis

from . import scripts
from .keys import Keys

#: Rejected start-URL items kept for a user to look at.
REJECTED_KEPT = 1000


def taking_key(key: str) -> str:
    """The list holding the start-URL entries a tick took and has not finished: in the same
    Redis Cluster slot as ``key`` (its hash tag, or ``key`` made one)."""
    tagged = "{" in key and "}" in key.split("{", 1)[1]
    return f"{key}:taking" if tagged else f"{{{key}}}:taking"


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


class FeedState:
    """Every Redis command of the seed feeds (see the module docstring).

    ``start_urls_key`` is ``CRAWLER_START_URLS_KEY``; ``lastmod_max`` is
    ``CRAWLER_SITEMAP_LASTMOD_MAX``.
    """

    def __init__(self, client: redis.Redis, keys: Keys, *, start_urls_key: str,
                 lastmod_max: int) -> None:
        self.client = client
        self.keys = keys
        self.start_urls_key = start_urls_key
        self.lastmod_max = lastmod_max
        self._take = scripts.register(client, "feed_take.lua")

    # -- a feed's lock, slot and status ------------------------------------------

    def lock(self, name: str, ttl: float) -> FeedLock:
        """A new (not yet acquired) hold on feed ``name``'s lock, lasting ``ttl`` s between renewals."""
        return FeedLock(self.client, self.keys.feed_lock(name), ttl)

    def claim_slot(self, name: str, stamp: str, ms: int) -> bool:
        """Take feed ``name``'s slot for ``ms`` milliseconds (``SET NX PX`` of ``stamp``);
        False when a tick took it before."""
        return bool(self.client.set(self.keys.feed_slot(name), stamp, nx=True, px=ms))

    def record(self, name: str, fields: Mapping[str, str], counts: Mapping[str, int]) -> None:
        """Set ``fields`` of feed ``name``'s status hash and add ``counts`` to it, in one round trip."""
        key = self.keys.feed(name)
        with self.client.pipeline(transaction=False) as pipe:
            pipe.hset(key, mapping=dict(fields))
            for field, amount in counts.items():
                pipe.hincrby(key, field, amount)
            pipe.execute()

    def status(self, name: str) -> dict[str, str]:
        """Feed ``name``'s status hash, decoded ({} when it never ticked)."""
        return {k.decode(): v.decode() for k, v in self.client.hgetall(self.keys.feed(name)).items()}

    # -- the start-URL key -------------------------------------------------------

    def start_urls_waiting(self) -> int:
        """Entries waiting in the start-URL key (0 when it is missing or of a type not read),
        and those a tick took but did not finish."""
        key, client = self.start_urls_key, self.client
        size = {"list": client.llen, "set": client.scard, "zset": client.zcard}.get(
            client.type(key).decode())
        return (int(size(key)) if size else 0) + int(client.llen(taking_key(key)))

    def take_start_urls(self, batch: int) -> list[bytes]:
        """Move up to ``batch`` entries of the start-URL key to its taking list, in one step
        (a list from its head, a set at random, a sorted set lowest scores first), and return
        them. Entries a tick took but did not finish (its worker died) come back first, alone."""
        key = self.start_urls_key
        return self._take(keys=[key, taking_key(key)], args=[batch])

    def finish_start_urls(self, rejected: Sequence[str]) -> None:
        """The taken entries were submitted: drop the taking list, and keep ``rejected``
        (the malformed ones, encoded) in ``<key>:rejected``, the newest :data:`REJECTED_KEPT`."""
        key = self.start_urls_key
        with self.client.pipeline(transaction=False) as pipe:
            for item in rejected:
                pipe.lpush(f"{key}:rejected", item)
            pipe.ltrim(f"{key}:rejected", 0, REJECTED_KEPT - 1)
            pipe.delete(taking_key(key))
            pipe.execute()

    # -- sitemap dates -----------------------------------------------------------

    def lastmods(self, crawl_id: str, fingerprints: Sequence[str]) -> list[float | None]:
        """The ``<lastmod>`` (Unix time) recorded for each fingerprint, None where none is."""
        return self.client.zmscore(self.keys.sitemap_lastmod(crawl_id), list(fingerprints))

    def remember_lastmods(self, crawl_id: str, dates: Mapping[str, float]) -> None:
        """Record ``dates`` (fingerprint -> Unix time), keeping the newest ``lastmod_max``."""
        key = self.keys.sitemap_lastmod(crawl_id)
        with self.client.pipeline(transaction=False) as pipe:
            pipe.zadd(key, dict(dates))
            pipe.zremrangebyrank(key, 0, -(self.lastmod_max + 1))
            pipe.execute()
