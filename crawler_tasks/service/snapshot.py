"""What ``crawler-tasks top`` shows, read from Redis at once: one crawl (or every running
crawl) with its counters and page budget, and the cluster's queues, hosts, store queue
and dead letters.

A read costs a bounded number of round trips, as a scrape of the exporter
(:mod:`crawler_tasks.service.metrics`) does: one pipeline each for the crawls' counters,
outstanding sets, times and budgets, and held fetches, one for the queue depths, two for
the store queue, two for the 200 hosts last active (and one ``HMGET`` of one crawl's
requests to them), one ``HGETALL`` for the fetches waiting per crawl, one ``LLEN`` for
the dead letters; never a scan of a large key.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..broker.queues import queue_depths
from ..core import counters
from ..core.errors import BadInput
from ..state.host_views import HostState
from ..state.store_queue import QueueDepth
from .control import list_crawls

if TYPE_CHECKING:
    from ..stages.runtime import Runtime

#: Hosts read per snapshot: the ones last active (the busiest and waiting are picked from them).
RECENT_HOSTS = 200


@dataclass(frozen=True)
class CrawlFigures:
    """One crawl as the view shows it (what :func:`~crawler_tasks.service.control.list_crawls`
    gives, with its page budget)."""

    crawl_id: str
    state: str
    outstanding: int
    counters: dict[str, int]
    #: The crawl's ``max_pages``; 0 = no budget.
    max_pages: int = 0
    started: str | None = None
    finished: str | None = None
    #: The latest unexpected task error (read for a single crawl only).
    last_error: str | None = None

    @property
    def stored(self) -> int:
        """Records written: the crawl's pages so far (failure records included)."""
        return self.counters.get(counters.STORED, 0)


@dataclass(frozen=True)
class Snapshot:
    """The figures of one read, at monotonic time ``at``."""

    at: float
    #: The crawl asked for; None: every running crawl.
    crawl_id: str | None
    crawls: tuple[CrawlFigures, ...]
    #: ``{queue: {"band N": waiting, ..., "total": waiting}}`` (the whole cluster's broker).
    queues: dict[str, dict[str, int]] = field(default_factory=dict)
    store_queue: QueueDepth = QueueDepth(0, 0, 0, 0)
    #: The hosts last active, busiest first (most waiting, then in flight).
    hosts: tuple[HostState, ...] = ()
    #: Records waiting in the dead letters (every crawl's).
    dead_letters: int = 0
    #: Wall-clock time of the read (``time.time()``).
    wall: float = 0.0
    #: Fetches waiting for their hosts, and held while paused, per crawl of the snapshot.
    waiting: dict[str, int] = field(default_factory=dict)
    held: dict[str, int] = field(default_factory=dict)
    #: For one crawl: the requests it sent to each of :attr:`hosts` (its own, not every crawl's).
    crawl_requests: dict[str, int] | None = None


def read_snapshot(rt: Runtime, crawl_id: str | None = None) -> Snapshot:
    """The figures of ``crawl_id`` (:class:`BadInput` when Redis knows no such crawl), or of
    every running crawl when None, with the cluster's queues, hosts and stores."""
    if crawl_id is not None and not rt.crawls.registered(crawl_id):
        raise BadInput(f"no crawl {crawl_id} in Redis")
    ids = [crawl_id] if crawl_id is not None else rt.crawls.running_ids()
    last = next(iter(rt.crawls.errors(crawl_id, 1)), None) if crawl_id is not None else None
    crawls = tuple(CrawlFigures(crawl_id=c["crawl_id"], state=c["state"], outstanding=c["outstanding"],
                                counters=c["counters"], max_pages=c["max_pages"],
                                started=c["started"], finished=c["finished"], last_error=last)
                   for c in list_crawls(rt, ids))
    hosts = tuple(rt.hosts.busiest(RECENT_HOSTS, RECENT_HOSTS))
    waiting = rt.hosts.waiting_by_crawl()
    return Snapshot(at=time.monotonic(), crawl_id=crawl_id, crawls=crawls,
                    queues=queue_depths(rt.app, rt.settings), store_queue=rt.store_queue.depth(),
                    hosts=hosts, dead_letters=rt.dead_letters.count(), wall=time.time(),
                    waiting={cid: waiting.get(cid, 0) for cid in ids}, held=rt.crawls.held_many(ids),
                    crawl_requests=None if crawl_id is None else
                    rt.crawls.host_requests(crawl_id, [h.host for h in hosts]))
