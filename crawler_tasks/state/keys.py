"""Every Redis key this package writes, one function per key, under one prefix.

Per-crawl keys carry the crawl id as a Redis Cluster hash tag
(``crawler:{news}:seen``), so every key one gate call touches lives in the same
slot and the call stays a single atomic script on a Redis Cluster too.

A few scripts must name keys of values only they know (the hosts the mover
visits, a Bloom gate's generation): they get the key's :func:`template` from
here and fill it in with ``key_of`` (``lua/keys.lua``), so the names are still
the ones these functions give.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.settings import Settings
from ..core.shards import shard_of, spread_tags, task_shard


def template(key: Callable[..., str], arity: int = 1) -> list[str]:
    """The text around the ``arity`` variable parts of the key ``key`` names: a script
    that gets it builds ``key(v1, v2…)`` as ``t[0] .. v1 .. t[1] .. v2 .. t[2]…``
    (``key_of`` in ``lua/keys.lua``). ValueError when ``key`` does not put each value
    into the name once, as it is, in order."""
    marks = [f"\x00Value{i}\x00" for i in range(arity)]  # mixed case: lower() or upper() shows
    rest = key(*marks)
    pieces = []
    for mark in marks:
        head, found, rest = rest.partition(mark)
        if not found or any(m in head for m in marks):
            raise ValueError(f"{key.__qualname__} does not take its values as they are, in order")
        pieces.append(head)
    if any(m in rest for m in marks):
        raise ValueError(f"{key.__qualname__} puts a value in its name twice")
    return [*pieces, rest]


class Keys:
    """Builds key names under ``prefix`` (``CRAWLER_KEY_PREFIX``), with the politeness keys
    split over ``host_shards`` hash tags (``CRAWLER_HOST_SHARDS``), each crawl's gate
    over ``gate_shards`` (``CRAWLER_GATE_SHARDS``) and the store queue over
    ``store_shards`` (``CRAWLER_STORE_SHARDS``)."""

    def __init__(self, prefix: str = "crawler", host_shards: int = 1, gate_shards: int = 1,
                 store_shards: int = 1) -> None:
        self.prefix = prefix
        #: Shards of each crawl's gate: with one, its keys are the crawl's own (:meth:`crawl_stem`).
        self.gate_shards = gate_shards
        #: Shards of the politeness keys: a host's keys all carry its shard's tag.
        self.host_shards = host_shards
        self._host_stems = tuple(f"{prefix}:{{{tag}}}:" for tag in spread_tags("hosts", host_shards))
        #: Shards of the store queue: each its own queue, leases and writers.
        self.store_shards = store_shards
        self._store_stems = tuple(f"{prefix}:{{{tag}}}:" for tag in spread_tags("store", store_shards))

    @classmethod
    def of(cls, settings: Settings) -> Keys:
        """The keys ``settings`` name: their prefix and shard counts."""
        return cls(settings.key_prefix, host_shards=settings.host_shards, gate_shards=settings.gate_shards,
                   store_shards=settings.store_shards)

    def _crawl(self, crawl_id: str, name: str) -> str:
        return f"{self.crawl_stem(crawl_id)}{name}"

    def crawl_stem(self, crawl_id: str) -> str:
        """What every key of one crawl starts with (``crawler:{news}:``): ``purge`` scans for it
        (and for each :meth:`gate_stem`)."""
        return f"{self.prefix}:{{{crawl_id}}}:"

    # A crawl's gate keys: with several gate shards, each shard's keys carry a hash tag of
    # their own ({news:3…}, core/shards.py); with one, the crawl's ({news}).

    def gate_stem(self, crawl_id: str, shard: int) -> str:
        """What the keys of one gate shard of a crawl start with."""
        if self.gate_shards == 1:
            return self.crawl_stem(crawl_id)
        return f"{self.prefix}:{{{spread_tags(crawl_id, self.gate_shards)[shard]}}}:"

    def gate_stems(self, crawl_id: str) -> list[str]:
        """The stems of every gate shard of a crawl."""
        return [self.gate_stem(crawl_id, k) for k in range(self.gate_shards)]

    def task_shard(self, task_id: str) -> int:
        """The gate shard a task id belongs to (:func:`~crawler_tasks.core.shards.task_shard`)."""
        return task_shard(task_id, self.gate_shards)

    def seen(self, crawl_id: str, shard: int = 0) -> str:
        """SET of request fingerprints admitted by the gate for one crawl (one gate shard's)."""
        return f"{self.gate_stem(crawl_id, shard)}seen"

    def seen_recent(self, crawl_id: str, shard: int = 0) -> str:
        """ZSET fingerprint -> admission time, with a recrawl window (``CRAWLER_RECRAWL_AFTER``)."""
        return f"{self.gate_stem(crawl_id, shard)}seen:recent"

    def bloom(self, crawl_id: str, shard: int = 0) -> str:
        """Stem of a crawl's Bloom gate (one gate shard's): a HASH of its geometry at the
        stem (per generation with a recrawl window: :meth:`bloom_generation`) and bit
        strings (:meth:`bloom_segment`)."""
        return f"{self.gate_stem(crawl_id, shard)}bloom"

    @staticmethod
    def bloom_generation(stem: str, generation: int) -> str:
        """A Bloom gate's filter of one generation (``⌊now / CRAWLER_RECRAWL_AFTER⌋``) under its
        :meth:`bloom` ``stem``: the same HASH of geometry, the stem of its own bit strings."""
        return f"{stem}:{generation}"

    @staticmethod
    def bloom_segment(stem: str, slice_: int, segment: int) -> str:
        """STRING of bits, one segment of one slice of the Bloom filter at ``stem`` (the
        :meth:`bloom` stem, or a :meth:`bloom_generation`)."""
        return f"{stem}:{slice_}:{segment}"

    def unpublished(self, crawl_id: str) -> str:
        """LIST of seed requests (JSON) a Bloom gate admitted but the broker did not take."""
        return self._crawl(crawl_id, "unpublished")

    def replay(self, crawl_id: str, task_id: str) -> str:
        """HASH fingerprint -> child task id of the links one task admitted.

        The field ``~`` marks that the task's completion already ran (and was
        counted). A redelivered task publishes its children again under the
        same ids instead of losing them to the gate. Fields such as ``retry:2``
        mark steps already counted (:meth:`~crawler_tasks.state.gate.Gate.count_once`).
        """
        return f"{self.gate_stem(crawl_id, self.task_shard(task_id))}replay:{task_id}"

    def part(self, crawl_id: str, task_id: str, shard: int) -> str:
        """HASH fingerprint -> child task id (or refusal) of the links one task's completion
        admitted in one gate shard, with ``~`` once done (several gate shards only): the
        shard answers a redelivery the same way (:mod:`crawler_tasks.state.gate_parts`)."""
        return f"{self.gate_stem(crawl_id, shard)}part:{task_id}"

    def grants(self, crawl_id: str) -> str:
        """HASH task id -> pages of the budget its completion took (several gate shards and a
        page budget only): a redelivery takes the same again."""
        return self._crawl(crawl_id, "grants")

    def adopted(self, crawl_id: str, task_id: str) -> str:
        """STRING (with a TTL) marking that a fetch another app sent straight to
        ``crawl.fetch`` joined the crawl, so a late duplicate of it is not adopted twice."""
        return f"{self.gate_stem(crawl_id, self.task_shard(task_id))}adopted:{task_id}"

    def outstanding(self, crawl_id: str, shard: int = 0) -> str:
        """SET of task ids queued, running or waiting on a retry for one crawl (those of one
        gate shard: :meth:`task_shard`)."""
        return f"{self.gate_stem(crawl_id, shard)}outstanding"

    def held(self, crawl_id: str) -> str:
        """LIST of the fetches of a paused crawl (``{"task_id", "request"}`` JSON), held until it
        resumes (their task ids stay outstanding)."""
        return self._crawl(crawl_id, "held")

    def callbacks(self, crawl_id: str) -> str:
        """HASH record token -> the page callback (JSON) staged before its record settles, taken
        once it is sent (a worker that died in between leaves it for the next delivery)."""
        return self._crawl(crawl_id, "callbacks")

    def done_callbacks(self) -> str:
        """HASH crawl id -> its ``on_done`` callback (JSON), until a worker finds it drained and
        takes it to send."""
        return f"{self.prefix}:on_done"

    def deliveries(self, crawl_id: str) -> str:
        """HASH task id -> times its message came back after a lost worker."""
        return self._crawl(crawl_id, "deliveries")

    def errors(self, crawl_id: str, shard: int = 0) -> str:
        """LIST of the latest unexpected task errors of one crawl (newest first, capped; one per
        gate shard)."""
        return f"{self.gate_stem(crawl_id, shard)}errors"

    def crawl(self, crawl_id: str) -> str:
        """HASH of one crawl's configuration: max depth, max pages, store, and a
        ``domain:<name>`` field per domain it may follow links to; ``started`` and
        ``finished`` (ISO times: first seeds, last found drained)."""
        return self._crawl(crawl_id, "config")

    def crawl_hosts(self, crawl_id: str) -> str:
        """HASH host -> requests the crawl sent it (``top`` shows a crawl's own figures)."""
        return self._crawl(crawl_id, "hosts")

    def revisits(self, crawl_id: str) -> str:
        """ZSET of a crawl's revisit schedule: URL -> due time and slot (``core/revisit.py``)."""
        return self._crawl(crawl_id, "revisit")

    def near_dups(self, crawl_id: str, band: int) -> str:
        """HASH of one simhash band of a crawl's pages: band value -> their entries
        (``state/near_dups.py``)."""
        return self._crawl(crawl_id, f"near:{band}")

    def digests(self, crawl_id: str) -> str:
        """HASH of a crawl's page bodies by digest: payload digest -> the first page's
        fingerprint, URL and fetch time (``state/near_dups.py``)."""
        return self._crawl(crawl_id, "digests")

    def revisit_crawls(self) -> str:
        """SET of the crawls that keep a revisit schedule (what Beat's tick looks at)."""
        return f"{self.prefix}:revisit:crawls"

    def stats(self, crawl_id: str, shard: int | None = None) -> str:
        """HASH of one crawl's counters (the overall figures are their sum): the crawl's own
        (``shard`` None), or those one gate shard's scripts move, summed with it on read."""
        return self._crawl(crawl_id, "stats") if shard is None else f"{self.gate_stem(crawl_id, shard)}stats"

    def page(self, crawl_id: str, task_id: str) -> str:
        """HASH claim check of one fetched page: ``record`` (JSON) and ``body`` (zlib)."""
        return self._crawl(crawl_id, f"page:{task_id}")

    def dead_letters(self) -> str:
        """LIST of records a store refused for good, or whose store stayed down past
        CRAWLER_STORE_MAX_RETRIES (JSON, zlib-compressed above 4 KiB, newest first): each with
        its store URI (passwords masked) and the reason, waiting for ``crawler-tasks replay-dead``."""
        return f"{self.prefix}:dead_letters"

    def dead_letters_unreadable(self) -> str:
        """LIST of dead letters and store-queue entries that could not be read, set aside as
        they were (newest first, at most CRAWLER_DEAD_LETTERS_MAX) for a person to look at."""
        return f"{self.prefix}:dead_letters:unreadable"

    # The store queue's keys: each shard's carry its own hash tag ({store} with one shard,
    # {store:k…} with several), so its scripts run on one slot of a Redis Cluster.

    def store_pending(self, shard: int = 0) -> str:
        """LIST of store entries (a record, its crawl, store URI and attempts) waiting for a
        batch, oldest first (:mod:`crawler_tasks.state.store_queue`)."""
        return f"{self._store_stems[shard]}pending"

    def store_since(self, shard: int = 0) -> str:
        """STRING: Redis time (s) when the oldest entry of the pending list arrived."""
        return f"{self._store_stems[shard]}since"

    def store_looked(self, shard: int = 0) -> str:
        """STRING: the pending list's length when a worker last looked (unchanged = idle)."""
        return f"{self._store_stems[shard]}looked"

    def store_delayed(self, shard: int = 0) -> str:
        """ZSET of store entries whose batch failed, scored by when to try them again."""
        return f"{self._store_stems[shard]}delayed"

    def store_leases(self, shard: int = 0) -> str:
        """ZSET worker (consumer id) -> Redis time until which its taken batch stays its own."""
        return f"{self._store_stems[shard]}leases"

    def store_taken(self, consumer: str) -> str:
        """LIST of the store entries one worker took and is writing, in the shard its id
        names (:meth:`store_shard`)."""
        return self.store_taken_in(self.store_shard(consumer), consumer)

    def store_taken_in(self, shard: int, consumer: str) -> str:
        """:meth:`store_taken` of a consumer of ``shard``."""
        return f"{self._store_stems[shard]}taken:{consumer}"

    def store_shard(self, consumer: str) -> int:
        """The store shard a writer's id names (``<id>.<k>``,
        :func:`~crawler_tasks.core.shards.shard_task_id`)."""
        return task_shard(consumer, self.store_shards)

    def store_homes(self) -> str:
        """STRING counter: each worker process takes the next number for its home shard."""
        return f"{self._store_stems[0]}homes"

    # Politeness keys: a host's keys, and the keys its scripts share with the other hosts of
    # its shard, carry the shard's hash tag ({hosts} with one shard, {hosts:k…} with several:
    # core/shards.py), so each script runs on one slot (see crawler_tasks.state.hosts).

    def host_shard(self, host: str) -> int:
        """The politeness shard of ``host`` (``host:port``)."""
        return shard_of(host, self.host_shards)

    def hosts_stem(self, shard: int) -> str:
        """Stem of every politeness key of one shard."""
        return self._host_stems[shard]

    def host(self, host: str, shard: int | None = None) -> str:
        """HASH of one host's limits: ``next`` (Redis time its next request may start),
        ``delay``, ``backoff``, ``auto`` (AutoThrottle), ``cut`` (concurrency cut after
        timeouts), and its counters (:data:`~crawler_tasks.core.counters.HOST`: ``requests``,
        ``deferred``, ``throttled``, ``blocked``). ``shard``: the host's own, given by a
        caller that knows it (the templates of a shard's scripts)."""
        return f"{self._stem_of(host, shard)}host:{host}"

    def host_slots(self, host: str, shard: int | None = None) -> str:
        """ZSET task id -> lease expiry of the requests in flight to one host (or reserved
        for a fetch the mover sent)."""
        return f"{self._stem_of(host, shard)}slots:{host}"

    def host_wait(self, host: str, shard: int | None = None) -> str:
        """ZSET waiting-room entry (:mod:`~crawler_tasks.state.waiting_room`) -> band rank ×
        10¹³ + arrival number: fetches waiting for one host, highest band first, then first come."""
        return f"{self._stem_of(host, shard)}wait:{host}"

    def _stem_of(self, host: str, shard: int | None) -> str:
        return self._host_stems[self.host_shard(host) if shard is None else shard]

    def hosts_due(self, shard: int) -> str:
        """ZSET host -> Redis time its waiting fetches are next looked at by a mover (the
        hosts of one shard)."""
        return f"{self.hosts_stem(shard)}due"

    def hosts_arrivals(self, shard: int) -> str:
        """STRING counter: the order in which fetches joined a waiting room of the shard (first
        in, first out within a band)."""
        return f"{self.hosts_stem(shard)}arrivals"

    def hosts_moving(self, shard: int) -> str:
        """ZSET ``<host>\\t<score>\\t<entry>`` -> lease expiry: waiting fetches of the shard a
        mover took and is publishing (given back to their host when the lease runs out)."""
        return f"{self.hosts_stem(shard)}moving"

    def hosts_waiting_crawls(self, shard: int) -> str:
        """HASH crawl id -> its fetches waiting for the shard's hosts (in a waiting room, or
        taken by a mover and not yet published): kept by the scripts that fill and empty the
        rooms, summed over the shards on read."""
        return f"{self.hosts_stem(shard)}waiting_crawls"

    def hosts_recent(self, shard: int) -> str:
        """ZSET host -> Redis time of its last request or deferral, for the shard's hosts
        (``stats`` reads the busiest)."""
        return f"{self.hosts_stem(shard)}recent"

    def proxies_benched(self, shard: int) -> str:
        """ZSET proxy index (in ``CRAWLER_PROXIES``) -> Redis time until which the shard's
        hosts leave it out (each shard learns a failing proxy from its own hosts)."""
        return f"{self.hosts_stem(shard)}proxies:benched"

    def robots(self, origin: str) -> str:
        """HASH of one origin's robots.txt (``scheme://host:port``), kept in its host's shard:
        ``state``, ``packed`` (its rule lines, compressed, at most 64 KiB), ``status``,
        ``until`` (:mod:`crawler_tasks.net.robots`)."""
        return f"{self._stem_of(origin.partition('://')[2], None)}robots:{origin}"

    def robots_lock(self, origin: str) -> str:
        """STRING held (with a TTL) by the one fetch downloading an origin's robots.txt."""
        return f"{self.robots(origin)}:lock"

    def layout(self) -> str:
        """HASH of the shard counts the first worker on this Redis used (``host_shards``,
        ``gate_shards``, ``store_shards``): a worker with other counts would name other keys,
        and stops."""
        return f"{self.prefix}:layout"

    def stats_flushed(self) -> str:
        """HASH crawl id -> its counters (JSON) as last written to its store's statistics."""
        return f"{self.prefix}:stats_flushed"

    def seeding(self) -> str:
        """HASH seed call id -> the seeds it gates and publishes (crawl id, task ids and
        requests), kept while the call runs (:mod:`~crawler_tasks.state.unpublished`)."""
        return f"{self.prefix}:{{seeding}}:calls"

    def seeding_since(self) -> str:
        """ZSET seed call id -> when it began (Unix time)."""
        return f"{self.prefix}:{{seeding}}:since"

    def crawls(self) -> str:
        """SET of every crawl id seen."""
        return f"{self.prefix}:crawls"

    def crawls_running(self) -> str:
        """SET of the crawls given work since they were last found drained."""
        return f"{self.prefix}:crawls:running"

    def feed(self, name: str) -> str:
        """HASH of one seed feed's status: ``last_tick``, ``last_outcome`` and its counters
        (:data:`~crawler_tasks.core.counters.FEED`: ``ticks``, ``admitted``, ``skipped/<why>``...)."""
        return f"{self.prefix}:feed:{name}"

    def feed_lock(self, name: str) -> str:
        """STRING held (random token, with a TTL) by the one tick feeding ``name`` now."""
        return f"{self.prefix}:feed:{name}:lock"

    def feed_slot(self, name: str) -> str:
        """STRING set by the tick that fed ``name`` in the current interval; expires, never deleted."""
        return f"{self.prefix}:feed:{name}:slot"

    def sitemap_lastmod(self, crawl_id: str) -> str:
        """ZSET fingerprint -> ``<lastmod>`` (Unix time) a sitemap gave when that URL was last
        fed; the newest ``CRAWLER_SITEMAP_LASTMOD_MAX`` are kept."""
        return self._crawl(crawl_id, "sitemap_dates")
