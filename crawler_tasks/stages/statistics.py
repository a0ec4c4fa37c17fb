"""Crawl statistics into the stores that keep them: each crawl's counters, written when they
changed (``crawl.flush_stats``, Beat's tick, and ``crawler-tasks crawl`` at its end)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..core.errors import BadInput, StoreUnavailable

if TYPE_CHECKING:
    from .deps import StoreDeps

log = logging.getLogger(__name__)


def flush_stats(rt: StoreDeps, crawl_ids: Sequence[str] | None = None) -> int:
    """Write the counters of each crawl that changed since its last flush to the crawl's
    store, when that store keeps statistics (Elasticsearch: ``<index>-stats``, one
    document per crawl updated in place). Returns how many crawls were written."""
    ids = list(crawl_ids) if crawl_ids is not None else rt.crawls.all_ids()
    last = rt.stats.flushed(ids)
    written = 0
    for crawl_id in ids:
        try:
            written += _flush_crawl_stats(rt, crawl_id, last.get(crawl_id))
        except (StoreUnavailable, BadInput) as exc:  # the next flush tries again; the others go on
            log.warning("statistics of crawl %s not written: %s", crawl_id, exc)
    return written


def _flush_crawl_stats(rt: StoreDeps, crawl_id: str, last: bytes | None) -> int:
    """Write one crawl's counters to its store when they changed since ``last`` (the digest
    of the counters it last wrote, None: never); 1 if written."""
    target = rt.store(rt.limits(crawl_id).store)
    if not hasattr(target, "write_stats"):
        return 0
    figures = rt.stats.read(crawl_id)
    digest = json.dumps(figures, sort_keys=True).encode()
    if last == digest:
        return 0
    target.write_stats(crawl_id, figures)
    rt.stats.mark_flushed(crawl_id, digest)
    return 1
