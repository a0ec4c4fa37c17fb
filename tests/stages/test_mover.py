"""When a mover looks at each shard of the politeness state (pure bookkeeping)."""

from __future__ import annotations

import pytest

from crawler_tasks.stages.mover import MAX_IDLE_S, MAX_SLEEP_S, MIN_SLEEP_S, ShardLooks, idle_look_s


def test_one_shard_is_looked_at_as_often_as_before_and_many_at_most_every_second():
    assert idle_look_s(1) == MAX_SLEEP_S == 0.1
    assert idle_look_s(4) == pytest.approx(0.4)
    assert idle_look_s(16) == MAX_IDLE_S == 1.0


def test_every_shard_is_looked_at_first_then_when_its_answer_says():
    looks = ShardLooks(4)
    assert looks.due(0.0) == [0, 1, 2, 3]
    looks.looked(0, 10.0, 0.0)  # it moved fetches: look again at once
    looks.looked(1, 10.0, 0.3)  # its next host is due in 0.3 s
    looks.looked(2, 10.0, None)  # nothing waits there
    looks.looked(3, 10.0, 60.0)  # a host far off: still looked at once idle_s is out
    assert looks.due(10.0) == [0]
    assert looks.due(10.3) == [0, 1]
    assert looks.due(10.4) == [0, 1, 2, 3]


def test_a_hint_brings_a_look_forward_but_never_puts_one_off():
    looks = ShardLooks(16)
    for k in range(16):
        looks.looked(k, 0.0, None)
    looks.hint({5: 0.2, 7: 5.0, 99: 0.0})  # a later hint, and a shard this mover does not know
    assert looks.due(0.2) == [5]
    assert looks.next[7] == 1.0


def test_the_sleep_until_the_next_look_is_kept_between_its_bounds():
    looks = ShardLooks(2)
    looks.looked(0, 0.0, 0.0)
    looks.looked(1, 0.0, None)
    assert looks.sleep_s(0.0) == MIN_SLEEP_S
    looks.looked(0, 0.0, 0.05)
    assert looks.sleep_s(0.0) == pytest.approx(0.05)
    looks.looked(0, 0.0, None)
    assert looks.sleep_s(0.0) == MAX_SLEEP_S  # idle: 0.2 s away, the mover still wakes at 0.1
