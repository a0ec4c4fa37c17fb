"""The per-host pace rules as pure functions (the limiter's Lua applies the same in Redis:
tests/state/test_pace_twin.py checks they agree)."""

from __future__ import annotations

import pytest

from crawler_tasks.core.politeness import (
    Feedback,
    FeedbackKind,
    HostPace,
    PaceRules,
    autothrottle,
    count_ban,
    limits,
    released,
    succeed,
    throttle,
    time_out,
)
from crawler_tasks.core.settings import Settings

RULES = PaceRules(floor=0.0, backoff_max=60.0, concurrency=2)
NOW = 1000.0


def test_rules_come_from_the_settings_and_the_crawl_delay():
    s = Settings(download_delay=0.5, host_concurrency=3, autothrottle=True, retry_backoff_max=30,
                 proxies=("http://a:1", "http://b:2"), ban_threshold=4)
    rules = PaceRules.of(s, crawl_delay=2.0)
    assert (rules.floor, rules.concurrency, rules.autothrottle, rules.backoff_max, rules.proxies,
            rules.ban_threshold) == (2.0, 3, True, 30, 2, 4)
    assert PaceRules.of(s).floor == 0.5 and PaceRules.of(s, crawl_delay=0.1).floor == 0.5


# 429 / 503: back-off and Retry-After

def test_a_first_throttle_pauses_the_host_one_second_and_each_next_doubles_it():
    pace = throttle(HostPace(), None, RULES, NOW)
    assert (pace.backoff, pace.next, pace.throttled) == (1.0, NOW + 1, 1)
    pace = throttle(pace, None, RULES, NOW)
    assert (pace.backoff, pace.next, pace.throttled) == (2.0, NOW + 2, 2)
    assert throttle(HostPace(backoff=40), None, RULES, NOW).backoff == 60  # capped


def test_the_first_back_off_is_twice_the_floor_when_that_is_longer():
    assert throttle(HostPace(), None, PaceRules(floor=3.0), NOW).backoff == 6.0


def test_retry_after_sets_the_pause_capped_and_the_back_off_still_doubles():
    pace = throttle(HostPace(backoff=1.0), 7.0, RULES, NOW)
    assert (pace.backoff, pace.next) == (2.0, NOW + 7)
    assert throttle(HostPace(), 900.0, RULES, NOW).next == NOW + 60
    assert throttle(HostPace(), 0.0, RULES, NOW).next == NOW  # "Retry-After: 0": no pause


def test_a_throttle_never_brings_the_next_request_forward():
    assert throttle(HostPace(next=NOW + 50), 2.0, RULES, NOW).next == NOW + 50


# Successes relax the back-off; timeouts cut the concurrency

def test_successes_halve_the_back_off_until_it_is_dropped():
    pace, seen = HostPace(backoff=1.0), []
    for _ in range(6):
        pace = succeed(pace, RULES)
        seen.append(pace.backoff)
    assert seen == [0.5, 0.25, 0.125, 0.0625, 0.0, 0.0]  # 0.03125 < 0.05: dropped


def test_a_back_off_halved_to_the_floor_is_dropped():
    assert succeed(HostPace(backoff=4.0), PaceRules(floor=2.0)).backoff == 0.0
    assert succeed(HostPace(backoff=4.1), PaceRules(floor=2.0)).backoff == 2.05


def test_three_timeouts_in_a_row_cut_a_slot_and_ten_good_answers_give_it_back():
    pace = HostPace()
    for _ in range(3):
        pace = time_out(pace)
    assert (pace.strikes, pace.cut) == (0, 1)
    assert limits(pace, RULES) == (0.0, 1)
    for _ in range(9):
        pace = succeed(pace, RULES)
    assert (pace.cut, pace.good) == (1, 9)
    pace = succeed(pace, RULES)
    assert (pace.cut, pace.good) == (0, 0)
    assert limits(pace, RULES) == (0.0, 2)


def test_a_good_answer_ends_a_run_of_timeouts_and_a_timeout_a_run_of_good_answers():
    assert succeed(HostPace(strikes=2), RULES).strikes == 0
    assert time_out(HostPace(cut=1, good=7)).good == 0


def test_the_cut_never_takes_the_last_slot_nor_caps_an_uncapped_host():
    assert limits(HostPace(cut=5), RULES)[1] == 1
    assert limits(HostPace(cut=5), PaceRules(concurrency=0))[1] == 0


# AutoThrottle

AUTO = PaceRules(autothrottle=True, start_delay=5.0, target_concurrency=2.0, max_delay=60.0)


