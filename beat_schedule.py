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

from typing import Any

beat_schedule: dict[str, dict[str, Any]] = {
    # Seeds other programs push onto the Redis list <prefix>:start_urls (scrapy-redis style).
    "feed-start-urls": {
        "task": "crawl.feed",
        "schedule": 5.0,
        "options": {"expires": 5.0},
    },
}
