"""What each stage uses of its process's components: one narrow interface per stage.

A stage function takes the interface of its stage, never the whole
:class:`~crawler_tasks.stages.runtime.Runtime` (which satisfies all of them, and
is the one place the components are built). The interfaces compose as the stages
call each other: every stage that ends a task publishes through the enqueue
stage, and the fetch stage hands a page on to parse and store. mypy checks in CI
that a stage reaches for nothing its interface does not name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import requests
    from celery import Celery

    from ..backends import Store
    from ..broker.fetch_queue import FetchQueue
    from ..core.addresses import AddressPolicy
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
    from ..state.round_trip import RoundTrip
    from ..state.stats import Stats
    from ..state.store_queue import StoreQueue
    from ..state.unpublished import SeedCalls, Unpublished


class Configured(Protocol):
    """Settings, and a crawl's effective limits (cached per crawl configuration)."""

    @property
    def settings(self) -> Settings: ...

    def limits(self, crawl_id: str) -> Limits: ...


class EnqueueDeps(Configured, Protocol):
    """Publishing: the gate, the broker (through the app, or its bands on a Redis broker), the
    hosts' waiting rooms (where a new fetch whose host is busy waits), and what waits to be published."""

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
    def hosts(self) -> HostLimiter: ...
    @property
    def robots(self) -> Robots: ...


class SeedDeps(EnqueueDeps, Protocol):
    """Seeds: the crawl registry and the address guard, then the gate and the bands (and
    the ``on_done`` callbacks, through the enqueue stage's ``callbacks``)."""

    @property
    def crawls(self) -> Crawls: ...
    @property
    def addresses(self) -> AddressPolicy: ...


class FeedDeps(SeedDeps, Protocol):
    """Feeds: seeds, plus the feeds' own state and an HTTP session for sitemaps."""

    @property
    def feeds(self) -> FeedState: ...
    @property
    def session(self) -> requests.Session: ...


class MoverDeps(EnqueueDeps, Protocol):
    """The mover: fetches parked per host (``hosts``), published when due."""


class ParseDeps(EnqueueDeps, Protocol):
    """Parse: claimed bodies (split pipeline), the memory allowance for large ones, the user's program."""

    @property
    def claims(self) -> Claims: ...
    @property
    def large_bodies(self) -> LargeBodies: ...
    @property
    def program(self) -> Program: ...


class StoreDeps(ParseDeps, Protocol):
    """Store: the open stores, the store queue, stats, dead letters."""

    @property
    def crawls(self) -> Crawls: ...
    @property
    def stats(self) -> Stats: ...
    @property
    def dead_letters(self) -> DeadLetters: ...

    def store(self, uri: str) -> Store: ...


class FetchDeps(StoreDeps, Protocol):
    """Fetch: politeness (hosts, robots, proxies), the HTTP session (and the browser, for
    pages to render), then parse and store."""

    @property
    def browser(self) -> Browser: ...

    @property
    def proxies(self) -> Proxies: ...
    @property
    def session(self) -> requests.Session: ...
