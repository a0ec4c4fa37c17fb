"""Celery Beat entries for crawler_tasks, loaded into ``app.conf.beat_schedule``.

``celery -A crawler_tasks beat`` sends one ``crawl.feed`` tick per enabled seed
feed (:mod:`crawler_tasks.stages.feeds`) every interval: the Redis start-URL key every
``CRAWLER_START_URLS_INTERVAL`` s, ``CRAWLER_SEED_FILE`` and
``CRAWLER_SITEMAP_URLS`` every ``CRAWLER_SEED_INTERVAL`` s. A tick expires after
one interval, so ticks do not pile up while no worker takes them. A second Beat
(for availability) does not feed twice: each tick takes its feed's lock and the
file and sitemap feeds feed once per interval (see the feeds module).

Entries of your own go into ``app.conf.beat_schedule`` (see the top-level
``beat_schedule.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..stages.feeds import configured

if TYPE_CHECKING:
    from ..core.settings import Settings


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """The entries for ``settings`` (one per enabled feed, and the statistics flush);
    ``celery_config`` loads them."""
    entries = {
        f"feed-{feed.name.replace('_', '-')}": {
            "task": "crawl.feed",
            "schedule": feed.interval,
            "args": [feed.name],
            "options": {"expires": feed.interval},
        }
        for feed in configured(settings) if feed.enabled
    }
    # Crawl counters into the stores that keep statistics (Elasticsearch's <index>-stats).
    entries["flush-stats"] = {
        "task": "crawl.flush_stats",
        "schedule": settings.stats_flush_s,
        "options": {"expires": settings.stats_flush_s},
    }
    return entries
