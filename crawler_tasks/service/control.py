"""Crawl control for other apps and the CLI: list the cluster's crawls; pause, resume or
cancel one of them (:mod:`crawler_tasks.stages.control`)."""

from __future__ import annotations

from typing import Any

from ..stages import control
from ..stages.runtime import Runtime, current
from .celery_app import default_app


def pause(crawl_id: str, rt: Runtime | None = None) -> None:
    """Hold the crawl's fetches in Redis (within a few seconds) until :func:`resume`; the
    other crawls go on. It stays paused across worker restarts."""
    control.pause(rt or current(default_app()), crawl_id)


def resume(crawl_id: str, rt: Runtime | None = None) -> int:
    """Run a paused crawl again; returns how many held fetches were published."""
    return control.resume(rt or current(default_app()), crawl_id)


def cancel(crawl_id: str, rt: Runtime | None = None) -> int:
    """Drop the crawl's queued, waiting and held fetches (counted ``cancelled``, no
    record); it ends once they have come up. Returns how many held ones were dropped now."""
    return control.cancel(rt or current(default_app()), crawl_id)


def list_crawls(rt: Runtime | None = None) -> list[dict[str, Any]]:
    """Every crawl the cluster knows: ``crawl_id``, ``state`` (``running`` while work is
    outstanding, else ``finished``; ``paused``, ``cancelling``, ``cancelled``), ``started`` and ``finished`` (ISO times: its first
    seeds, when a worker last found it drained), ``outstanding`` tasks and its
    ``counters``. ``rt``: this process's runtime of the default app when not given."""
    rt = rt or current(default_app())
    ids = rt.crawls.all_ids()
    stats = rt.stats.read_many(ids)
    left = rt.crawls.outstanding_many(ids)
    times = rt.crawls.times(ids)
    return [{"crawl_id": cid, "state": _state(rt.crawls.config(cid).control, left[cid]),
             "started": times[cid][0], "finished": None if left[cid] else times[cid][1],
             "outstanding": left[cid], "counters": stats[cid]} for cid in ids]


def _state(held: str | None, outstanding: int) -> str:
    if held == control.CANCELLED:
        return "cancelled" if not outstanding else "cancelling"
    if held == control.PAUSED:
        return "paused"
    return "running" if outstanding else "finished"
