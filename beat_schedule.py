"""Celery Beat entries for crawler_tasks, loaded into ``app.conf.beat_schedule``.

Run exactly one Beat for the cluster: ``celery -A crawler_tasks beat``.
Incremental recrawl entries (``crawl.submit`` with ``dont_filter``) arrive in a
later release; an entry looks like::

    "recrawl-home": {
        "task": "crawl.submit",
        "schedule": crontab(minute=0),
        "kwargs": {"urls": ["https://example.com/"], "dont_filter": True},
        "options": {"expires": 3000},
    }
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawler_tasks.settings import Settings


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """The entries for ``settings``; ``celery_config`` loads them."""
    return {
        # Seeds other programs push onto CRAWLER_START_URLS_KEY (scrapy-redis style).
        "feed-start-urls": {
            "task": "crawl.feed",
            "schedule": settings.start_urls_interval,
            "options": {"expires": settings.start_urls_interval},
        },
    }
