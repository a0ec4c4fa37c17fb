"""The rules of time every stage shares: the timestamp records and registries carry (and
reading one back), and the back-off between attempts (a fetch's retries, a store's, robots.txt's, the mover's)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from .settings import Settings

_last: tuple[int, str] = (0, "")


def now_iso() -> str:
    """Now, in UTC, to the second, as ISO 8601 (``2026-11-27T04:10:00+00:00``): formatted
    once a second (every record asks)."""
    global _last
    second = int(time.time())
    seen, shown = _last
    if second != seen:
        shown = datetime.fromtimestamp(second, UTC).isoformat(timespec="seconds")
        _last = (second, shown)
    return shown


def epoch_of(iso: str | None) -> float | None:
    """The Unix time of a timestamp as :func:`now_iso` writes it (or with ``Z``); None for
    none, or for one that is not ISO 8601."""
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def backoff(settings: Settings, retries: int) -> float:
    """Seconds before retry number ``retries + 1``: doubling from ``CRAWLER_RETRY_BACKOFF``,
    capped at ``CRAWLER_RETRY_BACKOFF_MAX``."""
    return min(settings.retry_backoff * 2 ** min(retries, 64), settings.retry_backoff_max)
