"""Every setting, its environment variable, default, unit, meaning and bounds: the one place.

:data:`SPECS` declares each setting once; :class:`~crawler_tasks.core.settings.Settings`
has one typed field for each, reads them from the environment and checks each value
against its :class:`Spec`'s bounds.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .setting_types import (
    _allowlist,
    _bool,
    _csv,
    _events,
    _list,
    _number,
    _ordered,
    _pattern,
    _plugins,
    _proxies,
    _render_wait,
)

DEFAULT_BROKER_URL = "redis://localhost:6379/0"
DEFAULT_STORE = "./crawl-data/pages.db"
DOWNLOAD_TIMEOUT = 30.0
RETRY_BACKOFF_MAX = 60.0
POOLS = ("threads", "gevent", "prefork", "solo")
#: Tasks in flight per worker process by pool, where CRAWLER_WORKER_CONCURRENCY is unset.
POOL_CONCURRENCY = {"threads": 128, "gevent": 256, "prefork": os.cpu_count() or 1, "solo": 1}
PIPELINES = ("local", "split")
DEDUP_MODES = ("set", "bloom")
#: What a worker does with a near-duplicate page ("": it does not look for them).
NEAR_DUPLICATE_MODES = ("", "mark", "nofollow", "nobody")
#: ``CRAWLER_TASK_EVENTS`` values.
EVENT_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class Spec:
    """One setting: its environment variable, parser, default, meaning, and bounds (``gt``: greater
    than; ``ge``: that or more; ``gt`` with ``lt``: strictly between; ``choices``: one of them)."""

    env: str
    attr: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    shown_default: str = ""
    _: dataclasses.KW_ONLY
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    choices: tuple[str, ...] = ()

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` for this setting (the error past its name), or None."""
        if self.gt is not None and self.lt is not None:
            if not self.gt < value < self.lt:
                return f"must be between {self.gt} and {self.lt}"
        elif self.gt is not None and value <= self.gt:
            return f"must be greater than {self.gt}"
        if self.ge is not None and value < self.ge:
            return f"must be {self.ge} or more"
        if self.choices and value not in self.choices:
            return f"{value!r} is not one of {', '.join(self.choices)}"
        return None

    def default_text(self) -> str:
        """The default as the docs table shows it."""
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
         "(`threads`, `gevent` with the `gevent` extra, `prefork`, `solo`); `-P` overrides it.", choices=POOLS),
    Spec("CRAWLER_WORKER_CONCURRENCY", "worker_concurrency", int, None,
         "Tasks in flight per worker process (threads, greenlets) or pool processes (prefork); "
         "`-c` overrides it. A threads pool starts a thread only when every one it has is busy, "
         "and a fetch whose host may not go yet waits in Redis, not in a thread: how many run "
         "is what the hosts' delay and concurrency allow, up to this. A broad crawl of hosts "
         "answering in a second needs about as many as hosts it keeps busy.",
         "by pool: `threads` 128, `gevent` 256, `prefork` the cores, `solo` 1", gt=0),
    Spec("CRAWLER_WORKER_MAX_MEMORY", "worker_max_memory", int, 1024,
         "MiB a prefork pool process may reach before it is replaced after its task "
         "(Celery's `worker_max_memory_per_child`; 0 = never). Threads workers are bounded "
         "instead by `CRAWLER_DOWNLOAD_LARGE_BODIES` and `CRAWLER_STORE_BATCH_BYTES`.", ge=0),
    Spec("CRAWLER_MALLOC_ARENAS", "malloc_arenas", int, 2,
         "glibc malloc arenas of a worker process (`mallopt(M_ARENA_MAX)`, set at start; "
         "0 = glibc's own, 8 per core). With one arena per busy thread, freed pages and "
         "records stay spread over dozens of arenas and a threads worker's RSS doubled.", ge=0),
    Spec("CRAWLER_PIPELINE", "pipeline", str.lower, "local",
         "`local`: parse in the task that fetched the page; `split`: a separate `crawl.parse` "
         "task (body by claim check), for parse-only nodes. Either way records reach the "
         "stores in batches through the store queue.", choices=PIPELINES),
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
         "Items kept from one page; the rest are counted (`items/over_cap`), not stored.", ge=0),
    Spec("CRAWLER_LOG_PAGES", "log_pages", _bool, True,
         "Log a line per response at INFO in the worker (`fetched 200 GET <url> 123 ms 20.1 KB`, "
         "as Scrapy's `Crawled (200)`), and per download failure; Celery's INFO lines per task "
         "received and per fetch that succeeded are then left out (its line per other task "
         "ended stays, with the task's result). "
         "`crawler-tasks crawl` workers log at INFO to the crawl's worker log."),
    Spec("CRAWLER_LOG_STATS_S", "log_stats_s", _number, 60.0,
         "Seconds between a worker process's INFO lines of its pages per minute (Scrapy's "
         "LogStats); 0 = none.", ge=0),
    Spec("CRAWLER_STATS_FLUSH_S", "stats_flush_s", _number, 30.0,
         "Seconds between Beat's writes of each crawl's counters to the stores that keep "
         "statistics (Elasticsearch: `<index>-stats`).", gt=0),
    Spec("CRAWLER_WARC_MAX_BYTES", "warc_max_bytes", int, 1024**3,
         "Size past which a `warc://` store starts the worker process's next WARC file.", gt=0),
    Spec("CRAWLER_ES_API_KEY", "es_api_key", str, "",
         "API key for an `elasticsearch://` store (instead of `user:password@` in its URI)."),
    Spec("CRAWLER_DOWNLOAD_TIMEOUT", "download_timeout", _number, None,
         "Seconds one download may take in all: connect, headers and the whole body.",
         f"`{DOWNLOAD_TIMEOUT}`, or half of `CRAWLER_VISIBILITY_TIMEOUT` if that is less", gt=0),
    Spec("CRAWLER_MAX_DEPTH", "max_depth", int, 0,
         "Links deeper than this many hops from a seed are not followed; 0 = unlimited.", ge=0),
    Spec("CRAWLER_MAX_RETRIES", "max_retries", int, 2,
         "Retries after a connection error, timeout, 408, 429 or 5xx.", ge=0),
    Spec("CRAWLER_DOWNLOAD_MAXSIZE", "download_maxsize", int, 10 * 1024 * 1024,
         "Bytes of a body kept; a longer body is truncated and the record says so.", gt=0),
    Spec("CRAWLER_DOWNLOAD_LARGE_BODIES", "download_large_bodies", int, 2,
         "Bodies over 1 MiB one worker process holds at once (downloading, parsing, queueing "
         "or writing one to a store); a download growing past 1 MiB waits for a free slot, "
         "its timeout paused.", gt=0),
    Spec("CRAWLER_ALLOWED_DOMAINS", "allowed_domains", _csv, (),
         "Comma list of domains links may go to (subdomains included).",
         "the hosts of the seeds of each crawl"),
    Spec("CRAWLER_VISIBILITY_TIMEOUT", "visibility_timeout", int, 3600,
         "Seconds before a Redis-broker message taken by a dead worker is redelivered.", gt=0),
    Spec("CRAWLER_DOWNLOAD_DELAY", "download_delay", _number, 1.0,
         "Seconds between the starts of two requests to one host (`host:port`; subdomains "
         "count apart), across every worker; robots.txt `Crawl-delay` and back-off raise it.", ge=0),
    Spec("CRAWLER_HOST_CONCURRENCY", "host_concurrency", int, 2,
         "Requests in flight to one host across every worker and node; 0 = no cap. A fetch "
         "that may not go yet waits in Redis, not in a worker.", ge=0),
    Spec("CRAWLER_HOST_SHARDS", "host_shards", int, None,
         "Shards of the politeness state (a host's limits, slots, waiting room, robots.txt go to "
         "one by a hash of `host:port`), each a hash tag spread over a Redis Cluster's masters. "
         "Every client of one Redis must use the same value; change it with nothing waiting.",
         "1 on one Redis, 16 on a Redis Cluster", ge=1, lt=16385),
    Spec("CRAWLER_ROBOTSTXT_OBEY", "robotstxt_obey", _bool, True,
         "Fetch each origin's robots.txt once (cached in Redis for the cluster), obey its "
         "rules for `CRAWLER_USER_AGENT` and its `Crawl-delay`."),
    Spec("CRAWLER_ROBOTSTXT_TTL", "robotstxt_ttl", _number, 86400.0,
         "Seconds a fetched robots.txt is kept before it is fetched again.", gt=0),
    Spec("CRAWLER_AUTOTHROTTLE", "autothrottle", _bool, False,
         "Adapt each host's delay to its latency (Scrapy's AutoThrottle): half-way towards "
         "latency / `CRAWLER_AUTOTHROTTLE_TARGET_CONCURRENCY` after each response, never "
         "below `CRAWLER_DOWNLOAD_DELAY`."),
    Spec("CRAWLER_AUTOTHROTTLE_TARGET_CONCURRENCY", "autothrottle_target_concurrency", _number, 1.0,
         "Requests AutoThrottle aims to have in flight to each host on average.", gt=0),
    Spec("CRAWLER_AUTOTHROTTLE_START_DELAY", "autothrottle_start_delay", _number, 5.0,
         "AutoThrottle's delay for a host it has no latency of yet (seconds).", ge=0),
    Spec("CRAWLER_AUTOTHROTTLE_MAX_DELAY", "autothrottle_max_delay", _number, 60.0,
         "Longest delay AutoThrottle sets (seconds).", gt=0),
    Spec("CRAWLER_PROXIES", "proxies", _proxies, (),
         "Comma list (or `@file`, one per line) of `http://[user:password@]host:port` proxies. "
         "Requests go direct; a host showing blocking signs is crawled through them, rotating "
         "per host. Credentials never reach records, logs, stats or task arguments.", "none"),
    Spec("CRAWLER_BAN_PATTERN", "ban_pattern", _pattern, "",
         "Regular expression that marks a response body as a ban page (a blocking sign, like "
         "a 403, a 429 or a connection reset); empty = none."),
    Spec("CRAWLER_BAN_THRESHOLD", "ban_threshold", int, 3,
         "Blocking signs from one host in a row (no good answer between) that switch it to "
         "the proxies (when `CRAWLER_PROXIES` is set).", gt=0),
    Spec("CRAWLER_PROXY_BENCH_S", "proxy_bench_s", _number, 300.0,
         "Seconds a proxy that failed (refused, reset, 407, 5xx from the proxy) is left out.", gt=0),
    Spec("CRAWLER_USER_AGENT", "user_agent", str,
         "crawler-tasks/0.1 (+https://pypi.org/project/crawler-tasks/)",
         "User-Agent header of every request."),
    Spec("CRAWLER_REDIRECT_MAX_TIMES", "redirect_max_times", int, 20,
         "Redirect hops followed from one request before it fails.", ge=0),
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
         "then its records go to the dead letters.", ge=0),
    Spec("CRAWLER_DEAD_LETTERS_MAX", "dead_letters_max", int, 10_000,
         "Dead letters kept at most (each up to tens of KB in Redis); past it a record no store took "
         "is logged and counted under store/dead_letters_dropped instead.", gt=0),
    Spec("CRAWLER_STORE_BATCH", "store_batch", int, 200,
         "Records written to a store in one request (an Elasticsearch `_bulk`, an HBase "
         "`Table.batch()`, one SQLite transaction).", gt=0),
    Spec("CRAWLER_STORE_BATCH_BYTES", "store_batch_bytes", int, 16 * 1024 * 1024,
         "Bytes of records a worker takes from the store queue (as kept there, compressed) and "
         "writes in one request (as decoded), at most (a larger record goes alone).", gt=0),
    Spec("CRAWLER_STORE_FLUSH_S", "store_flush_s", _number, 1.0,
         "Longest a record waits in the store queue for its batch to fill (seconds); a batch "
         "also goes as soon as nothing more arrives.", gt=0),
    Spec("CRAWLER_STORE_LEASE_S", "store_lease_s", _number, 30.0,
         "Seconds a store task (a writer) keeps its batch without a sign of life (it renews "
         "it while alive); then the batch goes back to the queue, e.g. after a SIGKILL, and "
         "a writer whose task never ran is replaced.", gt=0),
    Spec("CRAWLER_STORE_WRITERS", "store_writers", int, 2, "Store tasks (`crawl.store_batch`, one batch "
         "each) at work or queued at once per store shard; more only while full batches wait for them.", gt=0),
    Spec("CRAWLER_STORE_SHARDS", "store_shards", int, None, "Shards of the store queue, spread over a "
         "Redis Cluster's masters; a worker process queues its records in one. Every client of one Redis "
         "must use the same.", "1 on one Redis, 16 on a Redis Cluster", ge=1, lt=1025),
    Spec("CRAWLER_MAX_LINKS_PER_PAGE", "max_links_per_page", int, 1000,
         "Links followed from one page (after de-duplication, in document order); the rest "
         "are counted (`links/over_cap`), not queued, so one page cannot flood the frontier.", ge=0),
    Spec("CRAWLER_MAX_URL_LENGTH", "max_url_length", int, 8192,
         "Bytes of the longest URL crawled (UTF-8, percent-encoded as sent): a longer link is "
         "counted (`links/too_long`), not queued; a longer seed or redirect target is refused.", gt=0),
    Spec("CRAWLER_MAX_IDLE_CONNECTIONS", "max_idle_connections", int, 256,
         "Idle keep-alive connections one worker process keeps open, at most: each of its "
         "threads keeps its `CRAWLER_MAX_IDLE_CONNECTIONS / CRAWLER_WORKER_CONCURRENCY` (at "
         "least 1) most recent hosts, so a broad crawl cannot run out of file descriptors.", gt=0),
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
         "stands (the record says so), or the page fails if its scripts hold the browser.", gt=0),
    Spec("CRAWLER_RENDER_BLOCK", "render_block", _csv, ("image", "font", "media"),
         "Kinds of subresource a rendered page may not load (Playwright's resource types: "
         "`image`, `font`, `media`, `stylesheet`...); counted as blocked."),
    Spec("CRAWLER_RENDER_MAX_REQUESTS", "render_max_requests", int, 200,
         "Requests one rendered page may make (its document, scripts, XHR...); past it they "
         "are refused and counted.", gt=0),
    Spec("CRAWLER_RENDER_PAGES_PER_BROWSER", "render_pages_per_browser", int, 500,
         "Pages a browser renders before it is replaced by a fresh one (its pages at work "
         "finish first), so a long crawl's memory stays flat.", gt=0),
    Spec("CRAWLER_RENDER_BROWSER_MAX_MIB", "render_browser_max_mib", int, 2048,
         "MiB a browser's processes hold (their proportional set size: pages they share "
         "counted once) past which it is replaced after its pages at work finish (measured "
         "every ten pages).", gt=0),
    Spec("CRAWLER_START_URLS_KEY", "start_urls_key", str, "",
         "Redis key other programs push seeds onto (a list, set or sorted set: URLs or "
         "JSON seed objects), drained by Beat's `crawl.feed`.",
         "`<CRAWLER_KEY_PREFIX>:start_urls`"),
    Spec("CRAWLER_START_URLS_BATCH", "start_urls_batch", int, 500,
         "Start-URL entries taken per `crawl.feed` tick.", gt=0),
    Spec("CRAWLER_START_URLS_INTERVAL", "start_urls_interval", _number, 5.0,
         "Seconds between Beat's `crawl.feed` ticks.", gt=0),
    Spec("CRAWLER_GATE_SHARDS", "gate_shards", int, None,
         "Shards of each crawl's gate (seen filter, outstanding set, counters, replay marks, split "
         "by a hash of the URL's fingerprint), each a hash tag spread over a Redis Cluster's "
         "masters. Every client of one Redis must use the same value; change it between crawls.",
         "1 on one Redis, 16 on a Redis Cluster", ge=1, lt=1025),
    Spec("CRAWLER_DEDUP", "dedup", str.lower, "set",
         "Gate of each crawl: `set` (exact, a Redis SET, about 80 bytes per URL) or `bloom` "
         "(a scalable Bloom filter on Redis bitmaps, about 2 bytes per URL; may refuse a new "
         "URL at `CRAWLER_BLOOM_ERROR_RATE`).", choices=DEDUP_MODES),
    Spec("CRAWLER_BLOOM_CAPACITY", "bloom_capacity", int, 10_000_000,
         "URLs the first Bloom slice of a crawl holds at its error rate; past it the filter "
         "adds larger slices with tighter rates, so the bound holds as it grows.", gt=0),
    Spec("CRAWLER_BLOOM_ERROR_RATE", "bloom_error_rate", _number, 0.001,
         "Bound on the share of new URLs a Bloom gate wrongly refuses as seen.", gt=0, lt=1),
    Spec("CRAWLER_RECRAWL_AFTER", "recrawl_after", _number, 0.0,
         "Seconds after which an admitted URL passes the gate again (re-fetched with "
         "`If-None-Match`/`If-Modified-Since`); 0 = never.", ge=0),
    Spec("CRAWLER_REVISIT_MIN_S", "revisit_min_s", _number, 60.0,
         "Shortest interval between two fetches of a page a crawl with revisits keeps.", gt=0),
    Spec("CRAWLER_REVISIT_MAX_S", "revisit_max_s", _number, 2592000.0,
         "Longest interval between two fetches of a page a crawl with revisits keeps (30 days).", gt=0),
    Spec("CRAWLER_REVISIT_GROWTH", "revisit_growth", _number, 0.2,
         "How much a page's revisit interval grows each time it is found unchanged (0.2: by a fifth).", gt=0),
    Spec("CRAWLER_REVISIT_TICK_S", "revisit_tick_s", _number, 60.0,
         "Seconds between Beat's `crawl.revisit` ticks, which send the pages now due.", gt=0),
    Spec("CRAWLER_REVISIT_BATCH", "revisit_batch", int, 1000,
         "Due pages a `crawl.revisit` tick sends per crawl at most.", gt=0),
    Spec("CRAWLER_REVISIT_STORE_UNCHANGED", "revisit_store_unchanged", _bool, False,
         "Write a revisited page to the stores again when it did not change (its counters and "
         "schedule move either way)."),
    Spec("CRAWLER_NEAR_DUPLICATES", "near_duplicates", str.lower, "",
         "Look for near-duplicate pages (a simhash of the text, indexed by band in Redis) and bodies "
         "repeated byte for byte (archived as WARC `revisit` records): `mark` "
         "names the page a record nearly duplicates, `nofollow` also follows none of its links, "
         "`nobody` also stores no body; empty: off.", choices=NEAR_DUPLICATE_MODES),
    Spec("CRAWLER_NEAR_DUPLICATE_DISTANCE", "near_duplicate_distance", int, 3,
         "Bits two simhashes may differ by and their pages still be near-duplicates (0 to 3).", gt=-1, lt=4),
    Spec("CRAWLER_MAX_QUEUED", "max_queued", int, 0,
         "While more fetches than this wait in the broker, feeds skip their tick and "
         "`submit()` raises `QueueFull`; 0 = no cap.", ge=0),
    Spec("CRAWLER_SEED_FILE", "seed_file", str, "",
         "File of seeds (URLs or JSON seed objects, one per line) Beat feeds every "
         "`CRAWLER_SEED_INTERVAL` s; empty = off."),
    Spec("CRAWLER_SEED_INTERVAL", "seed_interval", _number, 300.0,
         "Seconds between Beat's feeds of `CRAWLER_SEED_FILE` and `CRAWLER_SITEMAP_URLS`.", gt=0),
    Spec("CRAWLER_SITEMAP_URLS", "sitemap_urls", _list, (),
         "Comma list of sitemap.xml URLs (indexes and `.xml.gz` too) Beat feeds; a newer "
         "`lastmod` re-admits a URL."),
    Spec("CRAWLER_SITEMAP_LASTMOD_MAX", "sitemap_lastmod_max", int, 1_000_000,
         "`lastmod` dates remembered per crawl for the sitemap feed (about 100 bytes each in "
         "Redis); past it the oldest dates are dropped, and such a URL is gated as if new to "
         "the sitemap.", gt=0),
    Spec("CRAWLER_KAFKA_SEEDS", "kafka_seeds", str, "",
         "Kafka topics `crawler-tasks feed kafka` consumes seeds from, with its consumer group: "
         "`kafka://host:9092/seeds?group=crawler-seeds` (several servers and topics by commas; "
         "`kafkas://` for TLS, `user:password@` for SASL; see docs/feeds.md); empty = off."),
    Spec("CRAWLER_SEED_CRAWL_ID", "seed_crawl_id", str, "default",
         "Crawl id of the seeds Beat's feeds enqueue, unless a seed names its own."),
    Spec("CRAWLER_TEXT_MAXSIZE", "text_maxsize", int, 65536,
         "Characters of visible text kept per page."),
    Spec("CRAWLER_CLAIM_TTL", "claim_ttl", int, 86400,
         "Seconds a fetched body waits in Redis for its parse task (split pipeline).", gt=0),
    Spec("CRAWLER_CRAWL_REFRESH_S", "crawl_refresh_s", _number, 5.0,
         "Seconds a worker keeps a crawl's configuration and state (domains, limits, paused, "
         "cancelled) before reading it from Redis again: a pause or cancel reaches every "
         "worker within this.", gt=0),
    Spec("CRAWLER_KNOWN_LINKS", "known_links", int, 100000,
         "URLs per crawl a worker process remembers the gate answered for, for at most "
         "`CRAWLER_CRAWL_REFRESH_S` (and the recrawl window): a page's links among them are "
         "counted as duplicates without asking the gate again (0: always ask).", ge=0),
    Spec("CRAWLER_KEY_PREFIX", "key_prefix", str, "crawler", "Prefix of every Redis key this package writes."),
    Spec("CRAWLER_STATE_MAX_RETRIES", "state_max_retries", int, 10,
         "Times a task runs again in place after its state Redis failed and answered again; "
         "while the state is down the task waits holding its message, and then the message "
         "goes back to the broker: never failed, never lost.", ge=0),
    Spec("CRAWLER_STALL_TIMEOUT", "stall_timeout", _number, 300.0,
         "`crawler-tasks crawl` gives up (exit 1, saying what is stuck) when nothing moved "
         "this many seconds while work was outstanding.", gt=0),
    Spec("CRAWLER_TASK_EVENTS", "task_events", _events, "auto",
         "Task events for Flower: `auto` sends them from a worker's start when a monitor "
         "(Flower, `celery events`) listens then, and from the moment one asks otherwise "
         "(Flower asks every few seconds), always on RabbitMQ (no way to see a listener); "
         "`1` always, `0` only when a monitor asks. They cost about 1.5 ms of CPU and "
         "2.6 KB of broker traffic per page.", choices=EVENT_MODES),
)
