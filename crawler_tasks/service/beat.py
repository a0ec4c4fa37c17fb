"""Celery Beat entries for crawler_tasks, loaded into ``app.conf.beat_schedule``.

``celery -A crawler_tasks beat`` sends one ``crawl.feed`` tick per enabled seed
feed (:mod:`crawler_tasks.stages.feeds`) every interval: the Redis start-URL key every
``CRAWLER_START_URLS_INTERVAL`` s, ``CRAWLER_SEED_FILE`` and
``CRAWLER_SITEMAP_URLS`` every ``CRAWLER_SEED_INTERVAL`` s. A tick expires after
one interval, so ticks do not pile up while no worker takes them. A second Beat
(for availability) does not feed twice: each tick takes its feed's lock and the
file and sitemap feeds feed once per interval (see the feeds module).

Entries of your own go into ``ENTRIES`` of the top-level ``beat_schedule.py``, the one
place for them: :func:`beat_schedule` adds them to the crawler's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.errors import SettingsError
from ..stages.feeds import configured

if TYPE_CHECKING:
    from ..core.settings import Settings


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """The entries for ``settings`` (one per enabled feed, and the statistics flush), then the
    deployment's own (:func:`own_entries`); ``celery_config`` loads them."""
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
    # The revisits now due, of every crawl that keeps a revisit schedule.
    entries["revisit"] = {
        "task": "crawl.revisit",
        "schedule": settings.revisit_tick_s,
        "options": {"expires": settings.revisit_tick_s},
    }
    for name, entry in own_entries().items():
        if name in entries:
            raise SettingsError(f"beat_schedule.py: entry {name!r} has the name of one of the crawler's own")
        entries[name] = entry
    return entries


def own_entries() -> dict[str, dict[str, Any]]:
    """The deployment's own entries: ``ENTRIES`` of the top-level ``beat_schedule.py``
    (installed with the package; none where it cannot be imported)."""
    try:
        import beat_schedule
    except ImportError:
        return {}
    return dict(beat_schedule.ENTRIES)
