"""Seed feeds: what each of Beat's ``crawl.feed`` ticks moves into the crawls.

Three feeds, each on when its setting is set:

``start_urls``  the Redis key ``CRAWLER_START_URLS_KEY`` (a list, set or sorted set) other
                programs push seeds onto: ``CRAWLER_START_URLS_BATCH`` entries per tick, every
                ``CRAWLER_START_URLS_INTERVAL`` s. A tick moves its entries to a taking list in
                one step (producers may push meanwhile), and drops them from it only after they
                were gated and published; malformed ones go to ``<key>:rejected`` with their
                reason.
``seed_file``   ``CRAWLER_SEED_FILE``, re-read whole every ``CRAWLER_SEED_INTERVAL`` s: one URL or
                JSON seed object per line, blank lines and ``#`` comments skipped. Every line is
                submitted again each time and the gate refuses the ones already admitted, so a
                re-read feeds the new lines (and, with ``CRAWLER_RECRAWL_AFTER``, the lines whose
                recrawl window passed).
``sitemaps``    ``CRAWLER_SITEMAP_URLS`` every ``CRAWLER_SEED_INTERVAL`` s (indexes followed,
                :mod:`crawler_tasks.stages.sitemaps`): every ``<loc>`` is a seed; a ``<lastmod>`` newer
                than the one recorded when that URL was last fed re-admits it (``dont_filter``).

Seeds join the crawl ``CRAWLER_SEED_CRAWL_ID`` unless a JSON seed names its own ``crawl_id``.
Each seed is judged on its own: a malformed one, or one whose host is an address the
private-network guard refuses (:mod:`crawler_tasks.core.addresses`; a host name is judged when a
worker connects), is logged (with its line number, key or sitemap), counted
(``seeds/invalid`` in that crawl's counters, ``refused`` in the feed's status) and never
enqueued; it never stops the feed. The file and sitemap feeds submit :data:`CHUNK` seeds per
gate call.

One feeder at a time. A tick

1. takes the feed's lock (``SET NX PX`` of a random token, renewed before each chunk and each
   sitemap fetch, released by compare-and-delete): a tick that finds it held is skipped
   (``skipped/busy``). A tick that outlives the lock's TTL without renewing it stops at its
   next chunk rather than feed beside the tick that took the lock over;
2. skips (``skipped/queue_full``) while more fetches wait in the broker than
   ``CRAWLER_MAX_QUEUED``, reading and removing nothing. A long tick checks again before each
   chunk and stops there (``stopped_early``) when the queue filled up, so the broker holds at
   most the cap plus one chunk (or one start-URL batch); the next tick goes on (the file and
   the sitemaps from the top: the gate refuses what was already fed);
3. for ``seed_file`` and ``sitemaps`` only, claims the interval's slot: ``SET NX PX`` of
   0.9 x the interval, never released. A tick that finds it taken is skipped
   (``skipped/already_fed``). So two Beat processes (or a Beat restarted mid-interval) feed
   these once per interval, not once each: whichever tick comes first in an interval feeds,
   the other beat's tick in the same interval is skipped. The 10% margin absorbs the jitter
   of a single Beat's ticks. ``start_urls`` needs no slot: its entries leave the key once fed,
   so a second beat only drains it sooner.

Each tick's outcome goes to the feed's status hash (:meth:`~crawler_tasks.state.keys.Keys.feed`),
which ``crawler-tasks seeds`` shows.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from typing import IO, TYPE_CHECKING, Any

import redis

from ..core import counters
from ..core.errors import BadInput, BrokerUnavailable, FeedSourceUnavailable, QueueFull
from ..core.models import CrawlRequest
from ..state import scripts
from . import enqueue
from .seed import build_requests, parse_seed_line, refuse_blocked, submit_requests
from .sitemaps import Entry, SitemapReader, fetch_sitemap

if TYPE_CHECKING:
    from ..core.addresses import AddressPolicy
    from ..core.settings import Settings
    from .runtime import Runtime

log = logging.getLogger(__name__)

START_URLS, SEED_FILE, SITEMAPS = "start_urls", "seed_file", "sitemaps"
FEED_NAMES = (START_URLS, SEED_FILE, SITEMAPS)
#: Seeds per gate call (and per backpressure check) of the file and sitemap feeds.
CHUNK = 500
#: Malformed seeds logged one by one per tick; past that, only how many more.
LOGGED_PER_TICK = 100
#: Bytes of the longest seed-file line read; a longer line is refused.
MAX_LINE = 64 * 1024
#: Rejected start-URL items kept for a user to look at.
REJECTED_KEPT = 1000
#: Share of the interval a periodic feed's slot lasts.
SLOT_SHARE = 0.9


@dataclass(frozen=True)
class FeedConfig:
    """One feed as the settings configure it."""

    name: str
    source: str  # what it reads: a Redis key, a file path, sitemap URLs
    enabled: bool
    interval: float  # seconds between Beat's ticks

    @property
    def periodic(self) -> bool:
        """Fed once per interval (the slot); ``start_urls`` drains batch by batch instead."""
        return self.name != START_URLS


def configured(settings: Settings) -> list[FeedConfig]:
    """Every feed, on or off, with what it reads and its interval."""
    return [
        FeedConfig(START_URLS, settings.start_urls_key, True, settings.start_urls_interval),
        FeedConfig(SEED_FILE, settings.seed_file, bool(settings.seed_file), settings.seed_interval),
        FeedConfig(SITEMAPS, ",".join(settings.sitemap_urls), bool(settings.sitemap_urls),
                   settings.seed_interval),
    ]


def config_of(settings: Settings, name: Any) -> FeedConfig:
    """The feed called ``name``; :class:`BadInput` for a name no feed has."""
    for config in configured(settings):
        if config.name == name:
            return config
    raise BadInput(f"feed: {name!r:.80} is not one of {', '.join(FEED_NAMES)}")


@dataclass
class Fed:
    """What one tick moved: seeds admitted, refused by the gate as seen, refused as malformed."""

    feed: str
    admitted: int = 0
    duplicates: int = 0
    invalid: int = 0
    stopped: str = ""  # why the tick stopped before the end of its source, if it did
    sources_failed: int = 0  # sitemaps that could not be read

    def refuse(self, where: str, reason: object) -> None:
        """Count one malformed seed and log it (the first :data:`LOGGED_PER_TICK` of a tick)."""
        self.invalid += 1
        if self.invalid <= LOGGED_PER_TICK:
            log.warning("feed %s: refused %s: %.300s", self.feed, where, reason)

    def close(self) -> None:
        if self.invalid > LOGGED_PER_TICK:
            log.warning("feed %s: %s more malformed seeds refused this tick",
                        self.feed, self.invalid - LOGGED_PER_TICK)


@dataclass(frozen=True)
class Tick:
    """How one tick went: ``fed``, ``skipped`` (``busy``, ``queue_full``, ``already_fed``),
    ``failed`` (``reason`` says why) or ``off`` (the feed is not configured)."""

    feed: str
    outcome: str
    reason: str = ""
    fed: Fed | None = None

    def describe(self) -> str:
        """One line, as the feed's status shows it."""
        if self.outcome == "skipped":
            return f"skipped: {self.reason}"
        fed = self.fed or Fed(self.feed)
        line = (f"{self.outcome}: {fed.admitted} admitted, {fed.duplicates} already seen, "
                f"{fed.invalid} malformed")
        failed = f"{fed.sources_failed} sitemap(s) failed" if fed.sources_failed else ""
        extra = "; ".join(part for part in (self.reason, fed.stopped, failed) if part)
        return f"{line} ({extra})" if extra else line


