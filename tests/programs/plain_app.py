"""A plain Celery app on the crawler's broker, which knows nothing of crawler_tasks
(``celery -A tests.programs.plain_app worker``): its control commands and the crawler's
must work on the same broker."""

from __future__ import annotations

import os

from celery import Celery

app = Celery("plain", broker=os.environ.get("PLAIN_BROKER", "redis://127.0.0.1:6379/0"))
app.conf.update(task_serializer="json", accept_content=["json"], task_default_queue="plain",
                worker_hijack_root_logger=False)


@app.task(name="plain.add")
def add(a: int, b: int) -> int:
    return a + b
