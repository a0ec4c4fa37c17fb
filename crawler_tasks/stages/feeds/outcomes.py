"""What a feed's tick did (:class:`Fed`, :class:`Tick`), and the feed's status hash that adds it up.

Each tick's outcome goes to the feed's status hash
(:meth:`~crawler_tasks.state.keys.Keys.feed`): the last tick's time and outcome,
and counters (ticks, admitted, refused, skipped by reason…), which
``crawler-tasks seeds`` shows. A malformed seed is logged with where it came
from, the first :data:`LOGGED_PER_TICK` of a tick one by one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ...core import counters

if TYPE_CHECKING:
    from ..deps import FeedDeps

log = logging.getLogger(__package__)  # the feeds' one logger: crawler_tasks.stages.feeds

#: Malformed seeds logged one by one per tick; past that, only how many more.
LOGGED_PER_TICK = 100


@dataclass
class Fed:
    """What one tick moved: seeds admitted, refused by the gate as seen, refused as malformed."""

    feed: str
    admitted: int = 0
    duplicates: int = 0
    invalid: int = 0
    stopped: str = ""  # why the tick stopped before the end of its source, if it did
    sources_failed: int = 0  # sitemaps that could not be read

    def refuse(self, where: str, reason: object) -> None:
        """Count one malformed seed and log it (the first :data:`LOGGED_PER_TICK` of a tick)."""
        self.invalid += 1
        if self.invalid <= LOGGED_PER_TICK:
            log.warning("feed %s: refused %s: %.300s", self.feed, where, reason)

    def close(self) -> None:
        if self.invalid > LOGGED_PER_TICK:
            log.warning("feed %s: %s more malformed seeds refused this tick",
                        self.feed, self.invalid - LOGGED_PER_TICK)


@dataclass(frozen=True)
class Tick:
    """How one tick went: ``fed``, ``skipped`` (``busy``, ``queue_full``, ``already_fed``),
    ``failed`` (``reason`` says why) or ``off`` (the feed is not configured)."""

    feed: str
    outcome: str
    reason: str = ""
    fed: Fed | None = None

    def describe(self) -> str:
        """One line, as the feed's status shows it."""
        if self.outcome == "skipped":
            return f"skipped: {self.reason}"
        fed = self.fed or Fed(self.feed)
        line = (f"{self.outcome}: {fed.admitted} admitted, {fed.duplicates} already seen, "
                f"{fed.invalid} malformed")
        failed = f"{fed.sources_failed} sitemap(s) failed" if fed.sources_failed else ""
        extra = "; ".join(part for part in (self.reason, fed.stopped, failed) if part)
        return f"{line} ({extra})" if extra else line


def now() -> str:
    """The time as the feeds record it: ISO 8601 UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def record(rt: FeedDeps, result: Tick) -> Tick:
    """Add one tick's outcome to its feed's status hash."""
    fields = {"last_tick": now(), "last_outcome": result.describe()}
    if result.outcome == "skipped":
        counts = {counters.FEED_SKIPPED: 1, counters.feed_skipped(result.reason): 1}
    else:
        fed = result.fed or Fed(result.feed)
        counts = {counters.FEED_TICKS: 1, counters.FEED_FAILED: int(result.outcome == "failed"),
                  counters.FEED_ADMITTED: fed.admitted, counters.FEED_DUPLICATES: fed.duplicates,
                  counters.FEED_REFUSED: fed.invalid, counters.FEED_STOPPED_EARLY: int(bool(fed.stopped)),
                  counters.FEED_SITEMAPS_FAILED: fed.sources_failed}
    rt.feeds.record(result.feed, fields, counts)
    return result


def status(rt: FeedDeps, name: str) -> dict[str, Any]:
    """The feed's status: ``last_tick`` (ISO UTC), ``last_outcome`` and its counters (0 if never)."""
    raw = rt.feeds.status(name)
    out: dict[str, Any] = {"last_tick": None, "last_outcome": None, counters.FEED_TICKS: 0,
                           counters.FEED_ADMITTED: 0, counters.FEED_DUPLICATES: 0, counters.FEED_REFUSED: 0,
                           counters.FEED_SKIPPED: 0, counters.FEED_FAILED: 0}
    for field_name, value in raw.items():
        out[field_name] = int(value) if value.lstrip("-").isdigit() else value
    return out
