"""What the gate remembers: the "seen" filter of each crawl, chosen by ``CRAWLER_DEDUP``.

Each filter is a strategy: a Lua fragment the gate's one script includes
(``lua/seen_*.lua``: two functions, ``seen_test(fps)`` → a list of booleans and
``seen_add(fps)``), the
key it lives under, and the read-only figures ``crawler-tasks stats`` shows.
The gate's script (:mod:`crawler_tasks.state.gate`) stays the same for all of them:
replay, stale deliveries, the page budget and the outstanding set do not
depend on how membership is kept.

=================  ==========================================  ====================
Filter             Kept as                                     Re-admits a URL
=================  ==========================================  ====================
:class:`SeenSet`   a SET of fingerprints (~80 bytes per URL)   never
:class:`SeenRecent` a ZSET scored by admission time, trimmed   exactly ``CRAWLER_RECRAWL_AFTER`` s
                   past the window                             after its admission
:class:`Bloom`     a scalable Bloom filter on Redis bitmaps    never; with a window,
                   (~2 bytes per URL)                          1× to 2× the window later
=================  ==========================================  ====================

**Bloom filter.** Slice *i* holds ``CRAWLER_BLOOM_CAPACITY · 2^i`` URLs at
error rate ``p / 2^(i+1)`` (``p`` = ``CRAWLER_BLOOM_ERROR_RATE``), so the
rates of all slices sum to less than ``p`` however far the crawl grows (a
scalable Bloom filter, Almeida et al. 2007, growth 2, tightening ½). A slice
of ``n`` URLs at rate ``q`` has ``n·ln(1/q)/ln²2`` bits and ``⌈log₂(1/q)⌉``
hashes, placed by enhanced double hashing of the SHA1 fingerprint; at the
first slice's capacity that is 1.10× the optimum for ``p``. A slice's bits
are split over strings of :data:`SEGMENT_BITS` bits (Redis strings stop at
512 MB). The first URL admitted allocates the first slice whole
(``CRAWLER_BLOOM_CAPACITY × 1.97`` bytes at the defaults: 19.7 MB).

With ``CRAWLER_RECRAWL_AFTER`` = *w* the Bloom filter is kept per generation
``⌊now / w⌋``: a URL is seen while it is in the current or the previous
generation's filter, and is added to the current one. Older generations
expire, so memory stays at two generations' worth, and a URL admitted at *t*
passes again at the start of the second generation after *t*: between *w* and
2*w* later.

A Bloom filter cannot forget: a seed admitted but not published (the broker
failed) stays seen, so :mod:`crawler_tasks.stages.enqueue` keeps it in the crawl's
``unpublished`` list and publishes it on the next submit.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Any

import redis

from ..core.settings import Settings
from ..core.shards import shard_of
from .keys import Keys, template

#: Bytes per Redis string of a Bloom slice (128 MiB; Redis' limit is 512 MB).
SEGMENT_BYTES = 2**27


@dataclass(frozen=True)
class SeenInfo:
    """What ``crawler-tasks stats`` shows of one crawl's filter."""

    mode: str
    items: int
    bytes: int
    capacity: int | None = None
    error_rate: float | None = None
    slices: int | None = None
    recrawl_after: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class SeenFilter:
    """One way of keeping a crawl's seen fingerprints (a strategy of the gate's script)."""

    mode = ""
    #: The ``lua/`` fragment defining ``seen_test(fps)`` and ``seen_add(fps)`` over ``KEYS[2]``
    #: and params ``P``, which the gate's script includes.
    LUA_FILE = ""
    #: True when :meth:`forget` can undo an admission.
    can_forget = True

    def __init__(self, keys: Keys) -> None:
        self.keys = keys

    def key(self, crawl_id: str, shard: int = 0) -> str:
        """The key (or key stem) the script gets as ``KEYS[2]`` (that of one gate shard)."""
        raise NotImplementedError

    def by_shard(self, crawl_id: str, fingerprints: list[str]) -> dict[str, list[str]]:
        """``fingerprints`` grouped by the key of their gate shard."""
        groups: dict[str, list[str]] = {}
        for fp in fingerprints:
            groups.setdefault(self.key(crawl_id, shard_of(fp, self.keys.gate_shards)), []).append(fp)
        return groups

    def _each_key(self, crawl_id: str) -> list[str]:
        return [self.key(crawl_id, k) for k in range(self.keys.gate_shards)]

    def params(self) -> dict[str, Any]:
        """The fragment's parameters (``P`` in Lua)."""
        return {}

    def forget(self, pipe: redis.client.Pipeline, crawl_id: str, fingerprints: list[str]) -> None:
        """Queue the removal of admitted ``fingerprints`` on ``pipe``."""
        raise NotImplementedError

    def info(self, client: redis.Redis, crawl_id: str) -> SeenInfo:
        raise NotImplementedError


