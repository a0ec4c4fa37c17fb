"""Store stage: write page records to the crawl's store backend."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import enqueue
from .errors import StoreUnavailable
from .models import CrawlRequest, PageRecord

if TYPE_CHECKING:
    from .runtime import Runtime

log = logging.getLogger(__name__)


def write(rt: Runtime, req: CrawlRequest, records: Sequence[PageRecord]) -> dict[str, int]:
    """Upsert ``records`` into ``req``'s crawl store; :class:`StoreUnavailable` propagates.

    Returns the counters of the write: ``stored``, and ``store/refused`` for
    records a backend refused for good (logged with the reason, e.g. an
    Elasticsearch mapping error): retrying cannot help them.
    """
    failures = rt.store(rt.limits(req.crawl_id).store).upsert(records) or []
    for failure in failures:
        log.error("store refused %s (%s): %s", req.url, failure.fingerprint, failure.reason)
    return {"stored": len(records) - len(failures), "store/refused": len(failures)}


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
    counts = write(rt, req, [record])
    enqueue.complete(rt, req, task_id, [], counts)
    rt.claims.delete(req.crawl_id, claim_id)


def flush_stats(rt: Runtime, crawl_ids: Sequence[str] | None = None) -> int:
    """Write the counters of each crawl that changed since its last flush to the crawl's
    store, when that store keeps statistics (Elasticsearch: ``<index>-stats``, one
    document per crawl updated in place). Returns how many crawls were written."""
    ids = list(crawl_ids) if crawl_ids is not None else rt.crawls.all_ids()
    flushed = rt.keys.stats_flushed()
    last = dict(zip(ids, rt.redis.hmget(flushed, ids))) if ids else {}
    written = 0
    for crawl_id in ids:
        target = rt.store(rt.limits(crawl_id).store)
        if not hasattr(target, "write_stats"):
            continue
        counters = rt.stats.read(crawl_id)
        digest = json.dumps(counters, sort_keys=True).encode()
        if last.get(crawl_id) == digest:
            continue
        target.write_stats(crawl_id, counters)
        rt.redis.hset(flushed, crawl_id, digest)
        written += 1
    return written
