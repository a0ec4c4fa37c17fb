"""Per-crawl configuration and progress: allowed domains, limits, outstanding tasks.

A crawl is drained when its outstanding set is empty: every task id joins it
before its message is published and leaves it only after the task has
published its own children (both in :mod:`crawler_tasks.state.gate`), so a queued,
running or countdown-waiting task always keeps the crawl open.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from ..core.errors import SettingsError
from ..core.limits import CrawlConfig
from ..core.store_uris import masked
from .keys import Keys

#: Config hash fields ``domain:<name>`` list the domains a crawl may follow links to.
DOMAIN_FIELD = "domain:"


@dataclass(frozen=True)
class Standing:
    """Where a crawl stands and what it was set to do, as ``crawler-tasks crawls`` shows it."""

    started: str | None
    finished: str | None
    #: ``paused``, ``cancelled`` or ``purged`` (crawl control); None: running as usual.
    control: str | None
    #: Its page budget (0: none): its own, else its plugins'.
    max_pages: int
    #: Its own ``max_depth`` and ``max_pages`` and what its plugins set, header names only.
    settings: dict[str, Any]


def _standing(started: bytes | None, finished: bytes | None, control: bytes | None,
               budget: bytes | None, depth: bytes | None, custom: bytes | None) -> Standing:
    settings: dict[str, Any] = json.loads(custom) if custom else {}
    if budget is not None and int(budget):
        settings["max_pages"] = int(budget)
    if depth is not None:
        settings["max_depth"] = int(depth)
    return Standing(_text(started), _text(finished), _text(control), int(settings.get("max_pages", 0)),
                     settings)


class Crawls:
    """Reads and writes crawl configuration and the outstanding-task sets."""

    CACHE_SIZE = 1024

    def __init__(self, client: redis.Redis, keys: Keys, *, cache_seconds: float = 5.0) -> None:
        self.client = client
        self.keys = keys
        #: Workers see a crawl's new domains, limits and state (paused, cancelled) within
        #: this many seconds (``CRAWLER_CRAWL_REFRESH_S``).
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, CrawlConfig]] = {}

    def register(self, crawl_id: str, *, domains: Iterable[str] = (), max_depth: int | None = None,
                 max_pages: int | None = None, store: str | None = None,
                 plugins: Iterable[str] = (), revisit: float | None = None,
                 on_change: dict[str, Any] | None = None) -> None:
        """Record a crawl and add ``domains``; limits given here override worker settings.

        ``store`` is kept with its passwords masked: workers resolve it against their own
        ``CRAWLER_STORE``. ``revisit``: the crawl keeps a revisit schedule, its pages first
        due again after this many seconds; ``on_change``: the callback its revisits send when
        they find a page changed."""
        fields: dict[str, str | int] = {f"{DOMAIN_FIELD}{d}": 1 for d in domains if d}
        if max_depth is not None:
            fields["max_depth"] = max_depth
        if max_pages is not None:
            fields["max_pages"] = max_pages
        if store:
            fields["store"] = masked(store)
        if plugins:
            fields["plugins"] = ",".join(plugins)
        if revisit:
            fields["revisit"] = repr(float(revisit))
        if on_change:
            fields["on_change"] = json.dumps(on_change)
        pipe = self.client.pipeline(transaction=False)
        note_layout(pipe, self.keys)  # the crawl's first keys are laid out by these counts
        pipe.sadd(self.keys.crawls(), crawl_id)
        if fields:
            pipe.hset(self.keys.crawl(crawl_id), mapping=fields)
        pipe.execute()
        self._cache.pop(crawl_id, None)

    def config(self, crawl_id: str) -> CrawlConfig:
        """The crawl's configuration, cached for a few seconds per process."""
        hit = self._cache.get(crawl_id)
        if hit and time.monotonic() - hit[0] < self.cache_seconds:
            return hit[1]
        fields = {k.decode(): v.decode() for k, v in self.client.hgetall(self.keys.crawl(crawl_id)).items()}
        config = CrawlConfig(
            crawl_id=crawl_id,
            domains=frozenset(k[len(DOMAIN_FIELD):] for k in fields if k.startswith(DOMAIN_FIELD)),
            max_depth=int(fields["max_depth"]) if "max_depth" in fields else None,
            max_pages=int(fields.get("max_pages", 0)),
            store=fields.get("store"),
            plugins=tuple(p for p in fields.get("plugins", "").split(",") if p),
            control=fields.get("control") or None,
            revisit=float(fields["revisit"]) if "revisit" in fields else None,
            on_change=json.loads(fields["on_change"]) if "on_change" in fields else None,
        )
        if len(self._cache) >= self.CACHE_SIZE:
            self._cache.clear()
        self._cache[crawl_id] = (time.monotonic(), config)
        return config

    def note_custom(self, crawl_id: str, shown: dict[str, Any]) -> None:
        """Keep what the crawl's plugins set (``custom_settings``, header values left out),
        as the first worker to run it saw them, for ``crawler-tasks crawls``."""
        self.client.hsetnx(self.keys.crawl(crawl_id), "custom", json.dumps(shown, sort_keys=True))

    def count_host(self, crawl_id: str, host: str, pipe: Any = None) -> None:
        """One more request of the crawl went to ``host`` (``pipe``: queued there)."""
        (pipe if pipe is not None else self.client).hincrby(self.keys.crawl_hosts(crawl_id), host, 1)

    def host_requests(self, crawl_id: str, hosts: Sequence[str]) -> dict[str, int]:
        """Requests the crawl sent to each of ``hosts``."""
        if not hosts:
            return {}
        counts = self.client.hmget(self.keys.crawl_hosts(crawl_id), list(hosts))
        return {h: int(n or 0) for h, n in zip(hosts, counts)}

    def _count_outstanding(self, pipe: Any, crawl_id: str) -> None:
        """Queue on ``pipe`` the size of each of the crawl's outstanding sets (one a gate shard)."""
        for k in range(self.keys.gate_shards):
            pipe.scard(self.keys.outstanding(crawl_id, k))

    def outstanding(self, crawl_id: str) -> int:
        """Tasks of the crawl queued, running or waiting on a retry."""
        return self.outstanding_many([crawl_id])[crawl_id]

    def progress(self, crawl_id: str) -> tuple[int, bool]:
        """Outstanding tasks and whether the crawl is registered, in one round trip."""
        with self.client.pipeline(transaction=False) as pipe:
            self._count_outstanding(pipe, crawl_id)
            pipe.sismember(self.keys.crawls(), crawl_id)
            *counts, known = pipe.execute()
        return sum(int(n) for n in counts), bool(known)

    def set_control(self, crawl_id: str, control: str | None) -> None:
        """Pause (``paused``) or cancel (``cancelled``) the crawl, or run it again (None).
        Workers see it within :attr:`cache_seconds`."""
        if control is None:
            self.client.hdel(self.keys.crawl(crawl_id), "control")
        else:
            self.client.hset(self.keys.crawl(crawl_id), "control", control)
        self._cache.pop(crawl_id, None)

    def hold(self, crawl_id: str, task_id: str, request: dict[str, Any]) -> None:
        """Keep a fetch of a paused crawl (its task id stays outstanding) until it resumes."""
        self.client.rpush(self.keys.held(crawl_id), _held(task_id, request))

    def hold_many(self, crawl_id: str, fetches: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """:meth:`hold` each of ``fetches`` (task id, request), in one round trip."""
        if fetches:
            self.client.rpush(self.keys.held(crawl_id), *(_held(t, r) for t, r in fetches))

    def unhold(self, crawl_id: str, fetches: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Let go of held ``fetches`` (task id, request) that went on some other way."""
        if fetches:
            with self.client.pipeline(transaction=False) as pipe:
                for task_id, request in fetches:
                    pipe.lrem(self.keys.held(crawl_id), 1, _held(task_id, request))
                pipe.execute()

    def mark_purged(self, crawl_id: str, control: str, ttl: int) -> None:
        """Leave the purged crawl's ``control`` mark behind for ``ttl`` seconds, so its
        fetches still queued are dropped rather than bring it back."""
        with self.client.pipeline(transaction=False) as pipe:
            pipe.hset(self.keys.crawl(crawl_id), "control", control)
            pipe.expire(self.keys.crawl(crawl_id), ttl)
            pipe.execute()
        self._cache.pop(crawl_id, None)

    def take_held(self, crawl_id: str, count: int = 500) -> list[tuple[str, dict[str, Any]]]:
        """Up to ``count`` held fetches, taken (oldest first)."""
        raw = self.client.lpop(self.keys.held(crawl_id), count) or []
        return [(d["task_id"], d["request"]) for d in map(json.loads, raw)]

    def held(self, crawl_id: str) -> int:
        """How many fetches of the crawl are held while it is paused."""
        return int(self.client.llen(self.keys.held(crawl_id)))

    def held_many(self, crawl_ids: Sequence[str]) -> dict[str, int]:
        """:meth:`held` of each of ``crawl_ids``, in one round trip."""
        return self._each(crawl_ids, "llen", self.keys.held)

    def running(self, crawl_id: str, when: str) -> None:
        """The crawl was given work (seeds, a page) at ``when`` (ISO time): it is running,
        started then unless it started before."""
        with self.client.pipeline(transaction=False) as pipe:
            pipe.sadd(self.keys.crawls_running(), crawl_id)
            pipe.hsetnx(self.keys.crawl(crawl_id), "started", when)
            pipe.hdel(self.keys.crawl(crawl_id), "finished")
            pipe.execute()

    def running_ids(self) -> list[str]:
        """The crawls given work since they were last found drained."""
        return sorted(m.decode() for m in self.client.smembers(self.keys.crawls_running()))

    def finished(self, crawl_id: str, when: str) -> bool:
        """Note the crawl found drained at ``when``; False when another process noted it first."""
        if not self.client.srem(self.keys.crawls_running(), crawl_id):
            return False
        self.client.hset(self.keys.crawl(crawl_id), "finished", when)
        return True

    def standings(self, crawl_ids: Sequence[str]) -> dict[str, Standing]:
        """Each crawl's :class:`Standing`, in one round trip."""
        with self.client.pipeline(transaction=False) as pipe:
            for crawl_id in crawl_ids:
                pipe.hmget(self.keys.crawl(crawl_id), "started", "finished", "control", "max_pages",
                           "max_depth", "custom")
            raw = pipe.execute()
        return {cid: _standing(*fields) for cid, fields in zip(crawl_ids, raw)}

    def outstanding_many(self, crawl_ids: Sequence[str]) -> dict[str, int]:
        """:meth:`outstanding` of each of ``crawl_ids``, in one round trip."""
        with self.client.pipeline(transaction=False) as pipe:
            for crawl_id in crawl_ids:
                self._count_outstanding(pipe, crawl_id)
            counts = iter(pipe.execute())
        return {cid: sum(int(next(counts)) for _ in range(self.keys.gate_shards)) for cid in crawl_ids}

    def _each(self, crawl_ids: Sequence[str], command: str, key: Callable[[str], str]) -> dict[str, int]:
        """``command`` (a count: ``scard``, ``llen``) on ``key`` of each crawl, in one round trip."""
        with self.client.pipeline(transaction=False) as pipe:
            for crawl_id in crawl_ids:
                getattr(pipe, command)(key(crawl_id))
            counts = pipe.execute()
        return {cid: int(n) for cid, n in zip(crawl_ids, counts)}

    def ping(self) -> None:
        """Raise a :class:`redis.RedisError` unless the state Redis answers."""
        self.client.ping()

    def outstanding_sample(self, crawl_id: str, count: int = 5) -> list[str]:
        """A few outstanding task ids, for a message about a stuck crawl."""
        found: list[str] = []
        for k in range(self.keys.gate_shards):
            found += [m.decode() for m in self.client.srandmember(self.keys.outstanding(crawl_id, k),
                                                                  count - len(found))]
            if len(found) >= count:
                break
        return sorted(found)

    def errors(self, crawl_id: str, count: int = 5) -> list[str]:
        """The latest unexpected task errors of the crawl, newest first."""
        with self.client.pipeline(transaction=False) as pipe:  # one list per gate shard
            for k in range(self.keys.gate_shards):
                pipe.lrange(self.keys.errors(crawl_id, k), 0, count - 1)
            lists = pipe.execute()
        return [e.decode() for e in itertools.chain(*itertools.zip_longest(*lists)) if e is not None][:count]

    def registered(self, crawl_id: str) -> bool:
        """Whether the crawl is in the registry of every crawl seen."""
        return bool(self.client.sismember(self.keys.crawls(), crawl_id))

    def all_ids(self) -> list[str]:
        return sorted(m.decode() for m in self.client.smembers(self.keys.crawls()))

    def purge(self, crawl_id: str) -> int:
        """Delete every key of the crawl and its entries in the crawl registry and the flushed
        counters; returns how many keys went.

        The keys are found with ``SCAN MATCH`` on the crawl's hash-tagged stem (every node of
        a Redis Cluster is scanned), never with ``KEYS``, and removed with ``UNLINK`` (a Bloom
        filter's strings are freed in the background).
        """
        stems = {self.keys.crawl_stem(crawl_id), *self.keys.gate_stems(crawl_id)}
        removed = 0
        for stem in sorted(stems):  # a batch is one stem's keys: one slot
            batch: list[bytes] = []
            for key in self.client.scan_iter(match=_glob_escape(stem) + "*", count=PURGE_BATCH):
                batch.append(key)
                if len(batch) >= PURGE_BATCH:
                    removed += int(self.client.unlink(*batch))
                    batch = []
            if batch:
                removed += int(self.client.unlink(*batch))
        self.client.srem(self.keys.crawls(), crawl_id)
        self.client.hdel(self.keys.stats_flushed(), crawl_id)
        self.client.hdel(self.keys.done_callbacks(), crawl_id)
        self.client.srem(self.keys.crawls_running(), crawl_id)
        self.client.srem(self.keys.revisit_crawls(), crawl_id)  # its schedule went with its keys
        self._cache.pop(crawl_id, None)
        return removed


def _layout(keys: Keys) -> dict[str, int]:
    return {"host_shards": keys.host_shards, "gate_shards": keys.gate_shards, "store_shards": keys.store_shards}


def note_layout(pipe: Any, keys: Keys) -> None:
    """Queue on ``pipe`` the shard counts of ``keys`` (:meth:`Keys.layout`), where none are noted."""
    for name, value in _layout(keys).items():
        pipe.hsetnx(keys.layout(), name, value)


def check_layout(client: redis.Redis, keys: Keys, *, note: bool = False) -> None:
    """:class:`SettingsError` when the shard counts noted on ``client`` (:meth:`Keys.layout`)
    differ from those of ``keys``: this process would name other keys for the same hosts and
    crawls. ``note``: note them first where none are (a worker, which writes keys)."""
    mine = _layout(keys)
    with client.pipeline(transaction=False) as pipe:
        if note:
            note_layout(pipe, keys)
        pipe.hgetall(keys.layout())
        *_, raw = pipe.execute()
    stored = {k.decode(): int(v) for k, v in raw.items()}
    for name in mine:
        env = f"CRAWLER_{name.upper()}"
        if stored.get(name, mine[name]) != mine[name]:
            raise SettingsError(f"{env}={mine[name]}, but the keys on this Redis are laid out for "
                                f"{stored[name]}: every worker and client of one Redis must use the same")


def _held(task_id: str, request: dict[str, Any]) -> str:
    """A held fetch's entry: the same text for the same fetch (so it can be let go)."""
    return json.dumps({"task_id": task_id, "request": request}, sort_keys=True)


def _text(value: bytes | None) -> str | None:
    return value.decode() if value is not None else None


#: Keys asked for per SCAN call and removed per UNLINK by :meth:`Crawls.purge`.
PURGE_BATCH = 500


def _glob_escape(text: str) -> str:
    """``text`` matched literally by a Redis glob pattern."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)
