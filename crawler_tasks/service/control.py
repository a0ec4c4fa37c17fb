"""Crawl control for other apps and the CLI: what the cluster's crawls are doing."""

from __future__ import annotations

from typing import Any

from ..stages.runtime import Runtime, current
from .celery_app import default_app


def list_crawls(rt: Runtime | None = None) -> list[dict[str, Any]]:
    """Every crawl the cluster knows: ``crawl_id``, ``state`` (``running`` while work is
    outstanding, else ``finished``), ``started`` and ``finished`` (ISO times: its first
    seeds, when a worker last found it drained), ``outstanding`` tasks and its
    ``counters``. ``rt``: this process's runtime of the default app when not given."""
    rt = rt or current(default_app())
    ids = rt.crawls.all_ids()
    stats = rt.stats.read_many(ids)
    left = rt.crawls.outstanding_many(ids)
    times = rt.crawls.times(ids)
    return [{"crawl_id": cid, "state": "running" if left[cid] else "finished",
             "started": times[cid][0], "finished": None if left[cid] else times[cid][1],
             "outstanding": left[cid], "counters": stats[cid]} for cid in ids]
