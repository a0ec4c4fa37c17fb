"""bench/broad: what the site server's request log says about one crawl.

Each line of the log (broad_site.py) is ``<arrival> <answered> <host> <status> <path>``
in ``time.monotonic()`` seconds. From it: pages fetched, the rate overall and in the
steady state, the politeness of the crawler (the gaps between two requests to one host,
the requests in flight to one host at once) and, for the skewed site, when the small
hosts were done and how steadily the big one was fetched.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: A gap under this fraction of the delay counts as impolite (clock and network jitter aside).
GAP_TOLERANCE = 0.95
#: Seconds per bucket of the rate series.
SERIES_S = 5.0


@dataclass(frozen=True)
class Hit:
    """One logged request."""

    arrived: float
    answered: float
    host: str
    status: int
    path: str


def read_log(path: Path) -> list[Hit]:
    """Every request of the log, in arrival order (a torn last line is skipped)."""
    hits = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split(" ", 4)
        if len(parts) == 5:
            hits.append(Hit(float(parts[0]), float(parts[1]), parts[2], int(parts[3]), parts[4]))
    hits.sort(key=lambda h: h.arrived)
    return hits


@dataclass
class LogFigures:
    """The figures of one run, as the server saw it (times in seconds)."""

    requests: int = 0
    pages: int = 0  # distinct (host, path) answered 200
    refetches: int = 0  # 200 answers beyond the first of a page
    not_found: int = 0
    span_s: float = 0.0  # first to last request
    steady_pages_per_s: float | None = None
    gaps: int = 0
    min_gap_s: float | None = None
    min_gap_host: str = ""
    gaps_under_tolerance: int = 0  # gaps < GAP_TOLERANCE × delay
    gaps_under_delay: int = 0  # gaps < delay
    min_pair_gap_s: float | None = None  # least mean of two consecutive gaps to one host
    max_in_flight_per_host: int = 0
    small_done_s: float | None = None  # last request to a host but the big one, from the first request
    big_requests: int = 0
    big_rate: float | None = None  # requests/s to the big host, its first to its last request
    big_max_gap_s: float | None = None
    big_done_s: float | None = None  # last request to the big host, from the first request
    rate_series: list[float] = field(default_factory=list)  # new pages/s in each SERIES_S from the first request

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def steady_rate(times: list[float], low: float = 0.1, high: float = 0.9) -> float | None:
    """Pages/s between the ``low`` and ``high`` fractions of the pages (sorted times)."""
    if len(times) < 10:
        return None
    i, j = math.ceil(low * len(times)), math.floor(high * len(times)) - 1
    span = times[j] - times[i]
    return (j - i) / span if span > 0 and j > i else None


def rate_series(times: list[float], start: float, bucket: float = SERIES_S) -> list[float]:
    """Events per second in consecutive ``bucket``-second windows from ``start``."""
    if not times:
        return []
    counts = [0] * (int((times[-1] - start) // bucket) + 1)
    for t in times:
        counts[int((t - start) // bucket)] += 1
    return [round(n / bucket, 1) for n in counts]


def by_host(hits: list[Hit]) -> dict[str, list[Hit]]:
    """The requests of each host, in arrival order."""
    hosts: dict[str, list[Hit]] = defaultdict(list)
    for hit in hits:
        hosts[hit.host].append(hit)
    return hosts


def max_in_flight(hits: list[Hit]) -> int:
    """Most requests of ``hits`` between arrival and answer at one moment."""
    events = sorted([(h.arrived, 1) for h in hits] + [(h.answered, -1) for h in hits])
    running = peak = 0
    for _, step in events:  # at one instant an answer (-1) sorts before an arrival
        running += step
        peak = max(peak, running)
    return peak


def _gaps(hits: list[Hit]) -> list[float]:
    return [b.arrived - a.arrived for a, b in zip(hits, hits[1:], strict=False)]


def _politeness(fig: LogFigures, hosts: dict[str, list[Hit]], delay: float) -> None:
    for host, hits in hosts.items():
        gaps = _gaps(hits)
        fig.gaps += len(gaps)
        fig.gaps_under_tolerance += sum(g < GAP_TOLERANCE * delay for g in gaps)
        fig.gaps_under_delay += sum(g < delay for g in gaps)
        if gaps and (fig.min_gap_s is None or min(gaps) < fig.min_gap_s):
            fig.min_gap_s, fig.min_gap_host = min(gaps), host
        pairs = [(a + b) / 2 for a, b in zip(gaps, gaps[1:], strict=False)]
        if pairs and (fig.min_pair_gap_s is None or min(pairs) < fig.min_pair_gap_s):
            fig.min_pair_gap_s = min(pairs)
        fig.max_in_flight_per_host = max(fig.max_in_flight_per_host, max_in_flight(hits))


def _skew(fig: LogFigures, hosts: dict[str, list[Hit]], big_host: str, start: float) -> None:
    small = [hits[-1].arrived for host, hits in hosts.items() if host != big_host and hits]
    fig.small_done_s = max(small) - start if small else None
    big = hosts.get(big_host, [])
    fig.big_requests = len(big)
    if len(big) > 1:
        fig.big_rate = (len(big) - 1) / (big[-1].arrived - big[0].arrived)
        fig.big_max_gap_s = max(_gaps(big))
    if big:
        fig.big_done_s = big[-1].arrived - start


def analyse(hits: list[Hit], delay: float, big_host: str = "") -> LogFigures:
    """The figures of one run's log; ``big_host``: the host left out of the small hosts' finish."""
    fig = LogFigures(requests=len(hits))
    if not hits:
        return fig
    seen: set[tuple[str, str]] = set()
    page_times = []
    for hit in hits:
        if hit.status != 200:
            fig.not_found += 1
        elif (hit.host, hit.path) in seen:
            fig.refetches += 1
        else:
            seen.add((hit.host, hit.path))
            page_times.append(hit.arrived)
    fig.pages = len(page_times)
    fig.span_s = hits[-1].arrived - hits[0].arrived
    fig.steady_pages_per_s = steady_rate(page_times)
    fig.rate_series = rate_series(page_times, hits[0].arrived)
    hosts = by_host(hits)
    _politeness(fig, hosts, delay)
    if big_host:
        _skew(fig, hosts, big_host, hits[0].arrived)
    return fig
