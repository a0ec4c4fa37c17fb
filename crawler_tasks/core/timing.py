"""Two rules of time every stage shares: the timestamp records and registries carry, and
the back-off between attempts (a fetch's retries, a store's, robots.txt's, the mover's)."""

from __future__ import annotations

from datetime import UTC, datetime

from .settings import Settings


def now_iso() -> str:
    """Now, in UTC, to the second, as ISO 8601 (``2026-11-27T04:10:00+00:00``)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def backoff(settings: Settings, retries: int) -> float:
    """Seconds before retry number ``retries + 1``: doubling from ``CRAWLER_RETRY_BACKOFF``,
    capped at ``CRAWLER_RETRY_BACKOFF_MAX``."""
    return min(settings.retry_backoff * 2 ** min(retries, 64), settings.retry_backoff_max)
