"""What ``crawler-tasks crawl`` tells a person off a terminal: the progress line every few
seconds and the summary at the end. Pure: the figures come in, the text goes out."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from ..core import counters, figures
from ..core.figures import duration

#: Seconds the current rate is measured over.
RATE_WINDOW_S = 30.0


class Rate:
    """A figure's change per second over the last :data:`RATE_WINDOW_S` seconds (pages
    stored; outstanding tasks)."""

    def __init__(self, window: float = RATE_WINDOW_S) -> None:
        self.window = window
        self._seen: deque[tuple[float, int]] = deque()

    def add(self, now: float, value: int) -> float:
        """Note ``value`` at ``now`` (monotonic seconds); its change per second over the
        window so far (0 until a later sample than the first)."""
        rate = self.per_s(now, value)
        return 0.0 if rate is None else rate

    def per_s(self, now: float, value: int) -> float | None:
        """:meth:`add`, saying None until a later sample than the first."""
        self._seen.append((now, value))
        # The oldest sample kept is the newest one at least a window old.
        while len(self._seen) > 2 and now - self._seen[1][0] >= self.window:
            self._seen.popleft()
        first_at, first = self._seen[0]
        return (value - first) / (now - first_at) if now > first_at else None


@dataclass(frozen=True)
class Progress:
    """One progress line's figures."""

    crawl_id: str
    stored: int
    failed: int
    #: Pages per second over the last seconds (:class:`Rate`).
    rate: float
    #: Requests being downloaded now (slots in use at the crawl's hosts).
    fetching: int
    #: Fetches waiting for their hosts (the hosts' waiting rooms).
    waiting: int
    #: Tasks of the crawl not done: queued, running, waiting.
    outstanding: int
    #: The page budget (0: none).
    budget: int = 0
    #: Outstanding tasks done per second, the frontier's growth counted in (negative: it grows).
    shrinking: float = 0.0


def eta_seconds(p: Progress) -> float | None:
    """Seconds left (:func:`~crawler_tasks.core.figures.time_left`): to the budget at the
    current rate, else until the outstanding tasks are done at the pace they shrink."""
    return figures.time_left(p.stored, p.budget, p.outstanding, p.rate, p.shrinking)


def progress_line(p: Progress, when: float) -> str:
    """``2026-11-27 10:05:03 crawl-…  stored 72/500 · 3.4 pages/s · fetching 2 · waiting 120
    · outstanding 128 · failed 0 · eta 2m 05s`` (``when``: the wall-clock time)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))
    stored = f"{p.stored}/{p.budget}" if p.budget else str(p.stored)
    eta = eta_seconds(p)
    tail = f" · eta {duration(eta)}{'' if p.budget else ' (frontier)'}" if eta is not None and p.outstanding else ""
    if eta is None and not p.budget and p.shrinking < 0:
        tail = " · frontier growing"
    return (f"{stamp} {p.crawl_id}  stored {stored} · {p.rate:.1f} pages/s · fetching {p.fetching}"
            f" · waiting {p.waiting} · outstanding {p.outstanding} · failed {p.failed}{tail}")


#: Why a crawl ended, as the summary says it.
DRAINED, BUDGET, CANCELLED = "drained: nothing left to fetch", "page budget reached", "cancelled"
STALLED = "stalled: nothing moved for CRAWLER_STALL_TIMEOUT (resume with --crawl-id)"


def ending(stats: dict[str, int], state: str, *, stalled: bool = False) -> str:
    """Why the crawl ended: it stalled, was cancelled, reached its budget (URLs refused over
    it), or drained."""
    if stalled:
        return STALLED
    if state in ("cancelled", "cancelling"):
        return CANCELLED
    if stats.get(counters.GATE_OVER_BUDGET, 0):
        return BUDGET
    return DRAINED


def status_mix(stats: dict[str, int]) -> str:
    """``200: 60, 404: 2, 500: 1`` (by code), ``-`` with none."""
    codes = sorted((int(k.removeprefix(counters.STATUS.prefix)), n) for k, n in stats.items()
                   if k.startswith(counters.STATUS.prefix) and k.removeprefix(counters.STATUS.prefix).isdigit())
    return ", ".join(f"{code}: {n}" for code, n in codes) or "-"


def summary_rows(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    """The end summary, a (name, value) per line."""
    s = summary["stats"]
    elapsed = summary["elapsed"]
    rows: list[tuple[str, Any]] = [
        ("crawl", summary["crawl_id"]),
        ("ended", summary["ended"]),
        ("pages stored", s.get(counters.STORED, 0)),
        ("statuses", status_mix(s)),
        ("failed", s.get(counters.FAILURES, 0)),
        ("duplicates skipped", s.get(counters.DUPLICATES, 0)),
        ("retries", s.get(counters.RETRIES, 0)),
        ("redirects", s.get(counters.REDIRECTS, 0)),
        ("elapsed", f"{elapsed:.1f}s"),
        ("pages/s", f"{s.get(counters.STORED, 0) / max(elapsed, 1e-6):.1f}"),
    ]
    if figures.failure_reasons(s):
        rows.insert(5, ("failure reasons", ", ".join(f"{k}: {n}" for k, n in figures.failure_reasons(s).items())))
    rows += [("store", summary["store"]), ("worker log", summary["log"]), ("redis", summary["redis"]),
             ("export", summary["export"])]
    return rows