class SeenSet(SeenFilter):
    """Exact: a Redis SET of fingerprints; a URL is admitted once, ever."""

    mode = "set"
    LUA_FILE = "seen_set.lua"

    def key(self, crawl_id: str, shard: int = 0) -> str:
        return self.keys.seen(crawl_id, shard)

    def forget(self, pipe: redis.client.Pipeline, crawl_id: str, fingerprints: list[str]) -> None:
        for key, fps in self.by_shard(crawl_id, fingerprints).items():
            pipe.srem(key, *fps)

    def info(self, client: redis.Redis, crawl_id: str) -> SeenInfo:
        keys = self._each_key(crawl_id)
        return SeenInfo(self.mode, sum(int(client.scard(k)) for k in keys),
                        sum(int(client.memory_usage(k) or 0) for k in keys))


class SeenRecent(SeenFilter):
    """Exact with a recrawl window: a ZSET fingerprint → admission time (Redis clock).

    Entries older than the window are trimmed on each admission, so the set
    holds only the last window's URLs; a URL passes again exactly
    ``window`` seconds after it was admitted.
    """

    mode = "set"
    LUA_FILE = "seen_recent.lua"

    def __init__(self, keys: Keys, window: float) -> None:
        super().__init__(keys)
        self.window = window

    def key(self, crawl_id: str, shard: int = 0) -> str:
        return self.keys.seen_recent(crawl_id, shard)

    def params(self) -> dict[str, Any]:
        return {"window": self.window}

    def forget(self, pipe: redis.client.Pipeline, crawl_id: str, fingerprints: list[str]) -> None:
        for key, fps in self.by_shard(crawl_id, fingerprints).items():
            pipe.zrem(key, *fps)

    def info(self, client: redis.Redis, crawl_id: str) -> SeenInfo:
        keys = self._each_key(crawl_id)
        return SeenInfo(self.mode, sum(int(client.zcard(k)) for k in keys),
                        sum(int(client.memory_usage(k) or 0) for k in keys), recrawl_after=self.window)


#: 512-bit blocks: the bits of one URL in a slice lie in one 64-byte block.
BLOCK_BITS = 512
#: Slices whose geometry is worked out up front: the filter holds 1,023 × its capacity.
MAX_SLICES = 10


