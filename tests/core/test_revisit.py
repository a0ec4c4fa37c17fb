"""The revisit schedule's rules: the packed slot, the freshness hint, and an interval that
follows how often a page changes."""

from __future__ import annotations

import pytest

from crawler_tasks.core.revisit import RevisitPolicy, Slot, due_score, freshness, pack, unpack

TICK = 60.0  # Beat's tick in the simulations: a page can be looked at once a tick at most
POLICY = RevisitPolicy(min_s=TICK, max_s=64 * TICK, growth=0.2)


def test_a_slot_survives_its_score_within_its_steps():
    slot = Slot(due=1_795_000_123.0, interval=3600.0, pinned=True, depth=3)
    back = unpack(pack(slot))
    assert back.due == slot.due and back.pinned and back.depth == 3
    assert back.interval == pytest.approx(3600, rel=0.011)
    deep = unpack(pack(Slot(due=10.0, interval=0.2, depth=40)))
    assert deep.depth == 15 and deep.interval == 1.0
    assert unpack(pack(Slot(due=10.0, interval=1e12))).interval == pytest.approx(2 ** (2047 / 64))


def test_due_scores_order_by_due_second_whatever_the_slot():
    early = pack(Slot(due=100.0, interval=1e7, pinned=True, depth=15))
    late = pack(Slot(due=101.0, interval=1.0))
    assert early < late
    assert early <= due_score(100.9) < late


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"cache-control": "public, max-age=600"}, 600.0),
    ({"cache-control": "s-maxage=120, max-age=60"}, 120.0),
    ({"cache-control": "no-cache, max-age=600"}, None),
    ({"expires": "Thu, 01 Jan 2026 01:00:00 GMT", "date": "Thu, 01 Jan 2026 00:00:00 GMT"}, 3600.0),
    ({"expires": "0", "date": "Thu, 01 Jan 2026 00:00:00 GMT"}, None),
    ({}, None),
])
def test_freshness_from_cache_control_or_expires(headers, seconds):
    assert freshness(headers) == seconds


def test_the_first_interval_honours_a_pin_and_a_freshness_floor():
    assert POLICY.first(600.0) == 600.0
    assert POLICY.first(600.0, hint=1200.0) == 1200.0
    assert POLICY.first(600.0, pinned=120.0, hint=1200.0) == 120.0
    assert POLICY.first(1.0) == TICK and POLICY.first(1e9) == 64 * TICK


def _revisits(period: int, ticks: int, warm: int, initial: float,
              step=POLICY.after_visit) -> tuple[int, list[float]]:
    """Visit a page that changes every ``period`` ticks as the schedule says: how many
    visits after ``warm`` ticks, and the intervals they left."""
    interval, due, version, changed_at = initial, 0.0, None, 0.0
    visits, intervals = 0, []
    for tick in range(ticks):
        now = tick * TICK
        if now < due:
            continue
        seen = tick // period
        if version is None:
            changed_at = now
        else:
            changed = seen != version
            interval = step(interval, changed, now=now, due=due, changed_before=changed_at)
            if changed:
                changed_at = now
        version = seen
        due = due + interval if due + interval > now else now + interval
        if tick >= warm:
            visits += 1
            intervals.append(interval / TICK)
    return visits, intervals


@pytest.mark.parametrize("period", [1, 4, 16])
@pytest.mark.parametrize("initial", [1, 8, 32])
def test_the_interval_follows_how_often_the_page_changes(period, initial):
    ticks, warm = 800, 300
    visits, intervals = _revisits(period, ticks, warm, initial * TICK)
    ideal = (ticks - warm) / period
    assert all(period / 2 <= i <= 2 * period for i in intervals), (min(intervals), max(intervals))
    assert ideal / 1.5 <= visits <= ideal * 1.5, (visits, ideal)


def test_nutchs_own_rule_fetches_a_page_more_often_than_it_changes():
    def nutch(interval, changed, **_):
        return POLICY.bounded(interval * (0.8 if changed else 1.4))

    visits, _ = _revisits(4, 800, 300, 8 * TICK, step=nutch)
    assert visits > 1.5 * (800 - 300) / 4  # what the rule above does better
