"""Another app, which does not import crawler_tasks: its tasks receive the crawler's
callbacks (``celery -A tests.programs.receiver worker -Q crawl.callbacks``) and note each
one in Redis (``RECEIVER_REDIS``) under the ``tag`` its signature carries."""

from __future__ import annotations

import json
import os
from typing import Any

import redis
from celery import Celery

app = Celery("receiver", broker=os.environ.get("RECEIVER_BROKER", "redis://127.0.0.1:6379/0"))
app.conf.update(task_serializer="json", accept_content=["json"], task_default_queue="crawl.callbacks",
                task_acks_late=True, worker_hijack_root_logger=False)
notes = redis.Redis.from_url(os.environ.get("RECEIVER_REDIS", "redis://127.0.0.1:6379/0"))


@app.task(name="receiver.page")
def page(summary: dict[str, Any], tag: str = "") -> None:
    notes.hincrby(f"receiver:{tag}:pages", summary["url"], 1)
    notes.rpush(f"receiver:{tag}:summaries", json.dumps(summary))


@app.task(name="receiver.done")
def done(payload: dict[str, Any], tag: str = "") -> None:
    notes.rpush(f"receiver:{tag}:done", json.dumps(payload))
