"""Seeds into crawls as every feed submits them: each judged on its own, gated a chunk at a time.

Seeds join the crawl ``CRAWLER_SEED_CRAWL_ID`` unless a JSON seed names its own
``crawl_id``. Each seed is judged on its own: a malformed one, or one whose host
is an address the private-network guard refuses
(:mod:`crawler_tasks.core.addresses`; a host name is judged when a worker
connects), is logged (with its line number, key or sitemap), counted
(``seeds/invalid`` in that crawl's counters, ``refused`` in the feed's status)
and never enqueued; it never stops the feed. The file and sitemap feeds submit
:data:`CHUNK` seeds per gate call. Before each chunk the tick renews its lock,
and a full queue stops it there (``stopped_early``): the broker holds at most
the cap plus one chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any

from ...core.errors import BadInput, QueueFull
from ...core.models import CrawlRequest
from ..seed import build_requests, parse_seed_line, refuse_blocked, submit_requests
from .lock import FeedLock
from .outcomes import Fed

if TYPE_CHECKING:
    from ...core.addresses import AddressPolicy
    from ..deps import FeedDeps

#: Seeds per gate call (and per backpressure check) of the file and sitemap feeds.
CHUNK = 500


def judge(text: str, crawl_id: str, policy: AddressPolicy | None = None,
          max_url_length: int = 0) -> CrawlRequest:
    """The request for one seed line or entry (a URL or a JSON seed object); :class:`BadInput` if
    none, if it is over ``max_url_length`` bytes (0 = no limit), or if ``policy`` refuses the
    address it names."""
    try:
        [request] = build_requests([parse_seed_line(text)], crawl_id=crawl_id,
                                   max_url_length=max_url_length)
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. JSON nested too deep
        raise BadInput(f"not a usable seed ({type(exc).__name__})") from None
    if policy is not None:
        refuse_blocked([request], policy)
    return request


def submit_chunk(rt: FeedDeps, lock: FeedLock, fed: Fed, requests: list[CrawlRequest]) -> bool:
    """Gate and publish one chunk; False (``fed.stopped`` says why) when the tick must stop here."""
    if not lock.renew():
        fed.stopped = "stopped: the feed lock expired"
        return False
    try:
        admitted = submit_requests(rt, requests)
    except QueueFull:
        fed.stopped = "stopped early: queue full"
        return False
    fed.admitted += admitted
    fed.duplicates += len(requests) - admitted
    return True


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """``items`` in lists of ``size`` (the last one shorter)."""
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk
