"""Per-host politeness shared by every worker through Redis: the limiter and the waiting room.

A host is ``host:port`` (``example.com:443``): ``a.example.com`` and
``b.example.com`` have budgets of their own, as in Scrapy's downloader slots.

``acquire``  before a download: the fetch may go when fewer than
             ``CRAWLER_HOST_CONCURRENCY`` requests to its host are in flight
             cluster-wide, ``CRAWLER_DOWNLOAD_DELAY`` (or a larger delay:
             robots.txt ``Crawl-delay``, back-off, AutoThrottle) has passed since
             the host's last request started, and no earlier fetch of the host
             waits (the host's ``waiting`` field, set with its first waiting fetch
             and cleared when the mover empties the room, saves looking at the room).
             It then holds a slot (a lease, so a SIGKILLed worker's slot
             frees itself) until ``release``.
``park``     a fetch that may not go yet leaves the broker: its request joins the
             host's ``wait`` ZSET (ordered by band, then arrival) and the host is
             scheduled in ``due``. Its message is acknowledged, so no worker holds
             it, it is not an ETA message, and no retry is used.
``release``  after the download: frees the slot and feeds the response back
             (429/503 and ``Retry-After`` raise the host's delay, successes relax
             it, timeouts cut its concurrency, AutoThrottle follows the latency).
``take_due`` (the mover, :mod:`crawler_tasks.stages.mover`) hands the waiting fetches of
             hosts that may go now back to the broker, in their own band, one per
             delay (or as many as free slots when the delay is 0), each with a
             slot reserved for it; handed-over entries sit in ``moving`` until
             published, so a mover killed half-way loses nothing.

When the broker is this Redis (one URL for both, as the quick start runs it), a
waiting fetch carries its message (:class:`Handover`): ``release`` hands the
host's next waiting fetch straight onto its band, in the same script that frees
the slot, and ``take_due`` does the same for the hosts it finds due, so a fetch
over its host's cap costs no round trip of its own. Redis then keeps about 580
bytes per waiting fetch, against 230 for the request alone (``bench/defer``).

The hosts are split over ``CRAWLER_HOST_SHARDS`` shards by a hash of ``host:port``
(:mod:`~crawler_tasks.core.shards`). A shard's keys share one hash tag (``{hosts}``
with one shard): one slot of a Redis Cluster, so each script runs atomically there
(the mover's script names the host keys it visits itself, from their templates in
:mod:`~crawler_tasks.state.keys`, which Redis Cluster allows within the slot). Each
shard has its own due hosts, moving fetches, arrivals, recent hosts and benched
proxies; the movers visit every shard (:mod:`crawler_tasks.stages.mover`), and the
read side sums over them (:mod:`~crawler_tasks.state.host_views`). The scripts are
``lua/hosts_*.lua``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

import redis

from ..core import routing
from ..core.models import CrawlRequest
from ..core.politeness import LEAD_S, MARGIN_S, Feedback, Slot, delay_floor, host_key
from ..core.settings import Settings
from . import scripts
from .host_views import HostViews
from .keys import Keys, template
from .round_trip import queue_script
from .waiting_room import Handover, Moved, carried, member, read_entry

#: Seconds a host's state outlives its last request.
HOST_TTL = 86400
#: Seconds a slot stays reserved for a fetch the mover handed to the broker.
RESERVE_S = 60.0
#: Seconds a mover has to publish what it took before another mover takes it back.
MOVE_LEASE_S = 30.0
#: Hosts the mover looks at per call, at most.
DUE_BATCH = 100
#: Fetches released at once to a host with no delay and no concurrency cap.
UNCAPPED_BATCH = 64
#: Hosts the ``recent`` list keeps (``stats`` shows the busiest of its newest 200). It is
#: trimmed to this many once it is a tenth over: at most 11,000 entries, about 1 MB.
RECENT_HOSTS = 10_000


class HostLimiter(HostViews):
    """Per-host delay, concurrency and waiting fetches, kept in Redis (see the module doc);
    with a ``handover``, waiting fetches go onto the broker from inside the scripts."""

    def __init__(self, client: redis.Redis, keys: Keys, settings: Settings,
                 handover: Handover | None = None) -> None:
        super().__init__(client, keys, settings)
        self.handover = handover
        self._tail = b"" if handover is None else handover.tail
        #: Hosts the ``recent`` list keeps (:data:`RECENT_HOSTS`).
        self.recent_hosts = RECENT_HOSTS
        self._acquire = scripts.register(client, "hosts_acquire.lua")
        self._park = scripts.register(client, "hosts_park.lua")
        self._release = scripts.register(client, "hosts_release.lua")
        self._take_due = scripts.register(client, "hosts_take_due.lua")
        self._route = scripts.register(client, "hosts_route.lua")
        #: Set when a slot of this process was freed: the host's next waiting fetch may go,
        #: and the mover (:mod:`crawler_tasks.stages.mover`) looks without waiting out its sleep.
        self.freed = threading.Event()
        #: Shard -> monotonic time by which this process's mover should look at it: hints left
        #: by this process's parks, routes and freed slots (:meth:`take_hints`).
        self._hints: dict[int, float] = {}
        #: Releases Redis did not take (an outage), by task id: settled by :meth:`settle_owed`.
        self._owed: dict[str, tuple[str, Feedback, float | None, float | None]] = {}
        self._owed_lock = threading.Lock()
        #: Where the scripts of each shard find the keys of the hosts they visit.
        self._host_keys = [json.dumps({"host": template(partial(keys.host, shard=k)),
                                       "slots": template(partial(keys.host_slots, shard=k)),
                                       "wait": template(partial(keys.host_wait, shard=k))})
                           for k in range(self.shards)]

    def _floor(self, crawl_delay: float | None, delay: float | None) -> float:
        return delay_floor(self.settings.download_delay, crawl_delay, delay)

    @property
    def _auto(self) -> int:
        return 1 if self.settings.autothrottle else 0

    def acquire(self, host: str, task_id: str, *, crawl_delay: float | None = None,
                delay: float | None = None, concurrency: int | None = None) -> Slot:
        """Take a slot of ``host`` for task ``task_id`` now, or say until when it must wait.

        ``crawl_delay``: the host's robots.txt Crawl-delay; ``delay`` and ``concurrency``: the
        fetch's crawl's own (None: the settings'). The host keeps that concurrency for the
        fetches waiting in its room, until a fetch of another crawl says otherwise."""
        if self._owed:  # a new attempt of the task owns its slot again
            with self._owed_lock:
                self._owed.pop(task_id, None)
        k, s, shard = self.keys, self.settings, self.keys.host_shard(host)
        answer = self._acquire(
            keys=[k.host(host, shard), k.host_slots(host, shard), k.hosts_recent(shard), k.proxies_benched(shard)],
            args=[task_id, self._floor(crawl_delay, delay),
                  s.host_concurrency if concurrency is None else concurrency, self._auto,
                  self.slot_lease, host, HOST_TTL, len(s.proxies), s.autothrottle_start_delay,
                  self.recent_hosts, LEAD_S, MARGIN_S])
        if not int(answer[0]):
            return Slot(False, float(answer[1]))
        proxy = int(answer[2])
        return Slot(True, proxy=None if proxy < 0 else proxy, wait=max(0.0, float(answer[3])))

    @property
    def slot_lease(self) -> float:
        """Seconds a slot outlives its holder's last sign: one download, with room to spare."""
        return self.settings.download_timeout * 2 + 30

    def park(self, host: str, task_id: str, request: CrawlRequest, until: float) -> None:
        """Keep ``request`` (task ``task_id``) waiting for ``host`` in Redis, in its band."""
        k, shard = self.keys, self.keys.host_shard(host)
        rank = routing.MAX_BAND - routing.band(request.priority)
        self._park(keys=[k.host(host, shard), k.host_wait(host, shard), k.hosts_due(shard), k.hosts_recent(shard),
                         k.host_slots(host, shard), k.hosts_arrivals(shard), k.hosts_waiting_crawls(shard)],
                   args=[self._entries([(request, task_id)])[0], rank, until, host, HOST_TTL, task_id,
                         self.recent_hosts, request.crawl_id])
        self.hint(shard, max(0.0, until - time.time()))

    def _entries(self, fetches: Sequence[tuple[CrawlRequest, str]]) -> list[bytes | str]:
        """The waiting-room entries of ``fetches``: carrying their messages with a handover."""
        if self.handover is None:
            return [member(task_id, request) for request, task_id in fetches]
        return [carried(task_id, request.crawl_id, h)
                for (request, task_id), h in zip(fetches, self.handover.handoffs(fetches))]

    @property
    def holds(self) -> bool:
        """Whether politeness may hold a fetch back now and then (a delay, a cap per host or
        AutoThrottle): then new fetches are routed (:meth:`route`)."""
        s = self.settings
        return s.download_delay > 0 or s.host_concurrency > 0 or s.autothrottle

    def route(self, pipe: Any, fetches: Sequence[tuple[CrawlRequest, str]]) -> None:
        """Queue on ``pipe`` (a round trip on the Redis that is also the broker: there is a
        handover) the new ``fetches`` (request, task id): to the broker, or, when its host
        may not take it now, straight into the host's waiting room (it would only be parked
        there after a delivery)."""
        assert self.handover is not None, "routing needs the broker to be this Redis"
        k, s = self.keys, self.settings
        by_shard: dict[int, list[Any]] = {}
        for (request, _), entry in zip(fetches, self._entries(fetches)):
            host = host_key(request.url)
            by_shard.setdefault(k.host_shard(host), []).extend(
                [host, entry, routing.MAX_BAND - routing.band(request.priority), request.crawl_id])
        for shard, fetch_args in by_shard.items():
            args: list[Any] = [self._host_keys[shard], s.download_delay, s.host_concurrency, self._auto,
                               s.autothrottle_start_delay, HOST_TTL, self.recent_hosts, self._tail, *fetch_args]
            queue_script(pipe, self._route, [k.hosts_due(shard), k.hosts_recent(shard),
                                             k.hosts_arrivals(shard), k.hosts_waiting_crawls(shard)], args)
            self.hint(shard, s.download_delay)  # a fetch it sent to a room may go then

    def release(self, host: str, task_id: str, feedback: Feedback, *,
                crawl_delay: float | None = None, delay: float | None = None, pipe: Any = None) -> bool:
        """Free the slot of task ``task_id`` and adapt ``host``'s limits to ``feedback``;
        True when the host now goes through the proxies (``pipe``: queued there, False)."""
        k, s, shard = self.keys, self.settings, self.keys.host_shard(host)
        keys = [k.host(host, shard), k.host_slots(host, shard), k.hosts_due(shard), k.proxies_benched(shard), k.host_wait(host, shard),
                k.hosts_waiting_crawls(shard)]
        args = [task_id, feedback.kind, feedback.status,
                -1 if feedback.retry_after is None else feedback.retry_after,
                feedback.latency, self._floor(crawl_delay, delay), s.retry_backoff_max, self._auto,
                s.autothrottle_target_concurrency, s.autothrottle_max_delay,
                s.autothrottle_start_delay, host, s.ban_threshold, len(s.proxies),
                -1 if feedback.proxy is None else feedback.proxy, s.proxy_bench_s,
                max(0.0, time.monotonic() - feedback.sent_at) if feedback.sent_at else -1,
                self._tail, s.host_concurrency, RESERVE_S, LEAD_S]
        if pipe is not None:
            queue_script(pipe, self._release, keys, args)
            return False
        return bool(self._release(keys=keys, args=args))

    def wake_mover(self, host: str, paced: bool) -> None:
        """A slot of ``host`` in this process was freed (``paced``: by a fetch whose crawl
        brings its own delay or cap): wake the mover, to look at the host's shard, when the
        host's next waiting fetch may be its to send. With a handover the release sent it
        already, unless a delay holds it back."""
        s = self.settings
        if not (self.holds or paced):
            return
        if self.handover is None or paced or s.download_delay > 0 or s.autothrottle:
            self.hint(self.keys.host_shard(host), 0.0)
            self.freed.set()

    def hint(self, shard: int, after: float) -> None:
        """Ask this process's mover to look at ``shard`` within ``after`` seconds."""
        at = time.monotonic() + after
        if at < self._hints.get(shard, float("inf")):
            self._hints[shard] = at

    def take_hints(self) -> dict[int, float]:
        """The shards this process asked its mover to look at (shard -> monotonic time), and
        forget them."""
        hints, self._hints = self._hints, {}
        return hints

    def owe(self, host: str, task_id: str, feedback: Feedback, crawl_delay: float | None,
            delay: float | None = None) -> None:
        """Remember a release Redis could not take, for :meth:`settle_owed`."""
        with self._owed_lock:
            self._owed[task_id] = (host, feedback, crawl_delay, delay)

    @property
    def owed(self) -> int:
        """Releases of this process not yet taken by Redis."""
        return len(self._owed)

    def settle_owed(self) -> int:
        """Carry out the owed releases (raises :class:`redis.RedisError` while Redis is away:
        what is left stays owed); returns how many were settled."""
        settled = 0
        while self._owed:
            with self._owed_lock:
                if not self._owed:
                    break
                task_id, owed = next(iter(self._owed.items()))
            host, feedback, crawl_delay, delay = owed
            self.release(host, task_id, feedback, crawl_delay=crawl_delay, delay=delay)
            with self._owed_lock:
                if self._owed.get(task_id) == owed:
                    del self._owed[task_id]
            settled += 1
        return settled

    def take_due(self, shard: int = 0, limit: int = DUE_BATCH) -> tuple[list[Moved], float | None]:
        """Waiting fetches of ``shard`` whose host may go now (each with a slot reserved), and
        seconds until the shard's next host is due (None: nothing waits there)."""
        k, s = self.keys, self.settings
        raw = self._take_due(keys=[k.hosts_due(shard), k.hosts_moving(shard), k.hosts_waiting_crawls(shard)],
                             args=[self._host_keys[shard], limit, s.download_delay, s.host_concurrency,
                                   self._auto, RESERVE_S, MOVE_LEASE_S, UNCAPPED_BATCH,
                                   s.autothrottle_start_delay, LEAD_S, self._tail])
        wait = float(raw[0])
        out = []
        for m in raw[1:]:
            text = m.decode() if isinstance(m, bytes) else m
            _, _, entry = text.split("\t", 2)
            task_id, _, request = read_entry(entry)
            out.append(Moved(text, task_id, CrawlRequest.from_dict(request)))
        return out, (None if wait < 0 else wait)

    def moved(self, members: Sequence[tuple[str, str]], pipe: Any = None) -> None:
        """Forget fetches the mover published, each a (moving entry, crawl id) (``pipe``:
        queued there)."""
        by_shard: dict[int, list[str]] = {}
        for entry, crawl_id in members:
            by_shard.setdefault(self.keys.host_shard(entry.partition("\t")[0]), []).extend((entry, crawl_id))
        for shard, args in by_shard.items():
            keys = [self.keys.hosts_moving(shard), self.keys.hosts_waiting_crawls(shard)]
            if pipe is not None:
                queue_script(pipe, self._leave, keys, args)
            else:
                self._leave(keys=keys, args=args)

