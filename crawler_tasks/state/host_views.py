"""The read side of the politeness state, over every shard: what waits, for which crawl, the
busiest hosts, and taking a crawl's fetches out of the waiting rooms.

The hosts are split over shards (:mod:`~crawler_tasks.state.hosts`); each view asks
every shard, in one pipeline (a Redis Cluster client splits it by master), and sums.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from ..core import counters
from ..core.settings import Settings
from ..core.shards import group_indexes, scatter
from . import scripts
from .keys import Keys
from .round_trip import run_scripts
from .waiting_room import Waiting, read_entry


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


class HostViews:
    """What the politeness state holds, read over every shard."""

    def __init__(self, client: redis.Redis, keys: Keys, settings: Settings) -> None:
        self.redis = client
        self.keys = keys
        self.settings = settings
        #: Shards of the politeness state (``CRAWLER_HOST_SHARDS``).
        self.shards = keys.host_shards
        self._leave = scripts.register(client, "hosts_leave.lua")

    def _each_shard(self, command: str, key: Any, *args: Any) -> list[Any]:
        """``command`` on ``key(shard)`` of every shard, in one pipeline."""
        with self.redis.pipeline(transaction=False) as pipe:
            for shard in range(self.shards):
                getattr(pipe, command)(key(shard), *args)
            return pipe.execute()

    def waiting_by_crawl(self) -> dict[str, int]:
        """Fetches waiting for their hosts, per crawl (kept as they come and go: no walk)."""
        total: dict[str, int] = {}
        for raw in self._each_shard("hgetall", self.keys.hosts_waiting_crawls):
            for k, v in raw.items():
                total[k.decode()] = total.get(k.decode(), 0) + int(v)
        return {k: n for k, n in total.items() if n > 0}

    def forget_crawl(self, crawl_id: str) -> None:
        """Drop the waiting count of a purged crawl."""
        self._each_shard("hdel", self.keys.hosts_waiting_crawls, crawl_id)

    def _due_hosts(self) -> list[str]:
        return [h.decode() for hosts in self._each_shard("zrange", self.keys.hosts_due, 0, -1) for h in hosts]

    def waiting(self) -> int:
        """Fetches waiting for their host, over every host (walks the due hosts)."""
        hosts = self._due_hosts()
        with self.redis.pipeline(transaction=False) as pipe:
            for h in hosts:
                pipe.zcard(self.keys.host_wait(h))
            counts = pipe.execute()
        return sum(counts) + sum(self._each_shard("zcard", self.keys.hosts_moving))

    def waiting_of(self, crawl_id: str, batch: int = 200) -> list[Waiting]:
        """The fetches of crawl ``crawl_id`` waiting in the hosts' rooms (walks the due hosts,
        ``batch`` rooms per round trip)."""
        needles = (json.dumps({"crawl_id": crawl_id}, separators=(",", ":"))[1:-1].encode(),
                   f"\t{crawl_id}\t".encode())
        hosts = self._due_hosts()
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
        by_host = group_indexes(entries, lambda e: e.host)
        calls = []
        for host, ns in by_host.items():
            args = [v for n in ns for v in (entries[n].member, entries[n].request.get("crawl_id", ""))]
            counts = self.keys.hosts_waiting_crawls(self.keys.host_shard(host))
            calls.append((self._leave, [self.keys.host_wait(host), counts], args))
        return [bool(flag) for flag in scatter(by_host, run_scripts(self.redis, calls), len(entries), 0)]

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
        latest = sorted(((when, h.decode()) for shard in
                         self._each_shard("zrevrange", self.keys.hosts_recent, 0, recent - 1, True)
                         for h, when in shard), reverse=True)
        hosts = [h for _, h in latest[:recent]]
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
