"""The near-duplicate index: a crawl's pages by simhash band, in Redis.

Each of a page's four 16-bit bands (:func:`crawler_tasks.core.simhash.bands`) names a
field of that band's hash; its value holds the entries of the pages that share the band,
28 bytes each (the simhash, then the binary fingerprint), the newest
:data:`BUCKET_CAP` at most. Two simhashes within distance 3 share a band, so one look
at the page's four buckets finds every stored page within 3 bits; one script looks and
adds the page, atomically, in one round trip.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from ..core.simhash import BANDS, bands, distance
from . import scripts
from .keys import Keys

#: Bytes of an entry: simhash (8) and fingerprint (20).
ENTRY = 28
#: Entries a bucket keeps at most (its newest): a bucket's read stays bounded.
BUCKET_CAP = 256


@dataclass(frozen=True)
class Match:
    """The closest stored page within the distance asked: its fingerprint and distance."""

    fingerprint: str
    distance: int


class NearDups:
    """The near-duplicate index of every crawl (see the module docstring)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._look = scripts.register(client, "near_dups.lua")

    def look_and_add(self, crawl_id: str, fingerprint: str, value: int, within: int) -> Match | None:
        """The stored page of ``crawl_id`` nearest to ``value`` within ``within`` bits
        (another page than ``fingerprint``), if any; the page is added to the index."""
        me = bytes.fromhex(fingerprint)
        entry = value.to_bytes(8, "big") + me
        found = self._look(keys=[self.keys.near_dups(crawl_id, i) for i in range(BANDS)],
                           args=[entry, ENTRY, BUCKET_CAP, *bands(value)])
        best: Match | None = None
        for bucket in found:
            for at in range(0, len(bucket), ENTRY):
                other, fp = int.from_bytes(bucket[at:at + 8], "big"), bucket[at + 8:at + ENTRY]
                if fp == me:
                    continue
                d = distance(value, other)
                if d <= within and (best is None or d < best.distance):
                    best = Match(fp.hex(), d)
        return best
