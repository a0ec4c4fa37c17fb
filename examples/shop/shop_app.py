"""The shop's own Celery app, which never imports crawler_tasks: its task is told of each
page the crawler stores (``submit(..., on_page="shop_app.page_stored")``) and appends the
summary to ``pages.jsonl``. Run it with ``celery -A shop_app worker -Q crawl.callbacks``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from celery import Celery

app = Celery("shop_app", broker=os.environ.get("CRAWLER_BROKER_URL", "redis://127.0.0.1:6379/0"))
app.conf.update(task_serializer="json", accept_content=["json"], task_default_queue="crawl.callbacks")


@app.task(name="shop_app.page_stored")
def page_stored(page: dict[str, Any]) -> None:
    """``page``: url, status, fingerprint, crawl_id, depth, items (a count), store, description."""
    with open("pages.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(page) + "\n")