class FeedLock:
    """One tick's hold on a feed: ``SET NX PX`` of a random token; renewed and released only while ours."""

    def __init__(self, client: redis.Redis, key: str, ttl: float) -> None:
        self.client, self.key = client, key
        self.ttl_ms = max(1, int(ttl * 1000))
        self.token = uuid.uuid4().hex
        self._renew = scripts.register(client, "feed_lock_renew.lua")
        self._release = scripts.register(client, "feed_lock_release.lua")

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.token, nx=True, px=self.ttl_ms))

    def renew(self) -> bool:
        """Restart the TTL; False when the lock expired and is no longer ours."""
        return bool(self._renew(keys=[self.key], args=[self.token, self.ttl_ms]))

    def release(self) -> None:
        self._release(keys=[self.key], args=[self.token])


def lock_ttl(settings: Settings) -> float:
    """Seconds a tick's lock lasts between renewals: longer than one sitemap download."""
    return max(60.0, 3 * settings.download_timeout)


def tick(rt: Runtime, name: str = START_URLS, *, batch: int | None = None) -> Tick:
    """Run one tick of feed ``name`` (see the module docstring); its outcome is recorded.

    ``batch``: start-URL entries taken, or seeds per gate call of the other
    feeds (default ``CRAWLER_START_URLS_BATCH`` / :data:`CHUNK`). Raises
    :class:`BadInput` for an unknown feed name.
    """
    config = config_of(rt.settings, name)
    if not config.enabled:
        return Tick(config.name, "off")
    lock = FeedLock(rt.redis, rt.keys.feed_lock(config.name), lock_ttl(rt.settings))
    if not lock.acquire():
        return record(rt, Tick(config.name, "skipped", "busy"))
    try:
        result = _locked_tick(rt, config, lock, batch)
    finally:
        lock.release()
    return record(rt, result)


