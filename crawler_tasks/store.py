"""Store stage: write a page record to the crawl's store, then drop its claim check."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .models import CrawlRequest

if TYPE_CHECKING:
    from .runtime import Runtime


def run(rt: Runtime, claim_id: str, req: CrawlRequest, task_id: str) -> None:
    """Upsert the record of ``claim_id``; :class:`StoreUnavailable` propagates for a retry."""
    record, _ = rt.claims.load(claim_id, with_body=False)
    rt.store(rt.limits(req.crawl_id).store).upsert([record])
    with rt.pipeline() as pipe:
        rt.stats.incr(pipe, req.crawl_id, {"stored": 1})
        pipe.delete(rt.keys.page(claim_id))
        rt.crawls.finish(req.crawl_id, task_id, pipe)
        pipe.execute()