class Bloom(SeenFilter):
    """A scalable, blocked Bloom filter on plain Redis strings (no RedisBloom module needed);
    with several gate shards, one filter per shard of ``capacity / shards`` URLs each."""

    mode = "bloom"
    LUA_FILE = "seen_bloom.lua"
    can_forget = False

    def __init__(self, keys: Keys, capacity: int, error_rate: float, window: float = 0.0,
                 segment_bytes: int = SEGMENT_BYTES) -> None:
        super().__init__(keys)
        self.capacity, self.error_rate = capacity, error_rate
        self.window, self.segment_bytes = window, segment_bytes
        per_shard = -(-capacity // keys.gate_shards)
        self.geometry = [slice_geometry(per_shard, error_rate, i) for i in range(MAX_SLICES)]
        self._id = f"{capacity}/{error_rate!r}" if keys.gate_shards == 1 else f"{per_shard}/{error_rate!r}"

    def key(self, crawl_id: str, shard: int = 0) -> str:
        return self.keys.bloom(crawl_id, shard)

    def params(self) -> dict[str, Any]:
        return {"id": self._id, "window": self.window,
                "segment": self.segment_bytes,
                "geo": [[g.blocks, g.hashes, g.capacity] for g in self.geometry],
                # the script names generations and segments as these key functions do
                "templates": {"generation": template(self.keys.bloom_generation, 2),
                              "segment": template(self.keys.bloom_segment, 3)}}

    def forget(self, pipe: redis.client.Pipeline, crawl_id: str, fingerprints: list[str]) -> None:
        """A Bloom filter cannot forget: the caller keeps the requests to publish later."""

    def stems(self, crawl_id: str, now: float | None = None, shard: int = 0) -> list[str]:
        """The filters a URL of ``shard`` is tested against: one, or this generation's and the
        last one's."""
        stem = self.key(crawl_id, shard)
        if not self.window:
            return [stem]
        gen = int((time.time() if now is None else now) // self.window)
        return [self.keys.bloom_generation(stem, gen), self.keys.bloom_generation(stem, gen - 1)]

    def info(self, client: redis.Redis, crawl_id: str) -> SeenInfo:
        items = size = slices = 0
        for stem in (s for k in range(self.keys.gate_shards) for s in self.stems(crawl_id, shard=k)):
            meta = client.hgetall(stem)
            if not meta:
                continue
            n = int(meta[b"slices"])
            slices = max(slices, n)
            for i in range(n):
                items += int(meta.get(f"n{i}".encode(), 0))
                segments = -(-self.geometry[i].blocks * 64 // self.segment_bytes)
                size += sum(int(client.strlen(self.keys.bloom_segment(stem, i, seg)))
                            for seg in range(segments))
        return SeenInfo(self.mode, items, size, self.capacity, self.error_rate, slices, self.window)


@dataclass(frozen=True)
class Slice:
    """Geometry of one Bloom slice: URLs it holds, 64-byte blocks, bits set per URL."""

    capacity: int
    blocks: int
    hashes: int


def blocked_error_rate(bits_per_url: float, hashes: int, block_bits: int = BLOCK_BITS) -> float:
    """False-positive rate of a blocked Bloom filter (Putze, Sanders, Singler 2007):
    the load of a block is Poisson, each block a small standard Bloom filter."""
    load = block_bits / bits_per_url
    term, total, i = math.exp(-load), 0.0, 0
    while i < load * 4 + 60:
        total += term * (1 - (1 - 1 / block_bits) ** (i * hashes)) ** hashes
        i += 1
        term *= load / i
    return total


@functools.lru_cache(maxsize=256)
def slice_geometry(capacity: int, error_rate: float, i: int) -> Slice:
    """Slice ``i``: ``capacity · 2^i`` URLs at rate ``error_rate / 2^(i+1)``, in the fewest bits."""
    q = error_rate / 2 ** (i + 1)
    bits = -math.log(q) / math.log(2) ** 2  # the optimum of a standard Bloom filter
    while True:
        best = round(bits * math.log(2))
        if any(blocked_error_rate(bits, k) <= q for k in range(max(1, best - 2), best + 3)):
            hashes = min((k for k in range(max(1, best - 2), best + 3)),
                         key=lambda k: blocked_error_rate(bits, k))
            break
        bits *= 1.005
    urls = capacity * 2**i
    return Slice(urls, math.ceil(urls * bits / BLOCK_BITS), hashes)


def make_filter(settings: Settings, keys: Keys) -> SeenFilter:
    """The seen filter ``settings`` ask for (``CRAWLER_DEDUP``, ``CRAWLER_RECRAWL_AFTER``)."""
    if settings.dedup == "bloom":
        return Bloom(keys, settings.bloom_capacity, settings.bloom_error_rate, settings.recrawl_after)
    if settings.recrawl_after > 0:
        return SeenRecent(keys, settings.recrawl_after)
    return SeenSet(keys)
