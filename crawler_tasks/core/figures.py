"""Figures derived from a crawl's counters: responses by status class, failures by reason,
store errors. The Prometheus exporter and ``crawler-tasks top`` show the same sums."""

from __future__ import annotations

from collections.abc import Mapping

from . import counters

#: Failures whose last attempt was not retried (no ``retry/max_reached/<reason>``).
OTHER = "other"


def status_classes(stats: Mapping[str, int]) -> dict[str, int]:
    """Responses per status class (``2xx``, ``3xx``...), from the ``status/<code>`` counters;
    classes with no response are left out."""
    classes: dict[str, int] = {}
    for name, n in stats.items():
        if counters.STATUS.matches(name):
            key = f"{name[len(counters.STATUS.prefix)]}xx"
            classes[key] = classes.get(key, 0) + n
    return dict(sorted(classes.items()))


def failure_reasons(stats: Mapping[str, int]) -> dict[str, int]:
    """Failure records per reason of the last attempt (``retry/max_reached/<reason>``), the
    rest of ``failures`` as :data:`OTHER`."""
    prefix = counters.RETRY_MAX_REACHED.prefix
    by_reason = {name[len(prefix):]: n for name, n in stats.items() if counters.RETRY_MAX_REACHED.matches(name)}
    other = stats.get(counters.FAILURES, 0) - sum(by_reason.values())
    return dict(sorted({**by_reason, **({OTHER: other} if other > 0 else {})}.items()))


def store_errors(stats: Mapping[str, int]) -> int:
    """Records a store refused or whose store stayed down."""
    return stats.get(counters.STORE_FAILED, 0) + stats.get(counters.STORE_REFUSED, 0)


def duration(seconds: float) -> str:
    """``45s``, ``3m 07s``, ``2h 05m``: a time left or taken, as a person writes it."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def time_left(stored: int, budget: int, outstanding: int, rate: float | None,
              shrinking: float | None) -> float | None:
    """Seconds a crawl has left: to its page ``budget`` at ``rate`` pages per second (0 once
    used up); with no budget, until its ``outstanding`` tasks are done at the pace they are
    ``shrinking`` per second (the frontier's growth counted in: none while it grows). None:
    no pace to tell by."""
    if not budget:
        return outstanding / shrinking if shrinking and shrinking > 0 and outstanding else None
    left = max(budget - stored, 0)
    if not left:
        return 0.0
    return left / rate if rate else None