def _locked_tick(rt: Runtime, config: FeedConfig, lock: FeedLock, batch: int | None) -> Tick:
    try:
        enqueue.ensure_room(rt)
    except QueueFull as exc:
        log.info("feed %s: tick skipped: %s", config.name, exc)
        return Tick(config.name, "skipped", "queue_full")
    if config.periodic and not _claim_slot(rt, config):
        return Tick(config.name, "skipped", "already_fed")
    fed = Fed(config.name)
    default = rt.settings.start_urls_batch if config.name == START_URLS else CHUNK
    try:
        _BODIES[config.name](rt, lock, fed, batch or default)
    except (FeedSourceUnavailable, BrokerUnavailable) as exc:
        log.warning("feed %s: tick failed: %s", config.name, exc)
        return Tick(config.name, "failed", str(exc), fed)
    finally:
        fed.close()
        _count_invalid(rt, fed)
    return Tick(config.name, "fed", fed=fed)


def _claim_slot(rt: Runtime, config: FeedConfig) -> bool:
    """True for the first tick of this interval; later ticks (another beat's) find it taken."""
    slot_ms = max(1, int(config.interval * SLOT_SHARE * 1000))
    return bool(rt.redis.set(rt.keys.feed_slot(config.name), _now(), nx=True, px=slot_ms))


def _count_invalid(rt: Runtime, fed: Fed) -> None:
    if fed.invalid:
        crawl_id = rt.settings.seed_crawl_id
        rt.crawls.register(crawl_id)  # so `crawler-tasks stats` lists it
        rt.gate.add_counts(crawl_id, {counters.SEEDS_INVALID: fed.invalid})


def _submit(rt: Runtime, lock: FeedLock, fed: Fed, requests: list[CrawlRequest]) -> bool:
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


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


# -- start_urls ---------------------------------------------------------------

def taking_key(key: str) -> str:
    """The list holding the start-URL entries a tick took and has not finished: in the same
    Redis Cluster slot as ``key`` (its hash tag, or ``key`` made one)."""
    tagged = "{" in key and "}" in key.split("{", 1)[1]
    return f"{key}:taking" if tagged else f"{{{key}}}:taking"


def waiting(rt: Runtime) -> int:
    """Entries waiting in the start-URL key (0 when it is missing or of a type not read),
    and those a tick took but did not finish."""
    key = rt.settings.start_urls_key
    size = {"list": rt.redis.llen, "set": rt.redis.scard, "zset": rt.redis.zcard}.get(
        rt.redis.type(key).decode())
    return (int(size(key)) if size else 0) + int(rt.redis.llen(taking_key(key)))


