"""The markdown the benchmarks print: cells, medians, a table's head."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

#: A cell with no figure.
DASH = "–"


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values present (None when there is none)."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def num(value: float | None, digits: int = 0) -> str:
    """``value`` with thousands separators and ``digits`` decimals, or a dash."""
    return DASH if value is None else f"{value:,.{digits}f}"


def head(header: str) -> list[str]:
    """A table's header line and the delimiter row under it (as many cells)."""
    return [header, "|" + "---|" * (header.count(" | ") + 1)]
