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

Every key has the hash tag ``{hosts}``: one slot of a Redis Cluster, so each
script runs atomically there (the mover's script names the host keys it
visits itself, from their templates in :mod:`~crawler_tasks.state.keys`, which
Redis Cluster allows within the slot). The scripts are ``lua/hosts_*.lua``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from ..core import counters, routing
from ..core.models import CrawlRequest
from ..core.politeness import LEAD_S, MARGIN_S, Feedback, Slot, delay_floor, host_key
from ..core.settings import Settings
from . import scripts
from .keys import Keys, template
from .round_trip import queue_script
from .waiting_room import Handover, Moved, Waiting, carried, member, read_entry

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


@dataclass(frozen=True)
class HostState:
    """One host as ``crawler-tasks stats`` shows it."""

    host: str
    delay: float
    in_flight: int
    waiting: int
    requests: int
    deferred: int
    throttled: int
    blocked: int
    proxied: bool
    backoff: float
    concurrency_cut: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class HostLimiter:
    """Per-host delay, concurrency and waiting fetches, kept in Redis (see the module doc);
    with a ``handover``, waiting fetches go onto the broker from inside the scripts."""

    def __init__(self, client: redis.Redis, keys: Keys, settings: Settings,
                 handover: Handover | None = None) -> None:
        self.redis = client
        self.keys = keys
        self.settings = settings
        self.handover = handover
        self._tail = b"" if handover is None else handover.tail
        #: Hosts the ``recent`` list keeps (:data:`RECENT_HOSTS`).
        self.recent_hosts = RECENT_HOSTS
        self._acquire = scripts.register(client, "hosts_acquire.lua")
        self._park = scripts.register(client, "hosts_park.lua")
        self._release = scripts.register(client, "hosts_release.lua")
        self._take_due = scripts.register(client, "hosts_take_due.lua")
        self._route = scripts.register(client, "hosts_route.lua")
        self._leave = scripts.register(client, "hosts_leave.lua")
        #: Set when a slot of this process was freed: the host's next waiting fetch may go,
        #: and the mover (:mod:`crawler_tasks.stages.mover`) looks without waiting out its sleep.
        self.freed = threading.Event()
        #: Releases Redis did not take (an outage), by task id: settled by :meth:`settle_owed`.
        self._owed: dict[str, tuple[str, Feedback, float | None, float | None]] = {}
        self._owed_lock = threading.Lock()
        #: Where the mover's script finds the keys of the hosts it visits.
        self._host_keys = json.dumps({"host": template(keys.host), "slots": template(keys.host_slots),
                                      "wait": template(keys.host_wait)})

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
        k, s = self.keys, self.settings
        answer = self._acquire(
            keys=[k.host(host), k.host_slots(host), k.hosts_recent(), k.proxies_benched()],
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
        k = self.keys
        rank = routing.MAX_BAND - routing.band(request.priority)
        self._park(keys=[k.host(host), k.host_wait(host), k.hosts_due(), k.hosts_recent(),
                         k.host_slots(host), k.hosts_arrivals(), k.hosts_waiting_crawls()],
                   args=[self._entries([(request, task_id)])[0], rank, until, host, HOST_TTL, task_id,
                         self.recent_hosts, request.crawl_id])

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
        args: list[Any] = [self._host_keys, s.download_delay, s.host_concurrency, self._auto,
                           s.autothrottle_start_delay, HOST_TTL, self.recent_hosts, self._tail]
        for (request, _), entry in zip(fetches, self._entries(fetches)):
            args += [host_key(request.url), entry, routing.MAX_BAND - routing.band(request.priority),
                     request.crawl_id]
        queue_script(pipe, self._route, [k.hosts_due(), k.hosts_recent(), k.hosts_arrivals(),
                                         k.hosts_waiting_crawls()], args)

    def release(self, host: str, task_id: str, feedback: Feedback, *,
                crawl_delay: float | None = None, delay: float | None = None, pipe: Any = None) -> bool:
        """Free the slot of task ``task_id`` and adapt ``host``'s limits to ``feedback``;
        True when the host now goes through the proxies (``pipe``: queued there, False)."""
        k, s = self.keys, self.settings
        keys = [k.host(host), k.host_slots(host), k.hosts_due(), k.proxies_benched(), k.host_wait(host),
                k.hosts_waiting_crawls()]
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

    def wake_mover(self, paced: bool) -> None:
        """A slot of this process was freed (``paced``: by a fetch whose crawl brings its own
        delay or cap): wake the mover when the host's next waiting fetch may be its to send.
        With a handover the release sent it already, unless a delay holds it back."""
        s = self.settings
        if not (self.holds or paced):
            return
        if self.handover is None or paced or s.download_delay > 0 or s.autothrottle:
            self.freed.set()

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

    def take_due(self, limit: int = DUE_BATCH) -> tuple[list[Moved], float | None]:
        """Waiting fetches whose host may go now (each with a slot reserved), and seconds
        until the next host is due (None: nothing waits)."""
        k, s = self.keys, self.settings
        raw = self._take_due(keys=[k.hosts_due(), k.hosts_moving(), k.hosts_waiting_crawls()],
                             args=[self._host_keys, limit, s.download_delay, s.host_concurrency,
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
        if members:
            keys = [self.keys.hosts_moving(), self.keys.hosts_waiting_crawls()]
            args = [value for pair in members for value in pair]
            if pipe is not None:
                queue_script(pipe, self._leave, keys, args)
            else:
                self._leave(keys=keys, args=args)

    def waiting_by_crawl(self) -> dict[str, int]:
        """Fetches waiting for their hosts, per crawl (kept as they come and go: no walk)."""
        raw = self.redis.hgetall(self.keys.hosts_waiting_crawls())
        return {k.decode(): n for k, v in raw.items() if (n := int(v)) > 0}

    def forget_crawl(self, crawl_id: str) -> None:
        """Drop the waiting count of a purged crawl."""
        self.redis.hdel(self.keys.hosts_waiting_crawls(), crawl_id)

    def waiting(self) -> int:
        """Fetches waiting for their host, over every host (walks the due hosts)."""
        hosts = self.redis.zrange(self.keys.hosts_due(), 0, -1)
        with self.redis.pipeline(transaction=False) as pipe:
            for h in hosts:
                pipe.zcard(self.keys.host_wait(h.decode()))
            counts = pipe.execute()
        return sum(counts) + self.redis.zcard(self.keys.hosts_moving())

    def waiting_of(self, crawl_id: str, batch: int = 200) -> list[Waiting]:
        """The fetches of crawl ``crawl_id`` waiting in the hosts' rooms (walks the due hosts,
        ``batch`` rooms per round trip)."""
        needles = (json.dumps({"crawl_id": crawl_id}, separators=(",", ":"))[1:-1].encode(),
                   f"\t{crawl_id}\t".encode())
        hosts = [h.decode() for h in self.redis.zrange(self.keys.hosts_due(), 0, -1)]
        found: list[Waiting] = []
        for i in range(0, len(hosts), batch):
            chunk = hosts[i:i + batch]
            with self.redis.pipeline(transaction=False) as pipe:
                for h in chunk:
                    pipe.zrange(self.keys.host_wait(h), 0, -1)
                rooms = pipe.execute()
            for host, room in zip(chunk, rooms):
                for raw in room:
                    if needles[0] not in raw and needles[1] not in raw:  # cheap test first
                        continue
                    task_id, crawl, request = read_entry(raw.decode())
                    if crawl == crawl_id:
                        found.append(Waiting(host, raw, task_id, request))
        return found

    def unwait(self, entries: Sequence[Waiting]) -> list[bool]:
        """Take ``entries`` out of their waiting rooms; for each, whether it was still there
        (False: the mover took it first). A room left empty is cleared by the mover's next look."""
        if not entries:
            return []
        by_host: dict[str, list[int]] = {}
        for n, e in enumerate(entries):
            by_host.setdefault(e.host, []).append(n)
        counts = self.keys.hosts_waiting_crawls()
        with self.redis.pipeline(transaction=False) as pipe:
            for host, ns in by_host.items():
                args = [v for n in ns for v in (entries[n].member, entries[n].request.get("crawl_id", ""))]
                self._leave(keys=[self.keys.host_wait(host), counts], args=args, client=pipe)
            answers = pipe.execute()
        gone = [False] * len(entries)
        for ns, answer in zip(by_host.values(), answers):
            for n, flag in zip(ns, answer):
                gone[n] = bool(flag)
        return gone

    def held_slots(self, hosts: Sequence[str]) -> dict[str, list[str]]:
        """The task ids holding (or reserved) a slot of each of ``hosts``, leases still running."""
        seconds, micros = self.redis.time()
        now = seconds + micros / 1e6
        with self.redis.pipeline(transaction=False) as pipe:
            for h in hosts:
                pipe.zrangebyscore(self.keys.host_slots(h), now, "+inf")
            raw = pipe.execute()
        return {h: [m.decode() for m in ids] for h, ids in zip(hosts, raw)}

    def busiest(self, n: int = 10, recent: int = 200) -> list[HostState]:
        """The ``n`` busiest of the ``recent`` hosts last active: most waiting, then in flight."""
        hosts = [h.decode() for h in self.redis.zrevrange(self.keys.hosts_recent(), 0, recent - 1)]
        with self.redis.pipeline(transaction=False) as pipe:
            for h in hosts:
                pipe.hgetall(self.keys.host(h))
                pipe.zcard(self.keys.host_slots(h))
                pipe.zcard(self.keys.host_wait(h))
            raw = pipe.execute()
        states = [self._state(h, raw[3 * i], raw[3 * i + 1], raw[3 * i + 2]) for i, h in enumerate(hosts)]
        states.sort(key=lambda st: (st.waiting, st.in_flight, st.requests), reverse=True)
        return states[:n]

    def _state(self, host: str, fields: dict[bytes, bytes], slots: int, waiting: int) -> HostState:
        f = {key.decode(): value.decode() for key, value in fields.items()}
        return HostState(host=host, delay=float(f.get("delay", self.settings.download_delay)),
                         in_flight=slots, waiting=waiting, requests=int(f.get(counters.HOST_REQUESTS, 0)),
                         deferred=int(f.get(counters.HOST_DEFERRED, 0)),
                         throttled=int(f.get(counters.HOST_THROTTLED, 0)),
                         blocked=int(f.get(counters.HOST_BLOCKED, 0)), proxied=f.get("proxied") == "1",
                         backoff=float(f.get("backoff", 0)), concurrency_cut=int(f.get("cut", 0)))
