"""One tick of a feed: under the feed's lock, with room in the queue, once per interval, its outcome recorded.

One feeder at a time. A tick

1. takes the feed's lock (:mod:`~crawler_tasks.stages.feeds.lock`): a tick that
   finds it held is skipped (``skipped/busy``);
2. skips (``skipped/queue_full``) while more fetches wait in the broker than
   ``CRAWLER_MAX_QUEUED``, reading and removing nothing. A long tick checks again before each
   chunk and stops there (``stopped_early``) when the queue filled up, so the broker holds at
   most the cap plus one chunk (or one start-URL batch); the next tick goes on (the file and
   the sitemaps from the top: the gate refuses what was already fed);
3. for ``seed_file`` and ``sitemaps`` only, claims the interval's slot: ``SET NX PX`` of
   0.9 x the interval, never released. A tick that finds it taken is skipped
   (``skipped/already_fed``). So two Beat processes (or a Beat restarted mid-interval) feed
   these once per interval, not once each: whichever tick comes first in an interval feeds,
   the other beat's tick in the same interval is skipped. The 10% margin absorbs the jitter
   of a single Beat's ticks. ``start_urls`` needs no slot: its entries leave the key once fed,
   so a second beat only drains it sooner;
4. runs the feed (:mod:`~crawler_tasks.stages.feeds.start_urls`,
   :mod:`~crawler_tasks.stages.feeds.seed_file`, :mod:`~crawler_tasks.stages.feeds.sitemaps`),
   counts the malformed seeds in their crawl, and records the outcome in the feed's status
   (:mod:`~crawler_tasks.stages.feeds.outcomes`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...core import counters
from ...core.errors import BrokerUnavailable, FeedSourceUnavailable, QueueFull
from .. import enqueue
from .chunks import CHUNK
from .config import SEED_FILE, SITEMAPS, START_URLS, FeedConfig, config_of
from .lock import FeedLock, lock_ttl
from .outcomes import Fed, Tick, now, record
from .seed_file import feed_seed_file
from .sitemaps import feed_sitemaps
from .start_urls import feed_start_urls

if TYPE_CHECKING:
    from ..deps import FeedDeps

log = logging.getLogger(__package__)  # the feeds' one logger: crawler_tasks.stages.feeds

#: Share of the interval a periodic feed's slot lasts.
SLOT_SHARE = 0.9

_BODIES: dict[str, Callable[[FeedDeps, FeedLock, Fed, int], None]] = {
    START_URLS: feed_start_urls, SEED_FILE: feed_seed_file, SITEMAPS: feed_sitemaps}


def tick(rt: FeedDeps, name: str = START_URLS, *, batch: int | None = None) -> Tick:
    """Run one tick of feed ``name`` (see the module docstring); its outcome is recorded.

    ``batch``: start-URL entries taken, or seeds per gate call of the other
    feeds (default ``CRAWLER_START_URLS_BATCH`` / :data:`CHUNK`). Raises
    :class:`BadInput` for an unknown feed name.
    """
    config = config_of(rt.settings, name)
    if not config.enabled:
        return Tick(config.name, "off")
    lock = rt.feeds.lock(config.name, lock_ttl(rt.settings))
    if not lock.acquire():
        return record(rt, Tick(config.name, "skipped", "busy"))
    try:
        result = _locked_tick(rt, config, lock, batch)
    finally:
        lock.release()
    return record(rt, result)


def _locked_tick(rt: FeedDeps, config: FeedConfig, lock: FeedLock, batch: int | None) -> Tick:
    try:
        enqueue.ensure_room(rt)
    except QueueFull as exc:
        log.info("feed %s: tick skipped: %s", config.name, exc)
        return Tick(config.name, "skipped", "queue_full")
    if config.periodic and not _claim_slot(rt, config):
        return Tick(config.name, "skipped", "already_fed")
    fed = Fed(config.name)
    default = rt.settings.start_urls_batch if config.name == START_URLS else CHUNK
    try:
        _BODIES[config.name](rt, lock, fed, batch or default)
    except (FeedSourceUnavailable, BrokerUnavailable) as exc:
        log.warning("feed %s: tick failed: %s", config.name, exc)
        return Tick(config.name, "failed", str(exc), fed)
    finally:
        fed.close()
        count_invalid(rt, fed)
    return Tick(config.name, "fed", fed=fed)


def _claim_slot(rt: FeedDeps, config: FeedConfig) -> bool:
    """True for the first tick of this interval; later ticks (another beat's) find it taken."""
    slot_ms = max(1, int(config.interval * SLOT_SHARE * 1000))
    return rt.feeds.claim_slot(config.name, now(), slot_ms)


def count_invalid(rt: FeedDeps, fed: Fed) -> None:
    """Count the tick's malformed seeds (``seeds/invalid``) in the seed crawl."""
    if fed.invalid:
        crawl_id = rt.settings.seed_crawl_id
        rt.crawls.register(crawl_id)  # so `crawler-tasks seeds` lists it
        rt.gate.add_counts(crawl_id, {counters.SEEDS_INVALID: fed.invalid})