def test_autothrottle_moves_half_way_towards_latency_over_target_concurrency():
    pace, delays = HostPace(), []
    for _ in range(12):
        delays.append(limits(pace, AUTO)[0])
        pace = autothrottle(pace, 0.4, 200, AUTO)
    assert delays[:4] == pytest.approx([5.0, 2.6, 1.4, 0.8])
    assert delays[-1] == pytest.approx(0.2, abs=0.01)


def test_autothrottle_is_clamped_between_the_floor_and_its_max_delay():
    assert autothrottle(HostPace(auto=0.1), 0.0, 200, PaceRules(autothrottle=True, floor=0.5)).auto == 0.5
    assert autothrottle(HostPace(auto=50), 200.0, 200, AUTO).auto == 60.0


def test_a_non_200_answer_may_raise_the_delay_never_lower_it():
    assert autothrottle(HostPace(auto=0.2), 0.01, 500, AUTO).auto == 0.2
    assert autothrottle(HostPace(auto=0.2), 4.0, 500, AUTO).auto == pytest.approx(2.0)


def test_the_delay_is_the_largest_of_floor_back_off_and_autothrottle():
    assert limits(HostPace(backoff=3.0, auto=2.0), PaceRules(floor=1.0, autothrottle=True)) == (3.0, 2)
    assert limits(HostPace(backoff=3.0, auto=9.0), PaceRules(floor=1.0, autothrottle=True))[0] == 9.0
    assert limits(HostPace(auto=9.0), PaceRules(floor=1.0))[0] == 1.0  # AutoThrottle off
    assert limits(HostPace(), PaceRules(autothrottle=True, start_delay=5.0))[0] == 5.0


# Blocking signs and the switch to the proxies

PROXIED = PaceRules(ban_threshold=3, proxies=2)


def test_the_third_blocking_sign_in_a_row_switches_the_host_to_the_proxies():
    pace = HostPace()
    for kind in ("blocked", "throttled"):
        pace = count_ban(pace, FeedbackKind(kind), 403, PROXIED)
    assert (pace.ban, pace.proxied, pace.blocked) == (2, False, 1)
    pace = count_ban(pace, FeedbackKind.BLOCKED, 403, PROXIED)
    assert (pace.ban, pace.proxied, pace.blocked) == (3, True, 2)


def test_without_proxies_blocking_signs_are_counted_but_switch_nothing():
    pace = HostPace(ban=10)
    assert count_ban(pace, FeedbackKind.BLOCKED, 403, RULES).proxied is False


def test_an_answer_below_400_ends_a_run_of_blocking_signs_others_do_not():
    assert count_ban(HostPace(ban=2), FeedbackKind.OK, 200, PROXIED).ban == 0
    assert count_ban(HostPace(ban=2), FeedbackKind.OK, 404, PROXIED).ban == 2
    assert count_ban(HostPace(ban=2), FeedbackKind.TIMEOUT, 0, PROXIED).ban == 2
    assert count_ban(HostPace(ban=2, proxied=True), FeedbackKind.OK, 200, PROXIED).proxied


# A whole release

def test_a_release_says_whether_the_host_goes_through_the_proxies_and_benches_a_failed_proxy():
    done = released(HostPace(ban=2), Feedback("blocked", 403), PROXIED, NOW)
    assert done.proxied and done.bench_until is None
    done = released(HostPace(proxied=True), Feedback("proxy", proxy=1), PROXIED, NOW)
    assert done.proxied and done.bench_until == NOW + 300
    assert released(HostPace(proxied=True), Feedback("proxy"), PROXIED, NOW).bench_until is None
    assert not released(HostPace(proxied=True), Feedback("ok"), RULES, NOW).proxied


def test_a_release_reschedules_waiting_fetches_for_when_the_host_may_go():
    assert released(HostPace(), Feedback("throttled", 429, 4.0), RULES, NOW, waiting=True).due == NOW + 4
    assert released(HostPace(next=NOW - 5), Feedback("ok", 200), RULES, NOW, waiting=True).due == NOW
    assert released(HostPace(), Feedback("ok", 200), RULES, NOW).due is None


def test_a_timeout_does_not_feed_autothrottle_and_an_error_changes_nothing():
    auto = PaceRules(autothrottle=True)
    assert released(HostPace(auto=3.0), Feedback("timeout", latency=0.1), auto, NOW).pace.auto == 3.0
    pace = HostPace(backoff=2.0, strikes=1, cut=1, good=3, ban=1)
    assert released(pace, Feedback("error"), RULES, NOW).pace == pace
