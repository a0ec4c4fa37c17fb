"""The revisit schedule's rules: when a known page is fetched again, and how that is kept.

A crawl with revisits on keeps, for every page it stored, a next-fetch time in Redis. The
interval adapts to how often the page changes, in the spirit of Nutch's
``AdaptiveFetchSchedule``, within ``CRAWLER_REVISIT_MIN_S`` and ``CRAWLER_REVISIT_MAX_S``:

* found unchanged (same signature, or ``304 Not Modified``): the interval grows by
  ``CRAWLER_REVISIT_GROWTH`` (a fifth, by default);
* found changed: the interval moves 30 % of the way to the time since the change seen
  before (less a quarter of the interval, as the change happened somewhere before this
  visit); if the visit before saw a change too, the page may change faster than it is
  looked at, and that estimate is cut by a fifth more.

Nutch's own rule (grow by 40 %, shrink by 20 %) settles at about 0.6 of a page's
period, fetching it 1.7 times as often as it changes; this one stays within 2× of the
period and about one fetch a change once it has settled, which takes some tens of
visits from an initial interval far off (``tests/core/test_revisit.py`` runs both
against pages changing every 1, 4 and 16 ticks). A response's ``Cache-Control: max-age`` or
``Expires`` is a floor for the interval (nothing new is promised sooner); a seed or a
rule can pin a URL's interval (``meta={"revisit_every": 600}``).

In Redis a URL costs one sorted-set member, the URL itself, whose score carries its
due time, its interval, whether the interval is pinned and its depth
(:func:`pack`/:func:`unpack`): the due second times 2**16, plus 16 bits (interval on a
logarithmic scale in 11 bits, the pin in one, the depth up to 15 in four).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from .settings import Settings

#: Bits of a score below the due second.
CODE_BITS = 16
_SCALE = 1 << CODE_BITS
#: Interval steps per doubling (2**(1/64): 1.1 % apart), up to 2**(2047/64) s (far more
#: than ``CRAWLER_REVISIT_MAX_S`` allows).
_STEPS = 64
_MAX_STEP = (1 << 11) - 1
#: Depths up to this are kept exactly; deeper pages are revisited at this depth.
MAX_DEPTH = 15

#: Request ``meta`` keys of the schedule: a pinned interval (a seed's or a rule's), and
#: what a revisit carries (its interval, when it was due, and whether it is pinned).
PIN = "revisit_every"
REVISIT = "revisit"


@dataclass(frozen=True)
class Slot:
    """One URL's place in the schedule."""

    due: float
    interval: float
    pinned: bool = False
    depth: int = 0


def pack(slot: Slot) -> float:
    """The sorted-set score of ``slot`` (due second and code)."""
    step = min(_MAX_STEP, max(0, round(math.log2(max(slot.interval, 1.0)) * _STEPS)))
    code = step << 5 | int(slot.pinned) << 4 | min(max(slot.depth, 0), MAX_DEPTH)
    return float(int(slot.due) * _SCALE + code)


def unpack(score: float) -> Slot:
    """The slot a score keeps (interval within 1.1 %, due to the second)."""
    due, code = divmod(int(score), _SCALE)
    return Slot(float(due), 2.0 ** ((code >> 5) / _STEPS), bool(code >> 4 & 1), code & 0xF)


def due_score(now: float) -> float:
    """The highest score of a URL due at ``now``."""
    return float(int(now) * _SCALE + _SCALE - 1)


@dataclass(frozen=True)
class RevisitPolicy:
    """The bounds and the growth of the intervals (see the module docstring)."""

    min_s: float
    max_s: float
    growth: float = 0.2

    @classmethod
    def of(cls, settings: Settings) -> RevisitPolicy:
        return cls(settings.revisit_min_s, settings.revisit_max_s, settings.revisit_growth)

    def bounded(self, interval: float) -> float:
        return min(self.max_s, max(self.min_s, interval))

    def first(self, initial: float, *, pinned: float | None = None, hint: float | None = None) -> float:
        """The interval of a page fetched for the first time in its crawl."""
        if pinned:
            return self.bounded(pinned)
        return self.bounded(max(initial, hint or 0.0))

    def after_visit(self, interval: float, changed: bool, *, now: float, due: float,
                    changed_before: float, hint: float | None = None) -> float:
        """The interval after a visit at ``now`` that was due at ``due`` with ``interval``,
        when the text last changed at ``changed_before`` (the visit that saw it)."""
        last_changed = changed_before >= due - interval * 1.5  # the visit before saw it
        return self.next(interval, changed, since_change=now - changed_before,
                         last_changed=last_changed, hint=hint)

    def next(self, interval: float, changed: bool, *, since_change: float,
             last_changed: bool, hint: float | None = None) -> float:
        """The interval after a visit that found the page ``changed`` or not.

        ``since_change``: seconds from the change seen before to this visit;
        ``last_changed``: the visit before this one saw a change too.
        """
        if changed:
            estimate = since_change - interval / 4
            if last_changed:
                estimate = min(estimate, interval) * 0.8
            interval += (estimate - interval) * 0.3
        else:
            interval *= 1 + self.growth
        return self.bounded(max(interval, hint or 0.0))


_MAX_AGE = re.compile(r"(?:^|,)\s*(?:s-maxage|max-age)\s*=\s*\"?(\d+)", re.IGNORECASE)
_NO_STORE = re.compile(r"(?:^|,)\s*(?:no-store|no-cache)\b", re.IGNORECASE)


def freshness(headers: Mapping[str, str]) -> float | None:
    """How long a response says it stays fresh (``Cache-Control: max-age``, else
    ``Expires`` less ``Date``), in seconds; None when it says nothing or not to cache."""
    cache = headers.get("cache-control", "")
    if _NO_STORE.search(cache):
        return None
    found = _MAX_AGE.search(cache)
    if found:
        return float(found.group(1)) or None
    try:
        expires = parsedate_to_datetime(headers["expires"])
        date = parsedate_to_datetime(headers["date"])
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    seconds = (expires - date).total_seconds()
    return seconds if seconds > 0 else None
