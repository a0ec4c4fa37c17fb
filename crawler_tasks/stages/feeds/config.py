"""The seed feeds' names, and each feed as the settings configure it (what it reads, how often)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...core.errors import BadInput

if TYPE_CHECKING:
    from ...core.settings import Settings

START_URLS, SEED_FILE, SITEMAPS = "start_urls", "seed_file", "sitemaps"
FEED_NAMES = (START_URLS, SEED_FILE, SITEMAPS)


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
