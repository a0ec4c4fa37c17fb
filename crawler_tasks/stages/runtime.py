"""The per-process set of components, built once from settings.

Workers, the CLI and ``submit()`` each get one :class:`Runtime` per process
(``current(app)``): Redis clients and HTTP sessions are never created at import
time, and a forked worker child builds its own. Under the threads pool the
Redis client (a connection pool) is shared by the threads, while each thread
gets its own HTTP session, and stores keep a connection per thread.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

import requests

from ..backends import Store, open_store
from ..broker.fetch_queue import FetchQueue
from ..core.addresses import AddressPolicy
from ..core.known_links import KnownLinks
from ..core.limits import Limits
from ..core.memory import LargeBodies
from ..core.models import CrawlRequest
from ..core.program import Program, program_of
from ..core.proxies import Proxies
from ..core.responses import Download
from ..core.settings import Settings
from ..core.store_uris import StoreResolver
from ..net.download import download, make_session
from ..net.render import Browser
from ..net.robots import Robots
from ..state.callbacks import Callbacks
from ..state.claims import Claims
from ..state.connection import redis_from_url
from ..state.crawls import Crawls, check_layout
from ..state.dead_letters import DeadLetters
from ..state.feeds import FeedState
from ..state.gate import Gate
from ..state.hosts import HostLimiter
from ..state.keys import Keys
from ..state.near_dups import NearDups
from ..state.revisits import Revisits
from ..state.round_trip import RoundTrip
from ..state.seen import make_filter
from ..state.stats import Stats
from ..state.store_queue import StoreQueue
from ..state.unpublished import SeedCalls, Unpublished
from .lifecycle import Lifecycle
from .page_log import PageLog

if TYPE_CHECKING:
    from celery import Celery


class Runtime:
    """Redis-backed components, the HTTP session and open stores of one process."""

    def __init__(self, settings: Settings, app: Celery) -> None:
        self.settings = settings
        self.app = app
        self.redis = redis_from_url(settings.redis_url, max_connections=settings.redis_max_connections)
        self.keys = Keys.of(settings)
        check_layout(self.redis, self.keys)  # SettingsError: other shard counts than this Redis's keys
        self.gate = Gate(self.redis, self.keys, replay_ttl=settings.replay_ttl,
                         seen=make_filter(settings, self.keys))
        self.crawls = Crawls(self.redis, self.keys, cache_seconds=settings.crawl_refresh_s)
        self.known_links = KnownLinks.of(settings)
        self.revisits = Revisits(self.redis, self.keys)
        self.near_dups = NearDups(self.redis, self.keys)
        self.claims = Claims(self.redis, self.keys, ttl=settings.claim_ttl)
        self.stats = Stats(self.redis, self.keys)
        self.store_queue = StoreQueue(self.redis, self.keys)
        self.dead_letters = DeadLetters(self.redis, self.keys, settings.dead_letters_max)
        self.unpublished = Unpublished(self.redis, self.keys)
        self.seed_calls = SeedCalls(self.redis, self.keys)
        self.callbacks = Callbacks(self.redis, self.keys)
        #: Pipelines carrying several components' commands in one round trip.
        self.round_trip = RoundTrip(self.redis)
        #: The bands of a Redis broker, written straight (None: RabbitMQ, through Celery).
        self.fetch_queue = FetchQueue.of(settings, self.redis)
        self.feeds = FeedState(self.redis, self.keys, start_urls_key=settings.start_urls_key,
                               lastmod_max=settings.sitemap_lastmod_max)
        shared = self.fetch_queue if self.fetch_queue is not None and self.fetch_queue.shared else None
        self.hosts = HostLimiter(self.redis, self.keys, settings, handover=shared)
        self.robots = Robots(self.redis, self.keys, settings, self.hosts, lambda: self.session)
        self.proxies = Proxies(settings)
        #: Which addresses downloads may connect to (and seeds may name).
        self.addresses = AddressPolicy.of(settings)
        self.large_bodies = LargeBodies(settings.download_large_bodies)
        #: This process's per-page log lines and pace line.
        self.page_log = PageLog(settings)
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._stores: dict[str, Store] = {}
        #: Turns the masked store URIs Redis keeps back into this process's own (CRAWLER_STORE).
        self.store_uris = StoreResolver([settings.store])
        self._limits: dict[str, tuple[object, Limits]] = {}
        self._lock = threading.Lock()
        self._program: Program | None = None
        self._lifecycle: Lifecycle | None = None
        self._browser: Browser | None = None

    @property
    def session(self) -> requests.Session:
        """This thread's HTTP session (connection pool)."""
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = make_session(
                self.settings.user_agent, policy=self.addresses,
                pool_hosts=self.settings.idle_connections_per_thread)
            with self._lock:
                self._sessions.append(session)
        return session

    @property
    def browser(self) -> Browser:
        """This process's browser, for the pages it renders (started on first render)."""
        if self._browser is None:
            with self._lock:
                if self._browser is None:
                    self._browser = Browser(self.settings, self._subresource)
        return self._browser

    def _subresource(self, url: str, headers: dict[str, str], proxy: str | None) -> Download:
        """One request of a rendered page, made by this thread's guarded session."""
        s = self.settings
        return download(self.session, CrawlRequest(url=url, headers=headers), timeout=s.download_timeout,
                        maxsize=s.download_maxsize, proxy=proxy)

    def store(self, uri: str) -> Store:
        """The open store for ``uri``, masked (as Redis keeps it) or not (opened on first use;
        safe across threads). :class:`~crawler_tasks.core.errors.StoreNotConfigured` when a masked
        URI is none of this process's ``CRAWLER_STORE``."""
        store = self._stores.get(uri)
        if store is None:
            with self._lock:
                store = self._stores.get(uri) or open_store(self.store_uris.resolve(uri), self.settings)
                self._stores[uri] = store
        return store

    @property
    def program(self) -> Program:
        """The plugins' rules and the item pipelines, loaded on first use (by a worker at
        start; a process that only submits never imports them)."""
        if self._program is None:
            with self._lock:
                if self._program is None:
                    self._program = program_of(self.settings)
        return self._program

    @property
    def lifecycle(self) -> Lifecycle:
        """The crawls this process opened (the pipelines' and middlewares' ``open``/``close``)."""
        if self._lifecycle is None:
            program = self.program  # takes the lock itself
            with self._lock:
                if self._lifecycle is None:
                    self._lifecycle = Lifecycle(program)
        return self._lifecycle

    def limits(self, crawl_id: str) -> Limits:
        """The crawl's effective limits, rebuilt only when its cached configuration changes.

        Called several times per page (decide, follow, store, gate), so it is a dict look-up.
        """
        config = self.crawls.config(crawl_id)
        hit = self._limits.get(crawl_id)
        if hit is None or hit[0] is not config:
            if len(self._limits) >= self.crawls.CACHE_SIZE:
                self._limits.clear()
            custom = self.program.settings_for(config.plugins)
            if hit is None and custom and config.control is None:
                self.crawls.note_custom(crawl_id, custom.shown())  # for ``crawler-tasks crawls``
            hit = self._limits[crawl_id] = (config, Limits.of(config, self.settings, custom))
        return hit[1]

    def close_browser(self) -> None:
        """Close this process's browser, if it started one."""
        if self._browser is not None:
            self._browser.close()

    def close_stores(self) -> None:
        """Close the stores this process opened (SQLite checkpoints its log and drops it
        then); a later write opens them again."""
        stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            store.close()

    def close(self) -> None:
        self.close_browser()
        self.close_stores()
        for session in self._sessions:
            session.close()
        if self.fetch_queue is not None and not self.fetch_queue.shared:
            self.fetch_queue.redis.close()
        self.redis.close()


_building = threading.Lock()


def current(app: Celery) -> Runtime:
    """This process's runtime for ``app``: built on first use from the app's settings and
    kept on the app, built anew in a forked child (which must not share the parent's
    connections)."""
    held: tuple[int, Runtime] | None = getattr(app, "crawler_runtime", None)
    if held is None or held[0] != os.getpid():
        with _building:
            held = getattr(app, "crawler_runtime", None)
            if held is None or held[0] != os.getpid():
                held = (os.getpid(), Runtime(app.crawler_settings, app))
                app.crawler_runtime = held
    return held[1]


if TYPE_CHECKING:
    from .deps import FeedDeps, FetchDeps, MoverDeps

    def _offers_every_stage(rt: Runtime) -> tuple[FetchDeps, FeedDeps, MoverDeps]:
        """mypy checks here that the runtime gives each stage what its interface names."""
        return rt, rt, rt
