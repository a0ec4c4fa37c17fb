"""The Celery Beat schedule of crawler_tasks, and the one place for entries of your own.

``celery -A crawler_tasks beat`` runs the crawler's entries (one ``crawl.feed`` tick per
enabled seed feed, and the statistics flush, built from the settings by
:func:`crawler_tasks.service.beat.beat_schedule`) and every entry of :data:`ENTRIES`
below. Add yours there (a recrawl of a fixed list, say), in Celery's own format::

    ENTRIES = {
        "recrawl-home": {
            "task": "crawl.submit",
            "schedule": crontab(minute=0),
            "kwargs": {"urls": ["https://example.com/"], "dont_filter": True},
            "options": {"expires": 3000},
        },
    }

An entry may not take the name of one of the crawler's (``feed-…``, ``flush-stats``).
A second Beat (standing by on another node) does not feed the seed feeds twice; entries
of your own get no such guard.
"""

from typing import Any

from celery.schedules import crontab  # noqa: F401  (for entries of your own)

from crawler_tasks.service.beat import beat_schedule

#: Entries of your own, name -> Celery Beat entry, added to the crawler's.
ENTRIES: dict[str, dict[str, Any]] = {}

__all__ = ["ENTRIES", "beat_schedule"]
