"""Every setting, its environment variable, default, unit and meaning: the one place.

Only :meth:`Settings.from_env` reads the environment. Components take a
:class:`Settings` (or plain values from it), never ``os.environ``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .addresses import parse_allowlist
from .errors import BadInput, SettingsError
from .program import parse_ordered, parse_plugins
from .render import wait_of

DEFAULT_BROKER_URL = "redis://localhost:6379/0"
DEFAULT_STORE = "./crawl-data/pages.db"
DOWNLOAD_TIMEOUT = 30.0
RETRY_BACKOFF_MAX = 60.0
POOLS = ("threads", "gevent", "prefork", "solo")
#: Tasks in flight per worker process by pool, where CRAWLER_WORKER_CONCURRENCY is unset.
POOL_CONCURRENCY = {"threads": 128, "gevent": 256, "prefork": os.cpu_count() or 1, "solo": 1}
PIPELINES = ("local", "split")
DEDUP_MODES = ("set", "bloom")


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


#: ``CRAWLER_TASK_EVENTS`` values.
EVENT_MODES = ("auto", "on", "off")


def _events(raw: str) -> str:
    """``auto``, or a boolean spelled as :func:`_bool` reads it, as ``on`` / ``off``."""
    value = raw.strip().lower()
    return "auto" if value == "auto" else ("on" if _bool(value) else "off")


def _number(raw: str) -> float:
    """A finite float ('nan' and 'inf' are refused)."""
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(raw)
    return value


def _csv(raw: str) -> tuple[str, ...]:
    return tuple(part.strip().lower() for part in raw.split(",") if part.strip())


def _render_wait(raw: str) -> str:
    """A wait condition of a rendered page (checked by :func:`~crawler_tasks.core.render.wait_of`)."""
    try:
        return wait_of(raw)
    except BadInput as exc:
        raise SettingsError(f"CRAWLER_RENDER_WAIT: {exc}") from None


def _proxies(raw: str) -> tuple[str, ...]:
    """A comma list of proxy URLs, or ``@path``: a file of them, one per line (``#`` comments)."""
    if raw.startswith("@"):
        try:
            with open(raw[1:], encoding="utf-8") as f:
                raw = ",".join(line.split("#", 1)[0].strip() for line in f)
        except OSError as exc:
            raise SettingsError(f"CRAWLER_PROXIES: cannot read {raw[1:]!r}: {exc.strerror}") from None
    urls = _list(raw)
    for url in urls:
        scheme, sep, rest = url.partition("://")
        if scheme.lower() not in ("http", "https") or not sep or not rest.strip("/"):
            shown = url.rsplit("@", 1)[-1]  # never echo credentials
            raise SettingsError(f"CRAWLER_PROXIES: {shown!r} is not an http:// or https:// proxy URL")
    return urls


def _allowlist(raw: str) -> tuple[str, ...]:
    """A comma list of host names, addresses and CIDRs, in normal form."""
    try:
        return parse_allowlist(_list(raw))
    except ValueError as exc:
        raise SettingsError(f"CRAWLER_PRIVATE_ALLOWLIST: {str(exc)!r} is not a host name, "
                            "an address or a CIDR") from None


def _pattern(raw: str) -> str:
    """A regular expression (checked here, compiled where it is used)."""
    try:
        re.compile(raw)
    except re.error as exc:
        raise SettingsError(f"CRAWLER_BAN_PATTERN: {raw!r} is not a valid regular expression: {exc}") from None
    return raw


def _plugins(raw: str) -> tuple[str, ...]:
    try:
        return parse_plugins(raw)
    except BadInput as exc:
        raise SettingsError(str(exc)) from None


def _ordered(setting: str) -> Callable[[str], tuple[str, ...]]:
    """A parser of ``dotted.path:priority`` entries, checked here, ordered where they are loaded."""
    def parse(raw: str) -> tuple[str, ...]:
        try:
            return tuple(f"{path}:{prio}" for path, prio in parse_ordered(raw, setting))
        except BadInput as exc:
            raise SettingsError(str(exc)) from None
    return parse


def _list(raw: str) -> tuple[str, ...]:
    """A comma list kept as written (URLs are case-sensitive past the host)."""
    return tuple(part.strip() for part in raw.split(",") if part.strip())


@dataclass(frozen=True)
class Spec:
    """One setting: its environment variable, parser, default and one-line meaning."""

    env: str
    attr: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    shown_default: str = ""

    def default_text(self) -> str:
        if self.shown_default:
            return self.shown_default
        value = ",".join(self.default) if isinstance(self.default, tuple) else self.default
        return f"`{value}`"

    def markdown_row(self) -> str:
        """This setting's row in the README's table."""
        return f"| `{self.env}` | {self.default_text()} | {self.doc} |"


SPECS: tuple[Spec, ...] = (
    Spec("CRAWLER_BROKER_URL", "broker_url", str, DEFAULT_BROKER_URL,
         "Celery broker: `redis://…`, `amqp://…`, or with TLS `rediss://…`, `amqps://…` "
         "(certificates verified; `?ssl_ca_certs=` names a CA file)."),
    Spec("CRAWLER_REDIS_URL", "redis_url", str, "",
         "Redis for the gate, stats, crawl tracking and claim checks; "
         "`redis+cluster://host:port` for a Redis Cluster.",
         "the broker URL when it is Redis, else `redis://localhost:6379/0`"),
    Spec("CRAWLER_WORKER_POOL", "worker_pool", str.lower, "threads",
         "Pool of `celery -A crawler_tasks worker` and of `crawler-tasks crawl` workers "
         "(`threads`, `gevent` with the `gevent` extra, `prefork`, `solo`); `-P` overrides it."),
    Spec("CRAWLER_WORKER_CONCURRENCY", "worker_concurrency", int, None,
         "Tasks in flight per worker process (threads, greenlets) or pool processes (prefork); "
         "`-c` overrides it. A threads pool starts a thread only when every one it has is busy, "
         "and a fetch whose host may not go yet waits in Redis, not in a thread: how many run "
         "is what the hosts' delay and concurrency allow, up to this. A broad crawl of hosts "
         "answering in a second needs about as many as hosts it keeps busy.",
         "by pool: `threads` 128, `gevent` 256, `prefork` the cores, `solo` 1"),
    Spec("CRAWLER_WORKER_MAX_MEMORY", "worker_max_memory", int, 1024,
         "MiB a prefork pool process may reach before it is replaced after its task "
         "(Celery's `worker_max_memory_per_child`; 0 = never). Threads workers are bounded "
         "instead by `CRAWLER_DOWNLOAD_LARGE_BODIES` and `CRAWLER_STORE_BATCH_BYTES`."),
    Spec("CRAWLER_MALLOC_ARENAS", "malloc_arenas", int, 2,
         "glibc malloc arenas of a worker process (`mallopt(M_ARENA_MAX)`, set at start; "
         "0 = glibc's own, 8 per core). With one arena per busy thread, freed pages and "
         "records stay spread over dozens of arenas and a threads worker's RSS doubled."),
    Spec("CRAWLER_PIPELINE", "pipeline", str.lower, "local",
         "`local`: parse in the task that fetched the page; `split`: a separate `crawl.parse` "
         "task (body by claim check), for parse-only nodes. Either way records reach the "
         "stores in batches through the store queue."),
    Spec("CRAWLER_STORE", "store", str, DEFAULT_STORE,
         "Store URI, or a comma-separated list (every record goes to each; reads use the "
         "first): a path or `sqlite:///path` (embedded SQLite), "
         "`elasticsearch[s]://[user:password@]host:9200/index`, "
         "`hbase://host:9090/table[?transport=framed&protocol=compact&prefix=]`, "
         "`warc:///dir` (WARC/1.1 archives, write-only)."),
    Spec("CRAWLER_STORE_BODY", "store_body", _bool, True,
         "Keep each page's body in its record (`body`: the text of HTML and text types, "
         "decoded with the detected encoding); 0 keeps metadata only."),
    Spec("CRAWLER_PLUGINS", "plugins", _plugins, (),
         "Comma list of modules every worker imports at start: their `@rule` extractors "
         "apply to every crawl that names none (`--plugins`); one that fails to import "
         "stops the worker (exit 2)."),
    Spec("CRAWLER_ITEM_PIPELINES", "item_pipelines", _ordered("CRAWLER_ITEM_PIPELINES"), (),
         "Comma list of `dotted.path:priority` item pipelines (a function `(item, page)` "
         "or a class with `process_item`), run in ascending priority on each item before "
         "its page's record goes to the stores."),
    Spec("CRAWLER_MIDDLEWARES", "middlewares", _ordered("CRAWLER_MIDDLEWARES"), (),
         "Comma list of `dotted.path:priority` request/response middlewares (a class, object "
         "or module with `process_request` and/or `process_response`): requests pass them in "
         "ascending priority before the download, responses in descending priority after it."),
    Spec("CRAWLER_ERROR_HANDLER", "error_handler", str, "",
         "Dotted path of a function called with every failure (download, middleware, rule, "
         "pipeline, store) after the crawler recorded and counted it; it may return "
         "follow-up requests. Empty: none."),
    Spec("CRAWLER_RESULT_BACKEND", "result_backend", str, "",
         "Celery result backend URL (`redis://...`) where `crawl.page` keeps its results, for "
         "an app that waits on them (`group(...).get()`, `chord`); empty: none (chains need "
         "none). The crawl's other tasks keep no results."),
    Spec("CRAWLER_MAX_ITEMS_PER_PAGE", "max_items_per_page", int, 1000,
         "Items kept from one page; the rest are counted (`items/over_cap`), not stored."),
    Spec("CRAWLER_STATS_FLUSH_S", "stats_flush_s", _number, 30.0,
         "Seconds between Beat's writes of each crawl's counters to the stores that keep "
         "statistics (Elasticsearch: `<index>-stats`)."),
    Spec("CRAWLER_WARC_MAX_BYTES", "warc_max_bytes", int, 1024**3,
         "Size past which a `warc://` store starts the worker process's next WARC file."),
    Spec("CRAWLER_ES_API_KEY", "es_api_key", str, "",
         "API key for an `elasticsearch://` store (instead of `user:password@` in its URI)."),
    Spec("CRAWLER_DOWNLOAD_TIMEOUT", "download_timeout", _number, None,
         "Seconds one download may take in all: connect, headers and the whole body.",
         f"`{DOWNLOAD_TIMEOUT}`, or half of `CRAWLER_VISIBILITY_TIMEOUT` if that is less"),
    Spec("CRAWLER_MAX_DEPTH", "max_depth", int, 0,
         "Links deeper than this many hops from a seed are not followed; 0 = unlimited."),
    Spec("CRAWLER_MAX_RETRIES", "max_retries", int, 2,
         "Retries after a connection error, timeout, 408, 429 or 5xx."),
    Spec("CRAWLER_DOWNLOAD_MAXSIZE", "download_maxsize", int, 10 * 1024 * 1024,
         "Bytes of a body kept; a longer body is truncated and the record says so."),
    Spec("CRAWLER_DOWNLOAD_LARGE_BODIES", "download_large_bodies", int, 2,
         "Bodies over 1 MiB one worker process holds at once (downloading, parsing, queueing "
         "or writing one to a store); a download growing past 1 MiB waits for a free slot, "
         "its timeout paused."),
    Spec("CRAWLER_ALLOWED_DOMAINS", "allowed_domains", _csv, (),
         "Comma list of domains links may go to (subdomains included).",
         "the hosts of the seeds of each crawl"),
    Spec("CRAWLER_VISIBILITY_TIMEOUT", "visibility_timeout", int, 3600,
         "Seconds before a Redis-broker message taken by a dead worker is redelivered."),
    Spec("CRAWLER_DOWNLOAD_DELAY", "download_delay", _number, 1.0,
         "Seconds between the starts of two requests to one host (`host:port`; subdomains "
         "count apart), across every worker; robots.txt `Crawl-delay` and back-off raise it."),
    Spec("CRAWLER_HOST_CONCURRENCY", "host_concurrency", int, 2,
         "Requests in flight to one host across every worker and node; 0 = no cap. A fetch "
         "that may not go yet waits in Redis, not in a worker."),
    Spec("CRAWLER_ROBOTSTXT_OBEY", "robotstxt_obey", _bool, True,
         "Fetch each origin's robots.txt once (cached in Redis for the cluster), obey its "
         "rules for `CRAWLER_USER_AGENT` and its `Crawl-delay`."),
    Spec("CRAWLER_ROBOTSTXT_TTL", "robotstxt_ttl", _number, 86400.0,
         "Seconds a fetched robots.txt is kept before it is fetched again."),
    Spec("CRAWLER_AUTOTHROTTLE", "autothrottle", _bool, False,
         "Adapt each host's delay to its latency (Scrapy's AutoThrottle): half-way towards "
         "latency / `CRAWLER_AUTOTHROTTLE_TARGET_CONCURRENCY` after each response, never "
         "below `CRAWLER_DOWNLOAD_DELAY`."),
    Spec("CRAWLER_AUTOTHROTTLE_TARGET_CONCURRENCY", "autothrottle_target_concurrency", _number, 1.0,
         "Requests AutoThrottle aims to have in flight to each host on average."),
    Spec("CRAWLER_AUTOTHROTTLE_START_DELAY", "autothrottle_start_delay", _number, 5.0,
         "AutoThrottle's delay for a host it has no latency of yet (seconds)."),
    Spec("CRAWLER_AUTOTHROTTLE_MAX_DELAY", "autothrottle_max_delay", _number, 60.0,
         "Longest delay AutoThrottle sets (seconds)."),
    Spec("CRAWLER_PROXIES", "proxies", _proxies, (),
         "Comma list (or `@file`, one per line) of `http://[user:password@]host:port` proxies. "
         "Requests go direct; a host showing blocking signs is crawled through them, rotating "
         "per host. Credentials never reach records, logs, stats or task arguments.", "none"),
    Spec("CRAWLER_BAN_PATTERN", "ban_pattern", _pattern, "",
         "Regular expression that marks a response body as a ban page (a blocking sign, like "
         "a 403, a 429 or a connection reset); empty = none."),
    Spec("CRAWLER_BAN_THRESHOLD", "ban_threshold", int, 3,
         "Blocking signs from one host in a row (no good answer between) that switch it to "
         "the proxies (when `CRAWLER_PROXIES` is set)."),
    Spec("CRAWLER_PROXY_BENCH_S", "proxy_bench_s", _number, 300.0,
         "Seconds a proxy that failed (refused, reset, 407, 5xx from the proxy) is left out."),
    Spec("CRAWLER_USER_AGENT", "user_agent", str,
         "crawler-tasks/0.1 (+https://pypi.org/project/crawler-tasks/)",
         "User-Agent header of every request."),
    Spec("CRAWLER_REDIRECT_MAX_TIMES", "redirect_max_times", int, 20,
         "Redirect hops followed from one request before it fails."),
    Spec("CRAWLER_REDIRECT_PRIORITY_ADJUST", "redirect_priority_adjust", int, 2,
         "Added to a request's priority for its redirect target (higher = sooner)."),
    Spec("CRAWLER_RETRY_PRIORITY_ADJUST", "retry_priority_adjust", int, -1,
         "Added to a request's priority on each retry."),
    Spec("CRAWLER_RETRY_BACKOFF", "retry_backoff", _number, 1.0,
         "Seconds before the first retry; doubles on each retry. The host's delay counts towards "
         "it (a retry is sent no sooner than this after the failed request)."),
    Spec("CRAWLER_RETRY_BACKOFF_MAX", "retry_backoff_max", _number, None,
         "Longest wait before a retry, `Retry-After` included (seconds); with a Redis broker "
         "it must stay below the visibility timeout.",
         f"`{RETRY_BACKOFF_MAX}`, or half of `CRAWLER_VISIBILITY_TIMEOUT` if that is less"),
    Spec("CRAWLER_STORE_MAX_RETRIES", "store_max_retries", int, 20,
         "Retries of a store batch while its backend is down (backoff capped as above); "
         "then its records go to the dead letters."),
    Spec("CRAWLER_DEAD_LETTERS_MAX", "dead_letters_max", int, 10_000,
         "Dead letters kept at most (each up to tens of KB in Redis); past it a record no store took "
         "is logged and counted under store/dead_letters_dropped instead."),
    Spec("CRAWLER_STORE_BATCH", "store_batch", int, 200,
         "Records written to a store in one request (an Elasticsearch `_bulk`, an HBase "
         "`Table.batch()`, one SQLite transaction)."),
    Spec("CRAWLER_STORE_BATCH_BYTES", "store_batch_bytes", int, 16 * 1024 * 1024,
         "Bytes of records a worker takes from the store queue and writes in one request, at "
         "most (a larger record goes alone)."),
    Spec("CRAWLER_STORE_FLUSH_S", "store_flush_s", _number, 1.0,
         "Longest a record waits in the store queue for its batch to fill (seconds); a batch "
         "also goes as soon as nothing more arrives."),
    Spec("CRAWLER_STORE_LEASE_S", "store_lease_s", _number, 30.0,
         "Seconds a store task (a writer) keeps its batch without a sign of life (it renews "
         "it while alive); then the batch goes back to the queue, e.g. after a SIGKILL, and "
         "a writer whose task never ran is replaced."),
    Spec("CRAWLER_STORE_WRITERS", "store_writers", int, 2,
         "Store tasks (`crawl.store_batch`, one batch each) at work or queued at once, in "
         "the whole cluster; more go only while full batches wait for them."),
    Spec("CRAWLER_MAX_LINKS_PER_PAGE", "max_links_per_page", int, 1000,
         "Links followed from one page (after de-duplication, in document order); the rest "
         "are counted (`links/over_cap`), not queued, so one page cannot flood the frontier."),
    Spec("CRAWLER_MAX_URL_LENGTH", "max_url_length", int, 8192,
         "Bytes of the longest URL crawled (UTF-8, percent-encoded as sent): a longer link is "
         "counted (`links/too_long`), not queued; a longer seed or redirect target is refused."),
    Spec("CRAWLER_MAX_IDLE_CONNECTIONS", "max_idle_connections", int, 256,
         "Idle keep-alive connections one worker process keeps open, at most: each of its "
         "threads keeps its `CRAWLER_MAX_IDLE_CONNECTIONS / CRAWLER_WORKER_CONCURRENCY` (at "
         "least 1) most recent hosts, so a broad crawl cannot run out of file descriptors."),
    Spec("CRAWLER_DENY_PRIVATE_NETWORKS", "deny_private_networks", _bool, True,
         "Refuse to connect to loopback, private, link-local, CGNAT, multicast and reserved "
         "addresses (IPv4 inside IPv6, e.g. NAT64 or 6to4, judged as the IPv4) unless "
         "`CRAWLER_PRIVATE_ALLOWLIST` allows them: fetches, redirects, robots.txt, sitemaps, "
         "through proxies too. Hosts are resolved and judged before any packet is sent. "
         "Cloud-metadata addresses are refused even when this is 0."),
    Spec("CRAWLER_PRIVATE_ALLOWLIST", "private_allowlist", _allowlist, (),
         "Comma list of host names, addresses and CIDRs (`intranet.example,10.1.0.0/16,::1`) "
         "that may be reached although private. A cloud-metadata address only when named "
         "exactly (its address, or the URL's host name). `crawler-tasks crawl` and `demo` "
         "add the hosts of their seeds.", "none"),
    Spec("CRAWLER_RENDER_HOSTS", "render_hosts", _csv, (),
         "Comma list of hosts (their subdomains too; `*` for every host) whose pages are "
         "rendered in a browser by the `crawl.render` workers, as if each request said "
         "`render=True`.", "none"),
    Spec("CRAWLER_RENDER_BROWSER", "render_browser", str, "/usr/bin/chromium",
         "The Chromium executable render workers drive through Playwright (Debian's "
         "`chromium` package installs it here)."),
    Spec("CRAWLER_RENDER_WAIT", "render_wait", _render_wait, "load",
         "When a rendered page is read: `load`, `domcontentloaded`, `networkidle` (no request "
         "for 500 ms), or a CSS selector to appear after `load`; a request's "
         "`meta[\"render_wait\"]` says otherwise for its page."),
    Spec("CRAWLER_RENDER_TIMEOUT_S", "render_timeout_s", _number, 15.0,
         "Seconds a page has to reach its wait condition; past it the DOM is read as it "
         "stands (the record says so), or the page fails if its scripts hold the browser."),
    Spec("CRAWLER_RENDER_BLOCK", "render_block", _csv, ("image", "font", "media"),
         "Kinds of subresource a rendered page may not load (Playwright's resource types: "
         "`image`, `font`, `media`, `stylesheet`...); counted as blocked."),
    Spec("CRAWLER_RENDER_MAX_REQUESTS", "render_max_requests", int, 200,
         "Requests one rendered page may make (its document, scripts, XHR...); past it they "
         "are refused and counted."),
    Spec("CRAWLER_RENDER_PAGES_PER_BROWSER", "render_pages_per_browser", int, 500,
         "Pages a browser renders before it is replaced by a fresh one (its pages at work "
         "finish first), so a long crawl's memory stays flat."),
    Spec("CRAWLER_RENDER_BROWSER_MAX_MIB", "render_browser_max_mib", int, 2048,
         "MiB a browser's processes hold (their proportional set size: pages they share "
         "counted once) past which it is replaced after its pages at work finish (measured "
         "every ten pages)."),
    Spec("CRAWLER_START_URLS_KEY", "start_urls_key", str, "",
         "Redis key other programs push seeds onto (a list, set or sorted set: URLs or "
         "JSON seed objects), drained by Beat's `crawl.feed`.",
         "`<CRAWLER_KEY_PREFIX>:start_urls`"),
    Spec("CRAWLER_START_URLS_BATCH", "start_urls_batch", int, 500,
         "Start-URL entries taken per `crawl.feed` tick."),
    Spec("CRAWLER_START_URLS_INTERVAL", "start_urls_interval", _number, 5.0,
         "Seconds between Beat's `crawl.feed` ticks."),
    Spec("CRAWLER_DEDUP", "dedup", str.lower, "set",
         "Gate of each crawl: `set` (exact, a Redis SET, about 80 bytes per URL) or `bloom` "
         "(a scalable Bloom filter on Redis bitmaps, about 2 bytes per URL; may refuse a new "
         "URL at `CRAWLER_BLOOM_ERROR_RATE`)."),
    Spec("CRAWLER_BLOOM_CAPACITY", "bloom_capacity", int, 10_000_000,
         "URLs the first Bloom slice of a crawl holds at its error rate; past it the filter "
         "adds larger slices with tighter rates, so the bound holds as it grows."),
    Spec("CRAWLER_BLOOM_ERROR_RATE", "bloom_error_rate", _number, 0.001,
         "Bound on the share of new URLs a Bloom gate wrongly refuses as seen."),
    Spec("CRAWLER_RECRAWL_AFTER", "recrawl_after", _number, 0.0,
         "Seconds after which an admitted URL passes the gate again (re-fetched with "
         "`If-None-Match`/`If-Modified-Since`); 0 = never."),
    Spec("CRAWLER_MAX_QUEUED", "max_queued", int, 0,
         "While more fetches than this wait in the broker, feeds skip their tick and "
         "`submit()` raises `QueueFull`; 0 = no cap."),
    Spec("CRAWLER_SEED_FILE", "seed_file", str, "",
         "File of seeds (URLs or JSON seed objects, one per line) Beat feeds every "
         "`CRAWLER_SEED_INTERVAL` s; empty = off."),
    Spec("CRAWLER_SEED_INTERVAL", "seed_interval", _number, 300.0,
         "Seconds between Beat's feeds of `CRAWLER_SEED_FILE` and `CRAWLER_SITEMAP_URLS`."),
    Spec("CRAWLER_SITEMAP_URLS", "sitemap_urls", _list, (),
         "Comma list of sitemap.xml URLs (indexes and `.xml.gz` too) Beat feeds; a newer "
         "`lastmod` re-admits a URL."),
    Spec("CRAWLER_SITEMAP_LASTMOD_MAX", "sitemap_lastmod_max", int, 1_000_000,
         "`lastmod` dates remembered per crawl for the sitemap feed (about 100 bytes each in "
         "Redis); past it the oldest dates are dropped, and such a URL is gated as if new to "
         "the sitemap."),
    Spec("CRAWLER_KAFKA_SEEDS", "kafka_seeds", str, "",
         "Kafka topics `crawler-tasks feed kafka` consumes seeds from, with its consumer group: "
         "`kafka://host:9092/seeds?group=crawler-seeds` (several servers and topics by commas; "
         "`kafkas://` for TLS, `user:password@` for SASL; see docs/feeds.md); empty = off."),
    Spec("CRAWLER_SEED_CRAWL_ID", "seed_crawl_id", str, "default",
         "Crawl id of the seeds Beat's feeds enqueue, unless a seed names its own."),
    Spec("CRAWLER_TEXT_MAXSIZE", "text_maxsize", int, 65536,
         "Characters of visible text kept per page."),
    Spec("CRAWLER_CLAIM_TTL", "claim_ttl", int, 86400,
         "Seconds a fetched body waits in Redis for its parse task (split pipeline)."),
    Spec("CRAWLER_CRAWL_REFRESH_S", "crawl_refresh_s", _number, 5.0,
         "Seconds a worker keeps a crawl's configuration and state (domains, limits, paused, "
         "cancelled) before reading it from Redis again: a pause or cancel reaches every "
         "worker within this."),
    Spec("CRAWLER_KEY_PREFIX", "key_prefix", str, "crawler",
         "Prefix of every Redis key this package writes."),
    Spec("CRAWLER_STATE_MAX_RETRIES", "state_max_retries", int, 10,
         "Times a task runs again in place after its state Redis failed and answered again; "
         "while the state is down the task waits holding its message, and then the message "
         "goes back to the broker: never failed, never lost."),
    Spec("CRAWLER_STALL_TIMEOUT", "stall_timeout", _number, 300.0,
         "`crawler-tasks crawl` gives up (exit 1, saying what is stuck) when nothing moved "
         "this many seconds while work was outstanding."),
    Spec("CRAWLER_TASK_EVENTS", "task_events", _events, "auto",
         "Task events for Flower: `auto` sends them from a worker's start when a monitor "
         "(Flower, `celery events`) listens then, and from the moment one asks otherwise "
         "(Flower asks every few seconds), always on RabbitMQ (no way to see a listener); "
         "`1` always, `0` only when a monitor asks. They cost about 1.5 ms of CPU and "
         "2.6 KB of broker traffic per page."),
)


_DEFAULTS: dict[str, Any] = {spec.attr: spec.default for spec in SPECS}


@dataclass(frozen=True)
class Settings:
    """The crawler's configuration; build it with :meth:`from_env` or directly in tests."""

    broker_url: str = _DEFAULTS["broker_url"]
    redis_url: str = _DEFAULTS["redis_url"]
    store: str = _DEFAULTS["store"]
    es_api_key: str = _DEFAULTS["es_api_key"]
    warc_max_bytes: int = _DEFAULTS["warc_max_bytes"]
    store_body: bool = _DEFAULTS["store_body"]
    stats_flush_s: float = _DEFAULTS["stats_flush_s"]
    download_timeout: float = _DEFAULTS["download_timeout"]  # None: derived, see __post_init__
    max_depth: int = _DEFAULTS["max_depth"]
    max_retries: int = _DEFAULTS["max_retries"]
    download_maxsize: int = _DEFAULTS["download_maxsize"]
    download_large_bodies: int = _DEFAULTS["download_large_bodies"]
    allowed_domains: tuple[str, ...] = _DEFAULTS["allowed_domains"]
    visibility_timeout: int = _DEFAULTS["visibility_timeout"]
    user_agent: str = _DEFAULTS["user_agent"]
    download_delay: float = _DEFAULTS["download_delay"]
    host_concurrency: int = _DEFAULTS["host_concurrency"]
    robotstxt_obey: bool = _DEFAULTS["robotstxt_obey"]
    robotstxt_ttl: float = _DEFAULTS["robotstxt_ttl"]
    autothrottle: bool = _DEFAULTS["autothrottle"]
    autothrottle_target_concurrency: float = _DEFAULTS["autothrottle_target_concurrency"]
    autothrottle_start_delay: float = _DEFAULTS["autothrottle_start_delay"]
    autothrottle_max_delay: float = _DEFAULTS["autothrottle_max_delay"]
    proxies: tuple[str, ...] = dataclasses.field(default=_DEFAULTS["proxies"], repr=False)
    ban_pattern: str = _DEFAULTS["ban_pattern"]
    ban_threshold: int = _DEFAULTS["ban_threshold"]
    proxy_bench_s: float = _DEFAULTS["proxy_bench_s"]
    redirect_max_times: int = _DEFAULTS["redirect_max_times"]
    redirect_priority_adjust: int = _DEFAULTS["redirect_priority_adjust"]
    retry_priority_adjust: int = _DEFAULTS["retry_priority_adjust"]
    retry_backoff: float = _DEFAULTS["retry_backoff"]
    retry_backoff_max: float = _DEFAULTS["retry_backoff_max"]  # None: derived
    store_max_retries: int = _DEFAULTS["store_max_retries"]
    dead_letters_max: int = _DEFAULTS["dead_letters_max"]
    store_batch: int = _DEFAULTS["store_batch"]
    store_batch_bytes: int = _DEFAULTS["store_batch_bytes"]
    store_flush_s: float = _DEFAULTS["store_flush_s"]
    store_lease_s: float = _DEFAULTS["store_lease_s"]
    store_writers: int = _DEFAULTS["store_writers"]
    max_links_per_page: int = _DEFAULTS["max_links_per_page"]
    plugins: tuple[str, ...] = _DEFAULTS["plugins"]
    item_pipelines: tuple[str, ...] = _DEFAULTS["item_pipelines"]
    middlewares: tuple[str, ...] = _DEFAULTS["middlewares"]
    error_handler: str = _DEFAULTS["error_handler"]
    result_backend: str = dataclasses.field(default=_DEFAULTS["result_backend"], repr=False)
    max_items_per_page: int = _DEFAULTS["max_items_per_page"]
    max_url_length: int = _DEFAULTS["max_url_length"]
    max_idle_connections: int = _DEFAULTS["max_idle_connections"]
    deny_private_networks: bool = _DEFAULTS["deny_private_networks"]
    private_allowlist: tuple[str, ...] = _DEFAULTS["private_allowlist"]
    render_hosts: tuple[str, ...] = _DEFAULTS["render_hosts"]
    render_browser: str = _DEFAULTS["render_browser"]
    render_wait: str = _DEFAULTS["render_wait"]
    render_timeout_s: float = _DEFAULTS["render_timeout_s"]
    render_block: tuple[str, ...] = _DEFAULTS["render_block"]
    render_max_requests: int = _DEFAULTS["render_max_requests"]
    render_pages_per_browser: int = _DEFAULTS["render_pages_per_browser"]
    render_browser_max_mib: int = _DEFAULTS["render_browser_max_mib"]
    start_urls_key: str = _DEFAULTS["start_urls_key"]
    start_urls_batch: int = _DEFAULTS["start_urls_batch"]
    start_urls_interval: float = _DEFAULTS["start_urls_interval"]
    dedup: str = _DEFAULTS["dedup"]
    bloom_capacity: int = _DEFAULTS["bloom_capacity"]
    bloom_error_rate: float = _DEFAULTS["bloom_error_rate"]
    recrawl_after: float = _DEFAULTS["recrawl_after"]
    max_queued: int = _DEFAULTS["max_queued"]
    seed_file: str = _DEFAULTS["seed_file"]
    kafka_seeds: str = _DEFAULTS["kafka_seeds"]
    crawl_refresh_s: float = _DEFAULTS["crawl_refresh_s"]
    seed_interval: float = _DEFAULTS["seed_interval"]
    sitemap_urls: tuple[str, ...] = _DEFAULTS["sitemap_urls"]
    sitemap_lastmod_max: int = _DEFAULTS["sitemap_lastmod_max"]
    seed_crawl_id: str = _DEFAULTS["seed_crawl_id"]
    text_maxsize: int = _DEFAULTS["text_maxsize"]
    claim_ttl: int = _DEFAULTS["claim_ttl"]
    key_prefix: str = _DEFAULTS["key_prefix"]
    task_events: str = _DEFAULTS["task_events"]
    worker_pool: str = _DEFAULTS["worker_pool"]
    worker_concurrency: int = _DEFAULTS["worker_concurrency"]  # None: by pool, see __post_init__
    worker_max_memory: int = _DEFAULTS["worker_max_memory"]
    malloc_arenas: int = _DEFAULTS["malloc_arenas"]
    pipeline: str = _DEFAULTS["pipeline"]
    state_max_retries: int = _DEFAULTS["state_max_retries"]
    stall_timeout: float = _DEFAULTS["stall_timeout"]
    _derived: tuple[str, ...] = dataclasses.field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        allowlist = self.private_allowlist
        object.__setattr__(self, "private_allowlist",
                           _allowlist(allowlist if isinstance(allowlist, str) else ",".join(allowlist)))
        if not self.redis_url:
            fallback = self.broker_url if self.broker_is_redis else DEFAULT_BROKER_URL
            object.__setattr__(self, "redis_url", fallback)
        self._derive_from_visibility_timeout()
        if self.worker_concurrency is None:  # (an unknown pool is refused below)
            object.__setattr__(self, "worker_concurrency", POOL_CONCURRENCY.get(self.worker_pool, 1))
            object.__setattr__(self, "_derived", (*self._derived, "worker_concurrency"))
        for name in ("download_timeout", "visibility_timeout", "download_maxsize", "claim_ttl", "crawl_refresh_s"):
            if getattr(self, name) <= 0:
                raise SettingsError(f"{name}: must be greater than 0")
        for name in ("max_depth", "max_retries", "redirect_max_times", "store_max_retries",
                     "state_max_retries", "max_links_per_page", "max_items_per_page", "worker_max_memory",
                     "recrawl_after", "max_queued", "download_delay", "host_concurrency",
                     "autothrottle_start_delay"):
            if getattr(self, name) < 0:
                raise SettingsError(f"{name}: must be 0 or more")
        if not self.start_urls_key:
            object.__setattr__(self, "start_urls_key", f"{self.key_prefix}:start_urls")
            object.__setattr__(self, "_derived", (*self._derived, "start_urls_key"))
        for name in ("worker_concurrency", "stall_timeout", "start_urls_batch", "start_urls_interval",
                     "seed_interval", "bloom_capacity", "stats_flush_s", "warc_max_bytes",
                     "store_batch", "store_flush_s", "store_lease_s", "store_writers", "robotstxt_ttl",
                     "dead_letters_max",
                     "autothrottle_target_concurrency", "autothrottle_max_delay", "ban_threshold",
                     "proxy_bench_s", "max_url_length", "max_idle_connections",
                     "sitemap_lastmod_max", "render_timeout_s", "render_max_requests",
                     "render_pages_per_browser", "render_browser_max_mib"):
            if getattr(self, name) <= 0:
                raise SettingsError(f"{name}: must be greater than 0")
        if self.malloc_arenas < 0:
            raise SettingsError("malloc_arenas: must be 0 or more")
        for name in ("download_large_bodies", "store_batch_bytes"):  # memory bounds
            if getattr(self, name) <= 0:
                raise SettingsError(f"{name}: must be greater than 0")
        if not 0 < self.bloom_error_rate < 1:
            raise SettingsError("bloom_error_rate: must be between 0 and 1")
        for name, allowed in (("worker_pool", POOLS), ("pipeline", PIPELINES), ("dedup", DEDUP_MODES),
                              ("task_events", EVENT_MODES)):
            if getattr(self, name) not in allowed:
                raise SettingsError(f"{name}: {getattr(self, name)!r} is not one of {', '.join(allowed)}")
        if self.broker_is_redis and self.retry_backoff_max >= self.visibility_timeout:
            # A retry waiting on its countdown is an unacked message: past the
            # visibility timeout the broker hands it to another worker as well.
            # Only a value the user set gets here: the default is derived below it.
            raise SettingsError("retry_backoff_max: must be below visibility_timeout "
                                f"({self.retry_backoff_max} >= {self.visibility_timeout}); "
                                "unset CRAWLER_RETRY_BACKOFF_MAX to derive it")

    def _derive_from_visibility_timeout(self) -> None:
        """Defaults that must fit inside the visibility timeout, where the user left them unset.

        A task (its download included) and a retry's countdown must end well
        before a Redis broker hands the message to another worker.
        """
        vt = self.visibility_timeout
        half = vt / 2 if isinstance(vt, (int, float)) and vt > 0 else math.inf  # else refused below
        derived = []
        for name, ceiling in (("download_timeout", DOWNLOAD_TIMEOUT),
                              ("retry_backoff_max", RETRY_BACKOFF_MAX)):
            if getattr(self, name) is None:
                object.__setattr__(self, name, min(ceiling, half))
                derived.append(name)
        object.__setattr__(self, "_derived", tuple(derived))

    @property
    def replay_ttl(self) -> int:
        """Seconds a task's admitted children are remembered for its redelivery."""
        return self.visibility_timeout + int(self.retry_backoff_max) + 600

    @property
    def state_hold_s(self) -> float:
        """Seconds a task waits for a failed state Redis while holding its message: below
        the time after which the broker hands an unacked message to another worker (half
        the visibility timeout on Redis; RabbitMQ's default consumer timeout is 30 min)."""
        return self.visibility_timeout / 2 if self.broker_is_redis else 900.0

    @property
    def redis_max_connections(self) -> int:
        """Connections each process may open to the state Redis (threads share them)."""
        return self.worker_concurrency + 16

    @property
    def idle_connections_per_thread(self) -> int:
        """Hosts whose idle connection each worker thread's session keeps open."""
        return max(1, self.max_idle_connections // self.worker_concurrency)

    @property
    def broker_is_redis(self) -> bool:
        return self.broker_url.startswith(("redis://", "rediss://", "redis+socket://"))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read every ``CRAWLER_*`` variable (unset or empty = default); ``overrides`` win."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for spec in SPECS:
            raw = environ.get(spec.env, "").strip()
            if not raw:
                continue
            try:
                values[spec.attr] = spec.parse(raw)
            except ValueError:
                kind = {int: "integer", _number: "number", _bool: "boolean (1/0)"}.get(spec.parse, "value")
                raise SettingsError(f"{spec.env}: {raw!r} is not a valid {kind}") from None
        values.update(overrides)
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes``; defaults that were derived are derived again."""
        rederive: dict[str, Any] = {name: None for name in self._derived if name not in changes}
        return dataclasses.replace(self, **rederive, **changes)

    def to_env(self) -> dict[str, str]:
        """The environment that makes :meth:`from_env` rebuild these settings (for child processes)."""
        env = {}
        for spec in SPECS:
            value = getattr(self, spec.attr)
            if spec.attr in self._derived:
                value = ""  # derived again on the other side
            elif isinstance(value, tuple):
                value = ",".join(value)
            elif isinstance(value, bool):
                value = "1" if value else "0"
            env[spec.env] = str(value)
        return env
