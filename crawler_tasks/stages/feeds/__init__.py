"""Seed feeds: what each of Beat's ``crawl.feed`` ticks moves into the crawls.

Three feeds, each on when its setting is set:

``start_urls``  the Redis key ``CRAWLER_START_URLS_KEY`` (a list, set or sorted set) other
                programs push seeds onto, ``CRAWLER_START_URLS_BATCH`` entries per tick
                (:mod:`~crawler_tasks.stages.feeds.start_urls`);
``seed_file``   ``CRAWLER_SEED_FILE``, re-read whole every ``CRAWLER_SEED_INTERVAL`` s
                (:mod:`~crawler_tasks.stages.feeds.seed_file`);
``sitemaps``    ``CRAWLER_SITEMAP_URLS`` every ``CRAWLER_SEED_INTERVAL`` s, a newer
                ``<lastmod>`` re-admitting its URL (:mod:`~crawler_tasks.stages.feeds.sitemaps`).

What they share: each seed judged on its own and gated a chunk at a time
(:mod:`~crawler_tasks.stages.feeds.chunks`), one feeder at a time under the feed's
lock (:mod:`~crawler_tasks.stages.feeds.lock`), each tick's outcome in the feed's
status hash that ``crawler-tasks seeds`` shows (:mod:`~crawler_tasks.stages.feeds.outcomes`).
A tick, step by step: :mod:`~crawler_tasks.stages.feeds.feeder`.
"""

from __future__ import annotations

from .chunks import CHUNK, judge
from .config import FEED_NAMES, SEED_FILE, SITEMAPS, START_URLS, FeedConfig, config_of, configured
from .feeder import SLOT_SHARE, tick
from .lock import FeedLock, lock_ttl
from .outcomes import LOGGED_PER_TICK, Fed, Tick, record, status
from .seed_file import MAX_LINE, feed_seed_file
from .sitemaps import feed_sitemaps
from .start_urls import REJECTED_KEPT, feed_start_urls, taking_key, waiting

__all__ = [
    "CHUNK", "FEED_NAMES", "LOGGED_PER_TICK", "MAX_LINE", "REJECTED_KEPT", "SEED_FILE", "SITEMAPS",
    "SLOT_SHARE", "START_URLS", "Fed", "FeedConfig", "FeedLock", "Tick", "config_of", "configured",
    "feed_seed_file", "feed_sitemaps", "feed_start_urls", "judge", "lock_ttl", "record", "status",
    "taking_key", "tick", "waiting",
]
