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
