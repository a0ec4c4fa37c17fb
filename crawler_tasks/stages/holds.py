"""What one fetch holds while it runs, and its one release.

A fetch may hold two things: a slot of its host in Redis (reserved for it by the
mover when it handed the fetch back to the broker, or taken by ``acquire`` before
its download) and this process's large-body permit (taken when its body grows
past :data:`~crawler_tasks.core.memory.LARGE_BODY`). :class:`FetchHolds` owns both
from the fetch's first step. Its release runs once, on every way out: in the
page's last round trip to Redis when the outcome ends the task there, or in
:meth:`FetchHolds.close` (the fetch's ``finally``) for everything else: a skip or
a pause before any download, a deferral, an exception, a Redis outage.

The permit is given back first (it is this process's, and giving it back cannot
fail). A release that Redis cannot take is owed
(:meth:`~crawler_tasks.state.hosts.HostLimiter.owe`) and settled by the mover once
Redis answers; the slot's lease is the backstop for a process that dies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis

from ..core.classify import host_feedback
from ..core.politeness import Feedback

if TYPE_CHECKING:
    from .deps import FetchDeps

log = logging.getLogger(__name__)


class FetchHolds:
    """The host slot and the large-body permit of one fetch (task ``task_id`` of ``host``)."""

    def __init__(self, rt: FetchDeps, host: str, task_id: str,
                 ack: Callable[[Any], None] | None = None, crawl_id: str = "") -> None:
        self.rt, self.host, self.task_id, self.crawl_id = rt, host, task_id, crawl_id
        self.permit = rt.large_bodies.permit()
        #: What the host is told on release; until a download says more, nothing (a slot
        #: given back unused changes none of the host's limits).
        self.feedback: Feedback = host_feedback(None)
        #: The host's robots.txt Crawl-delay and the crawl's own delay, for the release.
        self.crawl_delay: float | None = None
        self.delay: float | None = None
        #: Whether the crawl brings a delay or concurrency of its own (a fetch may wait anyway).
        self.paced = False
        #: Whether a request went out to the host (counted for the crawl on release).
        self.requested = False
        self.ack = ack
        self.done = False

    def acquired(self, crawl_delay: float | None, proxy: int | None, delay: float | None = None,
                 concurrency: int | None = None) -> None:
        """The fetch took its host's slot (through ``proxy``, None: direct), its crawl bringing
        its own ``delay`` and ``concurrency`` (None: the settings')."""
        self.crawl_delay, self.delay = crawl_delay, delay
        self.paced = delay is not None or concurrency is not None
        self.feedback = host_feedback(None, proxy=proxy)

    def given_back(self) -> None:
        """The slot went with another step (a park frees it in its own script)."""
        self.done = True

    def queue(self, pipe: Any) -> None:
        """Add the slot's release (and the message's ack, if given) to ``pipe``, the page's
        last round trip (the caller executes it)."""
        self.done = True
        self.rt.hosts.release(self.host, self.task_id, self.feedback, crawl_delay=self.crawl_delay,
                              delay=self.delay, pipe=pipe)
        if self.requested and self.crawl_id:
            self.rt.crawls.count_host(self.crawl_id, self.host, pipe)
        if self.ack is not None:
            self.ack(pipe)

    def now(self) -> bool:
        """Release the slot now unless done; True when the host now goes through the proxies."""
        if self.done:
            return False
        self.done = True
        if self.requested and self.crawl_id:
            self.rt.crawls.count_host(self.crawl_id, self.host)
        return self.rt.hosts.release(self.host, self.task_id, self.feedback, crawl_delay=self.crawl_delay,
                                     delay=self.delay)

    def close(self) -> None:
        """Give back whatever is still held: the permit, then the slot (owed to the mover
        when Redis does not answer). Never raises for Redis."""
        self.permit.release()
        try:
            if not self.done:
                self.now()
        except redis.RedisError as exc:
            log.warning("host slot of %s (%s) not released now (%s): released once Redis answers",
                        self.task_id, self.host, exc)
            self.rt.hosts.owe(self.host, self.task_id, self.feedback, self.crawl_delay, self.delay)
        finally:
            self.rt.hosts.wake_mover(self.host, self.paced)  # the host's next waiting fetch may go


def give_back_abandoned(rt: FetchDeps, host: str, task_id: str) -> None:
    """Free the slot an earlier delivery of task ``task_id`` may still hold, for a fetch given
    up before it runs (its workers died under it): the slot goes back as an unused one would,
    at once rather than when its lease ends."""
    FetchHolds(rt, host, task_id).close()
