"""What one crawl may do: its configuration as kept in Redis, and the effective limits
a worker applies (its own settings first)."""

from __future__ import annotations

from dataclasses import dataclass

from .settings import Settings
from .store_uris import masked
from .urls import domain_allowed, host_of


@dataclass(frozen=True)
class Limits:
    """A crawl's effective limits: ``CRAWLER_ALLOWED_DOMAINS`` and ``CRAWLER_MAX_DEPTH``
    when set, else the crawl's own (its seeds' hosts, its ``--max-depth``)."""

    domains: frozenset[str]
    max_depth: int
    max_pages: int
    #: The crawl's store URI (or list), passwords masked: what store-queue entries carry.
    store: str
    #: The plugins whose rules and pipelines apply to the crawl; () = every loaded one.
    plugins: tuple[str, ...] = ()
    #: ``paused`` or ``cancelled`` (crawl control); None: running as usual.
    control: str | None = None

    def allows(self, url: str, *, origin: str) -> bool:
        """The offsite rule: may a link or redirect found on ``origin`` go to ``url``?

        With no domains known for the crawl, only ``origin``'s own host is allowed.
        """
        return domain_allowed(url, self.domains or frozenset({host_of(origin)}))

    @classmethod
    def of(cls, config: CrawlConfig, settings: Settings) -> Limits:
        return cls(
            domains=frozenset(settings.allowed_domains) or config.domains,
            max_depth=settings.max_depth if config.max_depth is None else config.max_depth,
            max_pages=config.max_pages,
            store=masked(config.store or settings.store),
            plugins=config.plugins,
            control=config.control,
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
