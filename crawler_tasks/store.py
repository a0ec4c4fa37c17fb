"""Store stage: write page records to the crawl's store backend."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import enqueue
from .errors import StoreUnavailable
from .models import CrawlRequest, PageRecord
from .policy import now_iso

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
        try:
            target.write_stats(crawl_id, counters)
        except StoreUnavailable as exc:  # the next flush tries again; the other crawls go on
            log.warning("statistics of crawl %s not written: %s", crawl_id, exc)
            continue
        rt.redis.hset(flushed, crawl_id, digest)
        written += 1
    return written


def give_up(rt: Runtime, req: CrawlRequest, claim_id: str, task_id: str, error: str) -> None:
    """The store stayed down past its retries: keep the record of ``claim_id`` (body
    included) in the dead-letter list, never dropped, and end task ``task_id`` (counted once).

    The letter goes in before the task ends, so a crash between the two can only
    repeat it (replaying is idempotent); a late duplicate delivery takes its copy back.
    """
    record, _ = rt.claims.load(req.crawl_id, claim_id, with_body=False)
    letter = json.dumps({"record": record.to_dict(), "store": rt.limits(req.crawl_id).store,
                         "error": error, "at": now_iso()}, ensure_ascii=False)
    rt.redis.lpush(rt.keys.dead_letters(), letter)
    if not rt.gate.abandon(req.crawl_id, task_id, f"store failed: {error} ({req.url})",
                           {"store/failed": 1, "store/dead_letters": 1}):
        rt.redis.lrem(rt.keys.dead_letters(), 1, letter)
    rt.claims.delete(req.crawl_id, claim_id)


def dead_letters(rt: Runtime, crawl_id: str | None = None) -> list[dict]:
    """The dead letters (newest first), of one crawl or all."""
    entries = [json.loads(raw) for raw in rt.redis.lrange(rt.keys.dead_letters(), 0, -1)]
    return [e for e in entries if crawl_id is None or e["record"]["crawl_id"] == crawl_id]


def replay_dead(rt: Runtime, crawl_id: str | None = None) -> tuple[int, int]:
    """Write the dead letters (of one crawl) to their stores again; (written, still failing).

    A written one leaves the list and counts ``store/replayed`` (and ``stored``) in its
    crawl; one whose store is still down stays, with the new error.
    """
    written = failing = 0
    for raw in rt.redis.lrange(rt.keys.dead_letters(), 0, -1):
        entry = json.loads(raw)
        record = PageRecord.from_dict(entry["record"])
        if crawl_id is not None and record.crawl_id != crawl_id:
            continue
        try:
            refused = rt.store(entry["store"]).upsert([record]) or []
        except StoreUnavailable as exc:
            log.warning("dead letter %s still not stored: %s", record.url, exc)
            failing += 1
            continue
        rt.redis.lrem(rt.keys.dead_letters(), 1, raw)
        rt.gate.add_counts(record.crawl_id, {"store/replayed": 1, "stored": 1 - len(refused),
                                             "store/refused": len(refused)})
        written += 1
    return written, failing