def feed_start_urls(rt: Runtime, lock: FeedLock, fed: Fed, batch: int) -> None:
    """Move up to ``batch`` entries of the start-URL key into their crawls.

    A list is taken from its head, a set at random, a sorted set lowest
    scores first. Taking moves the entries to a taking list in one step; they
    leave it only after they were submitted (at least once: a worker dying
    half-way makes the next tick submit them again, and the gate refuses the
    repeats).
    """
    key, client = rt.settings.start_urls_key, rt.redis
    taking = taking_key(key)
    items = scripts.register(client, "feed_take.lua")(keys=[key, taking], args=[batch])
    requests, rejected = [], []
    for raw in items:
        text = raw.decode("utf-8", errors="replace").strip()
        try:
            requests.append(judge(text, rt.settings.seed_crawl_id, rt.addresses,
                                  rt.settings.max_url_length))
        except BadInput as exc:
            rejected.append((text, exc))
    if requests and not _submit(rt, lock, fed, requests):
        return  # kept in the taking list: the next tick takes the same entries
    with rt.pipeline() as pipe:
        for text, exc in rejected:
            fed.refuse(f"an entry of {key}", exc)
            pipe.lpush(f"{key}:rejected", json.dumps({"item": text[:500], "error": str(exc)},
                                                     ensure_ascii=False))
        pipe.ltrim(f"{key}:rejected", 0, REJECTED_KEPT - 1)
        pipe.delete(taking)
        pipe.execute()


# -- seed_file ----------------------------------------------------------------

def feed_seed_file(rt: Runtime, lock: FeedLock, fed: Fed, batch: int) -> None:
    """Submit every line of ``CRAWLER_SEED_FILE``, ``batch`` seeds per gate call."""
    path = rt.settings.seed_file
    try:
        with open(path, "rb") as handle:
            requests = _file_requests(handle, path, rt.settings.seed_crawl_id, fed, rt.addresses,
                                      rt.settings.max_url_length)
            for chunk in _chunks(requests, batch):
                if not _submit(rt, lock, fed, chunk):
                    return
    except OSError as exc:
        raise FeedSourceUnavailable(f"seed file {path}: {exc.strerror or exc}") from None


def _file_requests(handle: IO[bytes], path: str, crawl_id: str, fed: Fed,
                   policy: AddressPolicy, max_url_length: int) -> Iterator[CrawlRequest]:
    for number, raw in _lines(handle):
        try:
            request = _line_request(raw, number, crawl_id, policy, max_url_length)
        except BadInput as exc:
            fed.refuse(f"{path}:{number}", exc)
            continue
        if request is not None:
            yield request


def _line_request(raw: bytes | None, number: int, crawl_id: str,
                  policy: AddressPolicy, max_url_length: int) -> CrawlRequest | None:
    """The request of one file line; None for a blank line or a comment."""
    if raw is None:
        raise BadInput(f"line longer than {MAX_LINE} bytes")
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise BadInput("not UTF-8") from None
    if number == 1:
        text = text.lstrip("\ufeff")
    if not text or text.startswith("#"):
        return None
    return judge(text, crawl_id, policy, max_url_length)


