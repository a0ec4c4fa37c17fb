"""Shards of shared state: which shard a name belongs to, and hash tags that spread shards
evenly over a Redis Cluster's masters.

A Redis Cluster puts a key on one of 16,384 slots by the CRC16 of its hash tag (the text
between its first ``{`` and the next ``}``), and ``redis-cli --cluster create`` gives each
master one run of consecutive slots. Tags named ``hosts:0`` … ``hosts:15`` would fall on
slots at random, several on one master and none on another; :func:`spread_tags` picks, for
shard k of n, the first tag ``hosts:k``, ``hosts:k.1``, ``hosts:k.2`` … whose slot lies in
the k-th of n equal runs of slots, so n shards share out evenly over any number of masters
up to n holding equal runs. The tags are a pure function of (base, n): every process names
the same keys.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import TypeVar

T = TypeVar("T")
K = TypeVar("K")
A = TypeVar("A")

#: Slots of a Redis Cluster.
SLOTS = 16384
#: Shards of the politeness state and of each crawl's gate on a Redis Cluster, where the
#: settings leave them unset: an even share for up to 16 masters (``bench/shards``).
CLUSTER_SHARDS = 16


def _crc16_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return tuple(table)


_TABLE = _crc16_table()


def crc16(data: bytes) -> int:
    """CRC16-CCITT (XMODEM), the checksum Redis Cluster hashes keys with."""
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[((crc >> 8) ^ byte) & 0xFF]
    return crc


def tag_slot(tag: str) -> int:
    """The Redis Cluster slot of every key whose hash tag is ``tag``."""
    return crc16(tag.encode()) % SLOTS


def shard_of(name: str, shards: int) -> int:
    """The shard of ``name`` among ``shards``: the same in every process and every run
    (CRC32 of its UTF-8 bytes, not Python's randomised ``hash``)."""
    if shards <= 1:
        return 0
    return zlib.crc32(name.encode()) % shards


@lru_cache(maxsize=64)
def spread_tags(base: str, shards: int) -> tuple[str, ...]:
    """Hash tags for ``shards`` shards of ``base``: ``(base,)`` for one shard; else, for shard
    k, the first of ``base:k``, ``base:k.1``, ``base:k.2`` … whose slot lies in the k-th of
    ``shards`` equal runs of the slot space. ValueError below 1 or above :data:`SLOTS`."""
    if not 1 <= shards <= SLOTS:
        raise ValueError(f"shards must be 1 to {SLOTS}, not {shards}")
    if shards == 1:
        return (base,)
    tags = []
    for k in range(shards):
        low, high = k * SLOTS // shards, (k + 1) * SLOTS // shards
        n = 0
        while True:
            tag = f"{base}:{k}" if n == 0 else f"{base}:{k}.{n}"
            if low <= tag_slot(tag) < high:
                break
            n += 1
        tags.append(tag)
    return tuple(tags)


def task_shard(task_id: str, shards: int) -> int:
    """The shard of a task id: the one it names after its last ``.`` (:func:`shard_task_id`),
    else a stable hash of the whole id (ids made elsewhere: adopted messages, store tokens)."""
    if shards <= 1:
        return 0
    head, dot, tail = task_id.rpartition(".")
    if dot and tail.isdigit() and int(tail) < shards and head:
        return int(tail)
    return shard_of(task_id, shards)


def shard_task_id(stem: str, shard: int, shards: int) -> str:
    """A task id that :func:`task_shard` places in ``shard`` (``stem`` itself with one shard)."""
    return stem if shards <= 1 else f"{stem}.{shard}"


def group_indexes(items: Iterable[T], key: Callable[[T], K]) -> dict[K, list[int]]:
    """The indexes of ``items`` grouped by ``key`` (a shard, a host), in order within each."""
    groups: dict[K, list[int]] = {}
    for n, item in enumerate(items):
        groups.setdefault(key(item), []).append(n)
    return groups


def scatter(groups: Mapping[K, list[int]], answers: Iterable[Iterable[A]], size: int, empty: A) -> list[A]:
    """Answers given group by group (``groups`` from :func:`group_indexes`, in its order) put
    back in the order of the items (``empty`` where none came)."""
    out = [empty] * size
    for indexes, answer in zip(groups.values(), answers):
        for n, value in zip(indexes, answer):
            out[n] = value
    return out


def spread_order(shards: int) -> list[int]:
    """Every shard of ``shards`` once, in an order whose first few lie far apart (the van
    der Corput sequence: 0, n/2, n/4, 3n/4 …): processes that take their shards in this
    order land on different masters of a cluster whose masters hold runs of shards
    (:func:`spread_tags`)."""
    order: list[int] = []
    seen: set[int] = set()
    i = 0
    while len(order) < shards:
        fraction, base, n = 0.0, 0.5, i
        while n:
            fraction += base * (n & 1)
            n >>= 1
            base /= 2
        k = int(fraction * shards)
        if k not in seen:
            seen.add(k)
            order.append(k)
        i += 1
    return order
