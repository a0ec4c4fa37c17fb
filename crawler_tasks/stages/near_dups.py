"""Near-duplicates: a page whose text nearly repeats a stored page's, found as it ends.

With ``CRAWLER_NEAR_DUPLICATES`` set, :func:`checked` takes the simhash of a stored
page's text (:mod:`crawler_tasks.core.simhash`), looks for a page of the same crawl
within ``CRAWLER_NEAR_DUPLICATE_DISTANCE`` bits in the crawl's band index and adds this
one (:mod:`crawler_tasks.state.near_dups`), in one round trip. A near-duplicate's record
names the page (``near_duplicate_of``) and is counted (``pages/near_duplicate``);
``nofollow`` follows none of its links, ``nobody`` stores no body for it. A body that
repeats a stored page's byte for byte (the same ``payload_digest``) is caught by the same
look: its record names that page (``duplicate_of``), counted ``pages/duplicate_body``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..core import counters
from ..core.simhash import simhash

if TYPE_CHECKING:
    from .deps import FetchDeps
    from .enqueue import TaskEnd


def checked(rt: FetchDeps, end: TaskEnd) -> TaskEnd:
    """``end`` with its record marked, and its links or body left out as the setting says,
    when the page nearly or exactly duplicates a stored one; unchanged otherwise."""
    mode, record = rt.settings.near_duplicates, end.record
    if not mode or record is None or record.status != 200:
        return end
    value = simhash(record.text)
    if value is None and not record.payload_digest:
        return end
    page = {"fingerprint": record.fingerprint, "url": record.url, "fetched_at": record.fetched_at}
    found = rt.near_dups.look_and_add(record.crawl_id, page, value, rt.settings.near_duplicate_distance,
                                      digest=record.payload_digest)
    counts = dict(end.counts)
    if found.same_body is not None:
        record.duplicate_of = found.same_body
        counts[counters.DUPLICATE_BODY] = counts.get(counters.DUPLICATE_BODY, 0) + 1
    near = found.near.fingerprint if found.near else (found.same_body or {}).get("fingerprint")
    if near is None:
        return end
    record.near_duplicate_of = near
    counts[counters.NEAR_DUPLICATE] = counts.get(counters.NEAR_DUPLICATE, 0) + 1
    if mode == "nobody":
        record.body = record.dom = None
    if mode == "nofollow":
        return replace(end, counts=counts, children=[], kept_back=None)
    return replace(end, counts=counts)
