"""``crawler-tasks crawl`` and ``demo``: workers on this machine, seeds submitted, wait until the crawl drains."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import redis

from ..backends import open_store
from ..core import counters
from ..core.addresses import METADATA, classify, literal_addresses, normal_host, parse_address
from ..core.errors import BadInput, BrokerUnavailable, CrawlerError, CrawlStalled, CrawlStateLost, StoreUnavailable
from ..core.program import idle_warning, parse_plugins, program_of
from ..core.settings import DEFAULT_STORE, Settings, pool_missing
from ..core.store_uris import masked, split_uris, sqlite_path
from ..core.urls import host_of
from ..stages.seed import build_requests
from ..state.connection import safe_url
from .common import absolute_store
from .local import CrawlWatch, EmbeddedRedis, Workers, unreachable, wait_drained
from .progress import Progress, Rate, ending, progress_line, summary_rows
from .renderers import Renderers


def cmd_crawl(args: argparse.Namespace) -> int:

    crawl_id = args.crawl_id or _new_crawl_id()
    requests = build_requests(args.urls, crawl_id=crawl_id,
                              max_url_length=Settings.from_env().max_url_length)
    return _finish(run_crawl(requests, args))


def cmd_demo(args: argparse.Namespace) -> int:
    if args.pages < 1:
        raise BadInput("--pages: must be at least 1")
    # The demo site is this process's own: no need to spare it (robots.txt is still read).
    args.delay = 0.0 if args.delay is None else args.delay
    args.host_concurrency = 0 if args.host_concurrency is None else args.host_concurrency
    from .demo_site import DemoSite

    with DemoSite(args.pages) as site:
        print(f"demo site with {args.pages} pages at {site.url}", file=sys.stderr)
        requests = build_requests([site.url], crawl_id=args.crawl_id or _new_crawl_id())
        summary = run_crawl(requests, args)
    return _finish(summary)


def _finish(summary: dict[str, Any]) -> int:
    """Print the summary; a crawl that stalled then ends in :class:`CrawlStalled` (exit 1)."""
    _print_summary(summary)
    if summary["stalled"]:
        raise CrawlStalled(summary["stalled"])
    return 0


def _validate_crawl_options(args: argparse.Namespace, settings: Settings) -> Settings:
    if args.workers < 1:
        raise BadInput("--workers: must be at least 1")
    if args.max_pages < 0 or (args.max_depth is not None and args.max_depth < 0):
        raise BadInput("--max-pages and --max-depth: must be 0 or more")
    if (args.delay is not None and not 0 <= args.delay < float("inf")) or \
            (args.host_concurrency is not None and args.host_concurrency < 0):
        raise BadInput("--delay and --host-concurrency: must be 0 or more")
    store = absolute_store(args.store or settings.store)
    open_store(store, settings).close()
    changes: dict[str, Any] = {"store": store}
    if args.max_depth is not None:
        changes["max_depth"] = args.max_depth
    if args.delay is not None:
        changes["download_delay"] = args.delay
    if args.host_concurrency is not None:
        changes["host_concurrency"] = args.host_concurrency
    if args.ignore_robots:
        changes["robotstxt_obey"] = False
    args.plugins = parse_plugins(args.plugins or "", "--plugins")
    if args.plugins:
        changes["plugins"] = tuple(dict.fromkeys((*settings.plugins, *args.plugins)))
    settings = settings.replace(**changes)
    missing = pool_missing(settings.worker_pool)
    if missing:  # said here, not as a traceback in the workers' log
        raise BadInput(missing)
    # A plugin, pipeline or middleware that cannot be loaded stops here, not in the workers.
    for plugin in program_of(settings).idle():
        print(f"crawler-tasks: warning: {idle_warning(plugin)}", file=sys.stderr)
    return settings


def allow_seed_hosts(settings: Settings, requests: list) -> Settings:
    """``settings`` whose private-network allowlist also holds what the seeds an operator typed
    (or the demo's own site) name literally: an IP address, or ``localhost`` given as such;
    never a cloud-metadata address, and never a host name, whose later resolutions a hostile
    domain controls (DNS rebinding). What they link or redirect to is judged as usual."""
    hosts = []
    for host in sorted({host_of(r.url) for r in requests}):
        addresses = literal_addresses(host)
        if addresses and all(classify(parse_address(a)).kind != METADATA for a in addresses):
            hosts += addresses
        elif normal_host(host) == "localhost":
            hosts.append("localhost")
    return settings.replace(private_allowlist=(*settings.private_allowlist, *hosts))


def _render_seed_hosts(settings: Settings, requests: list) -> Settings:
    """``settings`` that render every page of the seeds' hosts (``--render``)."""
    hosts = tuple(sorted({host_of(r.url) for r in requests}))
    return settings.replace(render_hosts=tuple(dict.fromkeys((*settings.render_hosts, *hosts))))


def run_crawl(requests: list, args: argparse.Namespace) -> dict[str, Any]:
    """Run workers on this machine, submit ``requests`` and wait until their crawl drains.

    On SIGINT or SIGTERM the workers stop warm (running tasks finish, the rest
    goes back to the queue); a second signal stops them at once. Nothing this
    started outlives it.
    """
    settings = allow_seed_hosts(_validate_crawl_options(args, Settings.from_env()), requests)
    if getattr(args, "render", False):
        settings = _render_seed_hosts(settings, requests)
    crawl_id = requests[0].crawl_id
    embedded: EmbeddedRedis | None = None
    log_path: str | None = None
    workers: Workers | None = None
    renderers: Renderers | None = None
    rt: Any = None
    try:
        away = ["--embedded-redis"] if getattr(args, "embedded_redis", False) else unreachable(settings)
        if away and away != ["--embedded-redis"] and _configured(settings):
            names = " and ".join(f"{name} ({safe_url(_url_of(settings, name))})" for name in away)
            raise BrokerUnavailable(f"{names} not reachable: start it, or unset CRAWLER_BROKER_URL and "
                                    "CRAWLER_REDIS_URL to crawl on an embedded Redis")
        if away:
            print("starting an embedded Redis" + ("" if away == ["--embedded-redis"] else
                  " (none answers on the default address)"), file=sys.stderr)
            embedded = EmbeddedRedis().start()
            settings = settings.replace(broker_url=embedded.url, redis_url=embedded.url)
        log_path = worker_log(getattr(args, "log_file", None), settings.store, crawl_id)
        workers = Workers(settings, processes=args.workers, name=f"{crawl_id}@%h", log_path=log_path,
                          loglevel="INFO").start()
        # Celery, the stages and their libraries, imported while the workers start (on
        # another core): most of this command's own start.
        from ..service.celery_app import create_app
        from ..service.control import list_crawls
        from ..stages.runtime import current
        from ..stages.seed import submit_requests

        app = create_app(settings)
        rt = current(app)
        renderers = Renderers(settings, app, crawl_id, say=lambda line: print(line, file=sys.stderr),
                               log_path=log_path)
        if settings.render_hosts:
            renderers.start()
        if args.crawl_id:
            _go_on(rt, crawl_id)
        started = time.monotonic()
        accepted = submit_requests(rt, requests, max_depth=args.max_depth,
                                   max_pages=args.max_pages, store=settings.store,
                                   plugins=args.plugins)
        with _Progress(rt, crawl_id, started, quiet=args.quiet) as progress:
            watch = CrawlWatch(rt, crawl_id, settings.stall_timeout, say=progress.say)
            renderers.say = progress.say

            def tick() -> None:
                renderers()
                progress()

            stalled: CrawlStalled | None = None
            try:
                wait_drained(watch.drained, tick=tick, workers=workers)
            except CrawlStalled as exc:  # the summary says how far it got, then the error line
                stalled = exc
            except CrawlStateLost as exc:
                raise CrawlStateLost(f"{exc}: {_stored_count(settings.store, crawl_id)} of its pages are "
                                     f"stored in {masked(settings.store)}; run the same command with "
                                     f"--crawl-id {crawl_id} to go on (stored pages are kept, the rest "
                                     "is fetched again)") from None
        elapsed = time.monotonic() - started
        stats = rt.stats.read(crawl_id)
        [listed] = list_crawls(rt, [crawl_id])
        _flush_stats(rt, crawl_id)
    except KeyboardInterrupt:
        held = embedded is None and rt is not None and _hold(rt, crawl_id)
        rest = "is held for it (other crawls on this Redis go on)" if held else "stays queued"
        print(f"\nstopping: running tasks finish, the rest {rest} (a second signal stops at once); "
              f"resume with --crawl-id {crawl_id}", file=sys.stderr)
        raise
    finally:
        _shut_down(settings, workers, embedded, renderers)
    first = split_uris(settings.store)[0]
    return {"crawl_id": crawl_id, "seeds_accepted": accepted, "elapsed": elapsed,
            "store": masked(settings.store), "stats": stats, "embedded": embedded is not None, "log": log_path,
            "redis": "embedded (gone with the crawl)" if embedded is not None else safe_url(settings.redis_url),
            "ended": ending(stats, listed["state"], stalled=stalled is not None),
            "stalled": str(stalled) if stalled is not None else None,
            "export": f"crawler-tasks export --store {shlex.quote(masked(first))} --crawl-id {crawl_id}"}


def _hold(rt: Any, crawl_id: str) -> bool:
    """Pause an interrupted crawl, so that the workers of another crawl on the same Redis
    hold its queued fetches instead of running them; False when Redis does not answer."""
    from ..stages import control

    try:
        control.pause(rt, crawl_id, settle_s=0)
    except redis.RedisError:
        return False
    return True


def _go_on(rt: Any, crawl_id: str) -> None:
    """A crawl run again by its id goes on: paused (interrupted, or by ``pause``), it resumes."""
    from ..stages import control

    if rt.crawls.config(crawl_id).control == control.PAUSED:
        control.resume(rt, crawl_id)


def worker_log(asked: str | None, store: str, crawl_id: str) -> str:
    """Where a local crawl's workers log (its folder made): ``asked``, or ``logs/<crawl id>.log``
    beside the crawl's first store when that is SQLite, else under ``./crawl-data``."""
    first = split_uris(store)
    folder = os.path.dirname((first and sqlite_path(first[0])) or DEFAULT_STORE)
    path = os.path.abspath(asked or os.path.join(folder or ".", "logs", f"{crawl_id}.log"))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return path


def _configured(settings: Settings) -> bool:
    """Whether the broker or the state Redis was set to other than the defaults: then it must
    answer (an embedded Redis stands in only where nothing was configured)."""
    return (settings.broker_url, settings.redis_url) != (Settings.broker_url, Settings.redis_url)


def _url_of(settings: Settings, name: str) -> str:
    return settings.broker_url if name == "CRAWLER_BROKER_URL" else settings.redis_url


def _stored_count(store: str, crawl_id: str) -> str:
    """How many records of the crawl the store holds, as text ('an unknown number' if it
    cannot say, e.g. a write-only WARC store)."""
    try:
        opened = open_store(store, Settings.from_env())
        try:
            return str(opened.count(crawl_id))
        finally:
            opened.close()
    except Exception:  # a store that cannot count: the message still says what to do
        return "an unknown number"


def _flush_stats(rt: Any, crawl_id: str) -> None:
    """The crawl's final counters into its store's statistics (when it keeps them)."""
    from ..stages.statistics import flush_stats

    try:
        flush_stats(rt, [crawl_id])
    except StoreUnavailable as exc:
        print(f"crawl statistics not written to the store: {exc}", file=sys.stderr)


def _shut_down(settings: Settings, workers: Any, embedded: Any, renderers: Renderers | None = None) -> None:
    """Stop the workers warm (at once on a second signal), then the embedded Redis."""
    try:
        if workers is not None:
            try:
                workers.stop(timeout=settings.download_timeout + 10)
                if renderers is not None:
                    renderers.stop(timeout=settings.download_timeout + settings.render_timeout_s + 10)
            except KeyboardInterrupt:
                workers.kill()
                if renderers is not None and renderers.workers is not None:
                    renderers.workers.kill()
                raise
    finally:
        if embedded is not None:
            embedded.stop()


class _Progress:
    """On a terminal, the live view of the crawl (:class:`~crawler_tasks.cli.top.LiveView`)
    on stderr; otherwise a line every 5 s. A context manager: the view stays on screen
    with the crawl's last figures."""

    def __init__(self, rt: Any, crawl_id: str, started: float, *, quiet: bool) -> None:
        self.rt, self.crawl_id, self.started = rt, crawl_id, started
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.every = 5.0  # seconds between two progress lines; the live view's own with it
        self.view = self._live_view() if self.tty and not quiet else None
        self.last = 0.0 if self.tty else started
        self.rate, self.frontier = Rate(), Rate()
        self.rate.add(started, 0)

    def _live_view(self) -> Any:
        """The live view, on a terminal (rich is loaded then only)."""
        from rich.console import Console

        from .top import TTY_INTERVAL, LiveView

        self.every = TTY_INTERVAL
        return LiveView(self.rt, self.crawl_id, Console(stderr=True))

    def __enter__(self) -> _Progress:
        if self.view is not None:
            self.view.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if self.view is not None:
            if kind is None:
                self._refresh()  # the figures as the crawl ended
            self.view.__exit__(kind, exc, tb)

    def say(self, message: str) -> None:
        """A line of its own (above the live view)."""
        if self.view is not None:
            self.view.say(message)
        else:
            print(message, file=sys.stderr, flush=True)

    def __call__(self) -> None:
        now = time.monotonic()
        if self.quiet or now - self.last < self.every:
            return
        self.last = now
        if self.view is not None:
            self._refresh()
            return
        from ..service.control import list_crawls

        try:
            [listed] = list_crawls(self.rt, [self.crawl_id])
            s = listed["counters"]
            waiting = self.rt.hosts.waiting_by_crawl().get(self.crawl_id, 0)
            fetching = sum(h.in_flight for h in self.rt.hosts.busiest(50))
        except redis.RedisError:  # the watch says so; no progress line meanwhile
            return
        stored = s.get(counters.STORED, 0)
        line = Progress(self.crawl_id, stored, s.get(counters.FAILURES, 0), self.rate.add(now, stored),
                        fetching, waiting, listed["outstanding"], listed["max_pages"],
                        shrinking=-self.frontier.add(now, listed["outstanding"]))
        print(progress_line(line, time.time()), file=sys.stderr, flush=True)

    def _refresh(self) -> None:
        assert self.view is not None
        try:
            self.view.refresh()
        except CrawlerError:  # the crawl's state gone from Redis: the watch says so
            pass


def _print_summary(summary: dict[str, Any]) -> None:
    for name, value in summary_rows(summary):
        print(f"{name:<20}{value}")


def _new_crawl_id() -> str:
    return datetime.now(UTC).strftime("crawl-%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
