"""What one crawl may do: its configuration as kept in Redis, and the effective limits
a worker applies (its own settings first)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .crawl_settings import CrawlSettings
from .settings import Settings
from .store_uris import masked
from .urls import domain_allowed, host_of


@dataclass(frozen=True)
class Limits:
    """A crawl's effective limits: ``CRAWLER_ALLOWED_DOMAINS`` when set, else the crawl's
    own domains (its seeds' hosts, ``--allow-domain``) and its plugins' ``allowed_domains``;
    the crawl's ``--max-depth`` and ``--max-pages``, else its plugins' ``custom_settings``,
    else the worker's settings (:mod:`~crawler_tasks.core.crawl_settings`)."""

    domains: frozenset[str]
    max_depth: int
    max_pages: int
    #: The crawl's store URI (or list), passwords masked: what store-queue entries carry.
    store: str
    #: The plugins whose rules and pipelines apply to the crawl; () = every loaded one.
    plugins: tuple[str, ...] = ()
    #: ``paused`` or ``cancelled`` (crawl control); None: running as usual.
    control: str | None = None
    #: The crawl's own delay and concurrency per host; None: the worker's settings.
    delay: float | None = None
    host_concurrency: int | None = None
    #: Headers every request of the crawl sends (its plugins' ``custom_settings``).
    headers: tuple[tuple[str, str], ...] = ()
    #: Seconds before a stored page is first due again (None: the crawl keeps no revisit schedule).
    revisit: float | None = None

    def allows(self, url: str, *, origin: str) -> bool:
        """The offsite rule: may a link or redirect found on ``origin`` go to ``url``?

        With no domains known for the crawl, only ``origin``'s own host is allowed.
        """
        return domain_allowed(url, self.scope(origin))

    def scope(self, origin: str) -> frozenset[str]:
        """The domains a link found on ``origin`` may go to (:meth:`allows`, for many links)."""
        return self.domains or frozenset({host_of(origin)})

    @classmethod
    def of(cls, config: CrawlConfig, settings: Settings, custom: CrawlSettings = CrawlSettings()) -> Limits:
        """The limits of the crawl ``config`` describes, on a worker with ``settings`` whose
        loaded plugins give the crawl ``custom``."""
        depth = config.max_depth if config.max_depth is not None else custom.max_depth
        return cls(
            domains=frozenset(settings.allowed_domains) or config.domains | custom.allowed_domains,
            max_depth=settings.max_depth if depth is None else depth,
            max_pages=config.max_pages or custom.max_pages or 0,
            store=masked(config.store or settings.store),
            plugins=config.plugins,
            control=config.control,
            delay=custom.delay,
            host_concurrency=custom.host_concurrency,
            headers=custom.headers,
            revisit=config.revisit or custom.revisit,
        )


@dataclass(frozen=True)
class CrawlConfig:
    """What one crawl may do. ``None`` means: use the worker's settings."""

    crawl_id: str
    domains: frozenset[str]
    max_depth: int | None = None
    max_pages: int = 0
    store: str | None = None
    plugins: tuple[str, ...] = ()
    #: ``paused`` or ``cancelled`` (crawl control); None: running as usual.
    control: str | None = None
    #: Seconds before a stored page is first due again (None: no revisit schedule).
    revisit: float | None = None
    #: The callback a revisit sends when it finds a page changed (``core.models.callback``).
    on_change: dict[str, Any] | None = None
