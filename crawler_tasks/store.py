"""Store stage: write page records to the crawl's store backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import enqueue
from .errors import StoreUnavailable
from .models import CrawlRequest, PageRecord

if TYPE_CHECKING:
    from .runtime import Runtime


def write(rt: Runtime, req: CrawlRequest, records: Sequence[PageRecord]) -> None:
    """Upsert ``records`` into ``req``'s crawl store; :class:`StoreUnavailable` propagates."""
    rt.store(rt.limits(req.crawl_id).store).upsert(records)


def previous(rt: Runtime, req: CrawlRequest) -> PageRecord | None:
    """The record an earlier fetch of ``req`` stored, when recrawls may revalidate it.

    Only with ``CRAWLER_RECRAWL_AFTER`` set (a URL can pass the gate twice) and
    for GET; a store that cannot answer now means a plain fetch.
    """
    if rt.settings.recrawl_after <= 0 or req.method != "GET":
        return None
    try:
        return rt.store(rt.limits(req.crawl_id).store).get(req.fingerprint)
    except StoreUnavailable:
        return None


def store_claim(rt: Runtime, claim_id: str, req: CrawlRequest, task_id: str) -> None:
    """The split pipeline's store step: upsert the record of ``claim_id``, drop the claim."""
    record, _ = rt.claims.load(req.crawl_id, claim_id, with_body=False)
    write(rt, req, [record])
    enqueue.complete(rt, req, task_id, [], {"stored": 1})
    rt.claims.delete(req.crawl_id, claim_id)