def _lines(handle: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes) of each line; None for a line over :data:`MAX_LINE` (not kept in memory)."""
    number = 0
    while raw := handle.readline(MAX_LINE + 1):
        number += 1
        if len(raw) > MAX_LINE:
            while raw and not raw.endswith(b"\n"):
                raw = handle.readline(MAX_LINE)
            yield number, None
        else:
            yield number, raw


# -- sitemaps -----------------------------------------------------------------

def feed_sitemaps(rt: Runtime, lock: FeedLock, fed: Fed, batch: int) -> None:
    """Submit the ``<loc>`` of every sitemap reachable from ``CRAWLER_SITEMAP_URLS``.

    A URL whose ``<lastmod>`` is newer than the one recorded when it was last
    fed goes with ``dont_filter`` (re-admitted); the others meet the gate.
    """
    crawl_id, settings = rt.settings.seed_crawl_id, rt.settings
    reader = SitemapReader(
        get=lambda url: fetch_sitemap(rt.session, url, timeout=settings.download_timeout),
        before_fetch=lock.renew)
    entries = _sitemap_requests(reader.entries(settings.sitemap_urls), crawl_id, fed, rt.addresses,
                                settings.max_url_length)
    for chunk in _chunks(entries, batch):
        chunk = _readmit_newer(rt, crawl_id, chunk)
        if not _submit(rt, lock, fed, [request for request, _ in chunk]):
            break
        _remember_lastmod(rt, crawl_id, chunk)
    for index_url, reason in reader.invalid:
        fed.refuse(f"a <loc> of the sitemap index {index_url}", reason)
    fed.sources_failed = len(reader.failed)
    if reader.failed and not reader.read:
        raise FeedSourceUnavailable(f"no sitemap could be read ({', '.join(reader.failed)[:300]})")


def _sitemap_requests(entries: Iterable[Entry], crawl_id: str, fed: Fed,
                      policy: AddressPolicy, max_url_length: int
                      ) -> Iterator[tuple[CrawlRequest, datetime | None]]:
    for entry in entries:
        try:
            [request] = build_requests([entry.loc], crawl_id=crawl_id, max_url_length=max_url_length)
            refuse_blocked([request], policy)
        except BadInput as exc:
            fed.refuse(f"a <loc> of {entry.sitemap}", exc)
            continue
        yield request, entry.lastmod


def _readmit_newer(rt: Runtime, crawl_id: str, chunk: list[tuple[CrawlRequest, datetime | None]]
                   ) -> list[tuple[CrawlRequest, datetime | None]]:
    """The chunk with ``dont_filter`` on where ``lastmod`` is newer than the recorded one.

    Keeps in each pair only a lastmod to record (new or newer), None otherwise.
    """
    recorded = rt.redis.zmscore(rt.keys.sitemap_lastmod(crawl_id), [r.fingerprint for r, _ in chunk])
    out = []
    for (request, lastmod), before in zip(chunk, recorded):
        if lastmod is None:
            out.append((request, None))
        elif before is None:
            out.append((request, lastmod))
        elif lastmod.timestamp() > before:
            out.append((request.replace(dont_filter=True), lastmod))
        else:
            out.append((request, None))
    return out


def _remember_lastmod(rt: Runtime, crawl_id: str,
                      chunk: list[tuple[CrawlRequest, datetime | None]]) -> None:
    """Record the chunk's new lastmod dates, keeping the ``CRAWLER_SITEMAP_LASTMOD_MAX`` newest.

    A URL whose date was dropped is gated as one the sitemap never dated: admitted if
    new, refused if seen, and its date recorded again.
    """
    dates = {r.fingerprint: lastmod.timestamp() for r, lastmod in chunk if lastmod is not None}
    if not dates:
        return
    key, keep = rt.keys.sitemap_lastmod(crawl_id), rt.settings.sitemap_lastmod_max
    with rt.pipeline() as pipe:
        pipe.zadd(key, dates)
        pipe.zremrangebyrank(key, 0, -(keep + 1))
        pipe.execute()


_BODIES: dict[str, Callable[[Runtime, FeedLock, Fed, int], None]] = {
    START_URLS: feed_start_urls, SEED_FILE: feed_seed_file, SITEMAPS: feed_sitemaps}


# -- status -------------------------------------------------------------------

def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def record(rt: Runtime, result: Tick) -> Tick:
    """Add one tick's outcome to its feed's status hash."""
    key = rt.keys.feed(result.feed)
    fields = {"last_tick": _now(), "last_outcome": result.describe()}
    if result.outcome == "skipped":
        counts = {counters.FEED_SKIPPED: 1, counters.feed_skipped(result.reason): 1}
    else:
        fed = result.fed or Fed(result.feed)
        counts = {counters.FEED_TICKS: 1, counters.FEED_FAILED: int(result.outcome == "failed"),
                  counters.FEED_ADMITTED: fed.admitted, counters.FEED_DUPLICATES: fed.duplicates,
                  counters.FEED_REFUSED: fed.invalid, counters.FEED_STOPPED_EARLY: int(bool(fed.stopped)),
                  counters.FEED_SITEMAPS_FAILED: fed.sources_failed}
    with rt.pipeline() as pipe:
        pipe.hset(key, mapping=fields)
        for name, amount in counts.items():
            pipe.hincrby(key, name, amount)
        pipe.execute()
    return result


def status(rt: Runtime, name: str) -> dict[str, Any]:
    """The feed's status: ``last_tick`` (ISO UTC), ``last_outcome`` and its counters (0 if never)."""
    raw = {k.decode(): v.decode() for k, v in rt.redis.hgetall(rt.keys.feed(name)).items()}
    out: dict[str, Any] = {"last_tick": None, "last_outcome": None, counters.FEED_TICKS: 0,
                           counters.FEED_ADMITTED: 0, counters.FEED_DUPLICATES: 0, counters.FEED_REFUSED: 0,
                           counters.FEED_SKIPPED: 0, counters.FEED_FAILED: 0}
    for field_name, value in raw.items():
        out[field_name] = int(value) if value.lstrip("-").isdigit() else value
    return out
