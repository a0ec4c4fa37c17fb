"""The ``start_urls`` feed: entries other programs push onto a Redis key, moved into the crawls.

The key is ``CRAWLER_START_URLS_KEY`` (a list, set or sorted set);
``CRAWLER_START_URLS_BATCH`` entries per tick, every
``CRAWLER_START_URLS_INTERVAL`` s. A tick moves its entries to a taking list in
one step (producers may push meanwhile), and drops them from it only after they
were gated and published; malformed ones go to ``<key>:rejected`` with their
reason (:class:`~crawler_tasks.state.feeds.FeedState` holds the commands). It needs no interval slot: its entries leave the key once fed, so a
second beat only drains it sooner.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...core.errors import BadInput
from ...state.feeds import REJECTED_KEPT, taking_key
from .chunks import judge, submit_chunk
from .lock import FeedLock
from .outcomes import Fed

if TYPE_CHECKING:
    from ..deps import FeedDeps

__all__ = ["REJECTED_KEPT", "feed_start_urls", "taking_key", "waiting"]


def waiting(rt: FeedDeps) -> int:
    """Entries waiting in the start-URL key (0 when it is missing or of a type not read),
    and those a tick took but did not finish."""
    return rt.feeds.start_urls_waiting()


def feed_start_urls(rt: FeedDeps, lock: FeedLock, fed: Fed, batch: int) -> None:
    """Move up to ``batch`` entries of the start-URL key into their crawls.

    A list is taken from its head, a set at random, a sorted set lowest
    scores first. Taking moves the entries to a taking list in one step; they
    leave it only after they were submitted (at least once: a worker dying
    half-way makes the next tick submit them again, and the gate refuses the
    repeats).
    """
    key = rt.settings.start_urls_key
    items = rt.feeds.take_start_urls(batch)
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
    for _, why in rejected:
        fed.refuse(f"an entry of {key}", why)
    rt.feeds.finish_start_urls([json.dumps({"item": text[:500], "error": str(why)}, ensure_ascii=False)
                                for text, why in rejected])
