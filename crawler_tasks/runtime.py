"""The per-process set of components, built once from settings.

Workers, the CLI and ``submit()`` each get one :class:`Runtime` per process
(``current(app)``): Redis clients and HTTP sessions are never created at import
time, and a forked worker child builds its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import requests

from .backends import Store, open_store
from .claims import Claims
from .connection import redis_from_url
from .crawls import Crawls
from .download import make_session
from .gate import Gate
from .keys import Keys
from .settings import Settings
from .stats import Stats

if TYPE_CHECKING:
    from celery import Celery


@dataclass(frozen=True)
class Limits:
    """A crawl's effective limits: its own where it set them, else the settings'."""

    domains: frozenset[str]
    max_depth: int
    max_pages: int
    store: str


class Runtime:
    """Redis-backed components, the HTTP session and open stores of one process."""

    def __init__(self, settings: Settings, app: Celery) -> None:
        self.settings = settings
        self.app = app
        self.redis = redis_from_url(settings.redis_url)
        self.keys = Keys(settings.key_prefix)
        self.gate = Gate(self.redis, self.keys, replay_ttl=settings.claim_ttl)
        self.crawls = Crawls(self.redis, self.keys)
        self.claims = Claims(self.redis, self.keys, ttl=settings.claim_ttl)
        self.stats = Stats(self.redis, self.keys)
        self._session: requests.Session | None = None
        self._stores: dict[str, Store] = {}

    @property
    def session(self) -> requests.Session:
        if self._session is None:
            self._session = make_session(self.settings.user_agent)
        return self._session

    def store(self, uri: str) -> Store:
        """The open store for ``uri`` (opened on first use)."""
        if uri not in self._stores:
            self._stores[uri] = open_store(uri)
        return self._stores[uri]

    def limits(self, crawl_id: str) -> Limits:
        config = self.crawls.config(crawl_id)
        return Limits(
            domains=frozenset(self.settings.allowed_domains) or config.domains,
            max_depth=self.settings.max_depth if config.max_depth is None else config.max_depth,
            max_pages=config.max_pages,
            store=config.store or self.settings.store,
        )

    def pipeline(self):
        return self.redis.pipeline(transaction=False)

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self._stores.clear()
        if self._session is not None:
            self._session.close()
        self.redis.close()


_runtimes: dict[tuple[int, int], Runtime] = {}


def current(app: Celery) -> Runtime:
    """This process's runtime for ``app`` (built on first use, rebuilt after a fork)."""
    key = (id(app), os.getpid())
    if key not in _runtimes:
        _runtimes[key] = Runtime(app.crawler_settings, app)
    return _runtimes[key]
