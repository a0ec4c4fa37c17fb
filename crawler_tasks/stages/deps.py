"""What each stage uses of its process's components: one narrow interface per stage.

A stage function takes the interface of its stage, never the whole
:class:`~crawler_tasks.stages.runtime.Runtime` (which satisfies all of them, and
is the one place the components are built). Each interface is composed of
capabilities: :class:`Publishing` (the gate and the broker), :class:`Politeness`
(the hosts' limits and robots.txt), :class:`Admission` (the crawl registry and the
address guard), :class:`Parsing` (the user's program, claimed bodies, the memory
allowance for large ones), :class:`Storage` (the stores, counters and dead letters)
and :class:`Fetching` (HTTP, proxies, the browser). mypy checks in CI that a stage
reaches for nothing its interface does not name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import requests
    from celery import Celery

    from ..backends import Store
    from ..broker.fetch_queue import FetchQueue
    from ..core.addresses import AddressPolicy
    from ..core.known_links import KnownLinks
    from ..core.limits import Limits
    from ..core.memory import LargeBodies
    from ..core.program import Program
    from ..core.proxies import Proxies
    from ..core.settings import Settings
    from ..net.render import Browser
    from ..net.robots import Robots
    from ..state.callbacks import Callbacks
    from ..state.claims import Claims
    from ..state.crawls import Crawls
    from ..state.dead_letters import DeadLetters
    from ..state.feeds import FeedState
    from ..state.gate import Gate
    from ..state.hosts import HostLimiter
    from ..state.near_dups import NearDups
    from ..state.revisits import Revisits
    from ..state.round_trip import RoundTrip
    from ..state.stats import Stats
    from ..state.store_queue import StoreQueue
    from ..state.unpublished import SeedCalls, Unpublished
    from .lifecycle import Lifecycle
    from .page_log import PageLog


class Configured(Protocol):
    """Settings, and a crawl's effective limits (cached per crawl configuration)."""

    @property
    def settings(self) -> Settings: ...

    def limits(self, crawl_id: str) -> Limits: ...


class Publishing(Configured, Protocol):
    """The gate, the broker (through the app, or its bands on a Redis broker), the store
    queue, and what waits to be published (seeds, callbacks)."""

    @property
    def app(self) -> Celery: ...
    @property
    def gate(self) -> Gate: ...
    @property
    def round_trip(self) -> RoundTrip: ...
    @property
    def store_queue(self) -> StoreQueue: ...
    @property
    def unpublished(self) -> Unpublished: ...
    @property
    def seed_calls(self) -> SeedCalls: ...
    @property
    def callbacks(self) -> Callbacks: ...
    @property
    def fetch_queue(self) -> FetchQueue | None: ...
    @property
    def known_links(self) -> KnownLinks: ...
    @property
    def revisits(self) -> Revisits: ...
    @property
    def near_dups(self) -> NearDups: ...


class Politeness(Protocol):
    """The hosts' limits and waiting rooms, and robots.txt."""

    @property
    def hosts(self) -> HostLimiter: ...
    @property
    def robots(self) -> Robots: ...


class Admission(Protocol):
    """The crawl registry and the private-network guard."""

    @property
    def crawls(self) -> Crawls: ...
    @property
    def addresses(self) -> AddressPolicy: ...


class Parsing(Protocol):
    """The user's program, claimed bodies (split pipeline) and the memory allowance for large ones."""

    @property
    def claims(self) -> Claims: ...
    @property
    def large_bodies(self) -> LargeBodies: ...
    @property
    def program(self) -> Program: ...
    @property
    def lifecycle(self) -> Lifecycle: ...


class Storage(Protocol):
    """The open stores, the crawl registry, counters and dead letters."""

    @property
    def crawls(self) -> Crawls: ...
    @property
    def stats(self) -> Stats: ...
    @property
    def dead_letters(self) -> DeadLetters: ...

    def store(self, uri: str) -> Store: ...
    @property
    def page_log(self) -> PageLog: ...


class Fetching(Protocol):
    """HTTP (the session, the proxies) and, for pages to render, the browser."""

    @property
    def session(self) -> requests.Session: ...
    @property
    def proxies(self) -> Proxies: ...
    @property
    def browser(self) -> Browser: ...


class EnqueueDeps(Publishing, Politeness, Protocol):
    """Enqueue: publishing, and the hosts' waiting rooms (where a new fetch whose host is
    busy waits; robots.txt sends what it refuses straight to the broker)."""


class SeedDeps(EnqueueDeps, Admission, Protocol):
    """Seeds: the crawl registry and the address guard, then the gate and the bands."""


class FeedDeps(SeedDeps, Protocol):
    """Feeds: seeds, plus the feeds' own state and an HTTP session for sitemaps."""

    @property
    def feeds(self) -> FeedState: ...
    @property
    def session(self) -> requests.Session: ...


class MoverDeps(EnqueueDeps, Protocol):
    """The mover: fetches parked per host (``hosts``), published when due."""


class ParseDeps(EnqueueDeps, Parsing, Protocol):
    """Parse: the user's program on a page, its links published."""


class StoreDeps(ParseDeps, Storage, Protocol):
    """Store: batches written to their stores, their counters and dead letters."""


class FetchDeps(StoreDeps, Fetching, Protocol):
    """Fetch: politeness and HTTP, then parse and store."""
