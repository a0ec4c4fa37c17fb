"""The ``start_urls`` feed: entries other programs push onto a Redis key, moved into the crawls.

The key is ``CRAWLER_START_URLS_KEY`` (a list, set or sorted set);
``CRAWLER_START_URLS_BATCH`` entries per tick, every
``CRAWLER_START_URLS_INTERVAL`` s. A tick moves its entries to a taking list in
one step (producers may push meanwhile), and drops them from it only after they
were gated and published; malformed ones go to ``<key>:rejected`` with their
reason. It needs no interval slot: its entries leave the key once fed, so a
second beat only drains it sooner.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...core.errors import BadInput
from ...state import scripts
from .chunks import judge, submit_chunk
from .lock import FeedLock
from .outcomes import Fed

if TYPE_CHECKING:
    from ..runtime import Runtime

#: Rejected start-URL items kept for a user to look at.
REJECTED_KEPT = 1000


def taking_key(key: str) -> str:
    """The list holding the start-URL entries a tick took and has not finished: in the same
    Redis Cluster slot as ``key`` (its hash tag, or ``key`` made one)."""
    tagged = "{" in key and "}" in key.split("{", 1)[1]
    return f"{key}:taking" if tagged else f"{{{key}}}:taking"


def waiting(rt: Runtime) -> int:
    """Entries waiting in the start-URL key (0 when it is missing or of a type not read),
    and those a tick took but did not finish."""
    key = rt.settings.start_urls_key
    size = {"list": rt.redis.llen, "set": rt.redis.scard, "zset": rt.redis.zcard}.get(
        rt.redis.type(key).decode())
    return (int(size(key)) if size else 0) + int(rt.redis.llen(taking_key(key)))


def feed_start_urls(rt: Runtime, lock: FeedLock, fed: Fed, batch: int) -> None:
    """Move up to ``batch`` entries of the start-URL key into their crawls.

    A list is taken from its head, a set at random, a sorted set lowest
    scores first. Taking moves the entries to a taking list in one step; they
    leave it only after they were submitted (at least once: a worker dying
    half-way makes the next tick submit them again, and the gate refuses the
    repeats).
    """
    key, client = rt.settings.start_urls_key, rt.redis
    taking = taking_key(key)
    items = scripts.register(client, "feed_take.lua")(keys=[key, taking], args=[batch])
    requests, rejected = [], []
    for raw in items:
        text = raw.decode("utf-8", errors="replace").strip()
        try:
            requests.append(judge(text, rt.settings.seed_crawl_id, rt.addresses,
                                  rt.settings.max_url_length))
        except BadInput as exc:
            rejected.append((text, exc))
    if requests and not submit_chunk(rt, lock, fed, requests):
        return  # kept in the taking list: the next tick takes the same entries
    with rt.pipeline() as pipe:
        for text, exc in rejected:
            fed.refuse(f"an entry of {key}", exc)
            pipe.lpush(f"{key}:rejected", json.dumps({"item": text[:500], "error": str(exc)},
                                                     ensure_ascii=False))
        pipe.ltrim(f"{key}:rejected", 0, REJECTED_KEPT - 1)
        pipe.delete(taking)
        pipe.execute()
