"""The Celery Beat schedule of crawler_tasks: one ``crawl.feed`` tick per enabled seed feed
and the statistics flush, built from the settings by
:func:`crawler_tasks.service.beat.beat_schedule` (``celery -A crawler_tasks beat`` loads it).

To add entries of your own (a recrawl of a fixed list, say), update the app's schedule in
a module of your own and run Beat on it (``celery -A mybeat beat``)::

    from celery.schedules import crontab
    from crawler_tasks import app

    app.conf.beat_schedule["recrawl-home"] = {
        "task": "crawl.submit",
        "schedule": crontab(minute=0),
        "kwargs": {"urls": ["https://example.com/"], "dont_filter": True},
        "options": {"expires": 3000},
    }
"""

from crawler_tasks.service.beat import beat_schedule

__all__ = ["beat_schedule"]
