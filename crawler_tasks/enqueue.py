"""Publishing: the only code that sends crawl messages, always with route and priority."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import routing
from .gate import Candidate
from .models import CrawlRequest

if TYPE_CHECKING:
    from .runtime import Runtime


def new_task_id() -> str:
    return uuid.uuid4().hex


def fetches(rt: Runtime, requests: Sequence[CrawlRequest], *, parent_id: str | None = None) -> int:
    """Gate ``requests`` (all of one crawl) in one round trip and publish the admitted ones.

    Returns how many were published.
    """
    if not requests:
        return 0
    crawl_id = requests[0].crawl_id
    max_pages = rt.limits(crawl_id).max_pages
    candidates = [Candidate(r.fingerprint, new_task_id(), r.dont_filter) for r in requests]
    task_ids = rt.gate.admit(crawl_id, candidates, parent_id=parent_id, max_pages=max_pages)
    admitted = [(r, c, t) for r, c, t in zip(requests, candidates, task_ids) if t is not None]
    for i, (request, _, task_id) in enumerate(admitted):
        try:
            publish_fetch(rt, request, task_id)
        except Exception:
            # Nothing is half-written: what was not published is not marked seen.
            rest = admitted[i:]
            rt.gate.forget(crawl_id, [c.fingerprint for _, c, _ in rest if not c.dont_filter],
                           [t for _, _, t in rest])
            raise
    return len(admitted)


def publish_fetch(rt: Runtime, request: CrawlRequest, task_id: str, *, countdown: float = 0) -> None:
    """Send one fetch in the band of its priority (the caller has tracked ``task_id``)."""
    rt.app.send_task(
        routing.FETCH_TASK, args=[request.to_dict()], task_id=task_id,
        countdown=countdown or None, **routing.ROUTES[routing.FETCH_TASK],
        argsrepr=_shown(request), kwargsrepr="{}",
        priority=routing.broker_priority(request.priority, redis=rt.settings.broker_is_redis),
    )


def _shown(request: CrawlRequest, *before: str) -> str:
    """What Flower and the logs show as the task's arguments: the URL, not the whole request.

    Celery would otherwise put a repr of every argument into each message's headers.
    """
    return repr([*before, request.url])


def stage_id(claim_id: str, task_name: str) -> str:
    """Deterministic id of the parse/store task of one fetch, so a redelivery reuses it."""
    return f"{claim_id}.{task_name.rsplit('.', 1)[-1]}"


def publish_stage(rt: Runtime, task_name: str, claim_id: str, request: CrawlRequest) -> None:
    """Send the parse or store step of the page ``claim_id`` (tracked by the caller)."""
    rt.app.send_task(
        task_name, args=[claim_id, request.to_dict()], task_id=stage_id(claim_id, task_name),
        **routing.ROUTES[task_name], argsrepr=_shown(request, claim_id), kwargsrepr="{}",
        priority=routing.pipeline_priority(redis=rt.settings.broker_is_redis),
    )
