"""The near-duplicate index: a crawl's pages by simhash band, in Redis.

Each of a page's four 16-bit bands (:func:`crawler_tasks.core.simhash.bands`) names a
field of that band's hash; its value holds the entries of the pages that share the band,
28 bytes each (the simhash, then the binary fingerprint), the newest
:data:`BUCKET_CAP` at most. Two simhashes within distance 3 share a band, so one look
at the page's four buckets finds every stored page within 3 bits; one script looks and
adds the page, atomically, in one round trip. The same script keeps the first page of
each body digest, so a body repeated byte for byte is found too (an archive writes it as
a ``revisit`` record).
"""

from __future__ import annotations

import json
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


@dataclass(frozen=True)
class Found:
    """What one look found: the nearest page within the distance, and the first page of the
    same body (its ``url``, ``fetched_at`` and ``fingerprint``), each if any."""

    near: Match | None
    same_body: dict[str, str] | None


class NearDups:
    """The near-duplicate index of every crawl (see the module docstring)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._look = scripts.register(client, "near_dups.lua")

    def look_and_add(self, crawl_id: str, page: dict[str, str], value: int | None, within: int,
                     digest: str | None = None) -> Found:
        """The stored page of ``crawl_id`` nearest to simhash ``value`` within ``within`` bits,
        and the first with the body ``digest`` (other pages than ``page``: its ``fingerprint``,
        ``url``, ``fetched_at``); the page is added to the index."""
        me = bytes.fromhex(page["fingerprint"])
        entry = b"" if value is None else value.to_bytes(8, "big") + me
        keys = [self.keys.digests(crawl_id), *(self.keys.near_dups(crawl_id, i) for i in range(BANDS))]
        found = self._look(keys=keys, args=[entry, ENTRY, BUCKET_CAP, digest or "",
                                            json.dumps(page, sort_keys=True), *bands(value or 0)])
        same = json.loads(found[0]) if found[0] else None
        if value is None:
            return Found(None, same)
        best: Match | None = None
        for bucket in found[1:]:
            for at in range(0, len(bucket), ENTRY):
                other, fp = int.from_bytes(bucket[at:at + 8], "big"), bucket[at + 8:at + ENTRY]
                if fp == me:
                    continue
                d = distance(value, other)
                if d <= within and (best is None or d < best.distance):
                    best = Match(fp.hex(), d)
        return Found(best, same)
