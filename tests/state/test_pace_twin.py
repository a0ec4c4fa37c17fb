"""The host limiter's Lua and its Python twin (:mod:`crawler_tasks.core.politeness`) agree.

Each case writes a host's state into Redis, releases a slot through
:meth:`HostLimiter.release` (the real script, however it is loaded), reads the host back,
and compares it with :func:`~crawler_tasks.core.politeness.released` run on the same
inputs; then it takes slots through :meth:`HostLimiter.acquire` to read the delay and
concurrency the host now has, against :func:`~crawler_tasks.core.politeness.limits`.
Redis's clock is read before and after each call: what depends on the time must lie
between what the twin says for either end.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
import redis

from crawler_tasks.core.politeness import Feedback, HostPace, PaceRules, limits, released
from crawler_tasks.core.settings import Settings
from crawler_tasks.state.hosts import HostLimiter
from crawler_tasks.state.keys import Keys
from tests.helpers import REDIS, TEST_DB, token

HOST = "twin.test:80"
#: Redis keeps the script's times as Lua prints them (14 significant digits): 0.1 ms here.
CLOCK = 1e-3
BASE = {"download_delay": 0.0, "host_concurrency": 2, "retry_backoff_max": 30.0, "autothrottle": False,
        "autothrottle_start_delay": 5.0, "autothrottle_target_concurrency": 1.0,
        "autothrottle_max_delay": 60.0, "ban_threshold": 3, "proxies": (), "proxy_bench_s": 300.0}
TWO_PROXIES = ("http://127.0.0.1:1", "http://127.0.0.1:2")
AUTO = {"autothrottle": True, "autothrottle_target_concurrency": 2.0}


@dataclass(frozen=True)
class Case:
    name: str
    feedback: Feedback
    pace: HostPace = HostPace()
    settings: dict[str, Any] = field(default_factory=dict)
    crawl_delay: float | None = None
    next_in: float | None = None  # the host's ``next``, seconds from now (None: not set)
    waiting: bool = False  # fetches wait for the host


CASES = [
    # 429 / 503: back-off, Retry-After
    Case("first 429", Feedback("throttled", 429)),
    Case("503 doubles the back-off", Feedback("throttled", 503), HostPace(backoff=1.0)),
    Case("back-off capped", Feedback("throttled", 503), HostPace(backoff=20.0)),
    Case("Retry-After", Feedback("throttled", 429, retry_after=4.0)),
    Case("Retry-After capped", Feedback("throttled", 429, retry_after=900.0), HostPace(backoff=2.0)),
    Case("Retry-After 0", Feedback("throttled", 503, retry_after=0.0)),
    Case("fractional Retry-After", Feedback("throttled", 503, retry_after=1.75), HostPace(backoff=0.3)),
    Case("back-off from the delay", Feedback("throttled", 429), settings={"download_delay": 3.0}),
    Case("back-off from Crawl-delay", Feedback("throttled", 429), crawl_delay=2.5),
    Case("a later next stands", Feedback("throttled", 429, retry_after=2.0), next_in=100.0),
    Case("an earlier next moves", Feedback("throttled", 429, retry_after=5.0), next_in=1.0),
    Case("third sign: proxied", Feedback("throttled", 429), HostPace(ban=2), {"proxies": TWO_PROXIES}),
    Case("signs without proxies", Feedback("throttled", 503), HostPace(ban=5, throttled=4)),
    # successes
    Case("success halves", Feedback("ok", 200), HostPace(backoff=1.0)),
    Case("small back-off dropped", Feedback("ok", 200), HostPace(backoff=0.08)),
    Case("small back-off kept", Feedback("ok", 200), HostPace(backoff=0.12)),
    Case("halved to the floor: dropped", Feedback("ok", 200), HostPace(backoff=2.0),
         {"download_delay": 1.0}),
    Case("halved above the floor", Feedback("ok", 200), HostPace(backoff=2.5), {"download_delay": 1.0}),
    Case("a 500 relaxes too", Feedback("ok", 500), HostPace(backoff=4.0)),
    Case("tenth good answer", Feedback("ok", 200), HostPace(cut=1, good=9)),
    Case("good answers counted", Feedback("ok", 200), HostPace(cut=2, good=3, strikes=0)),
    Case("ninth good answer", Feedback("ok", 404), HostPace(cut=1, good=8)),
    Case("strikes forgotten", Feedback("ok", 200), HostPace(strikes=2)),
    Case("ban run ended", Feedback("ok", 200), HostPace(ban=2)),
    Case("a 404 keeps the ban run", Feedback("ok", 404), HostPace(ban=2)),
    Case("a 304 ends the ban run", Feedback("ok", 304, latency=0.1), HostPace(ban=1, backoff=0.5)),
    # timeouts
    Case("first timeout", Feedback("timeout")),
    Case("third timeout cuts", Feedback("timeout"), HostPace(strikes=2), {"host_concurrency": 3}),
    Case("cut again", Feedback("timeout"), HostPace(strikes=2, cut=1), {"host_concurrency": 4}),
    Case("timeout ends good run", Feedback("timeout"), HostPace(cut=1, good=5)),
    Case("cut past the cap", Feedback("timeout"), HostPace(strikes=2, cut=4)),
    Case("cut, uncapped", Feedback("timeout"), HostPace(strikes=2, cut=1), {"host_concurrency": 0}),
    Case("timeout skips AutoThrottle", Feedback("timeout", latency=20.0), HostPace(auto=3.0), AUTO),
    # AutoThrottle
    Case("auto from the start delay", Feedback("ok", 200, latency=0.4), settings=AUTO),
    Case("auto half-way", Feedback("ok", 200, latency=0.4), HostPace(auto=0.8), AUTO),
    Case("auto: an error answer does not lower", Feedback("ok", 500, latency=0.01), HostPace(auto=0.2), AUTO),
    Case("auto: a 304 does not lower", Feedback("ok", 304, latency=0.01), HostPace(auto=1.0), AUTO),
    Case("auto: an error answer raises", Feedback("ok", 500, latency=4.0), HostPace(auto=0.2), AUTO),
    Case("auto: the floor", Feedback("ok", 200, latency=0.001), HostPace(auto=1.1),
         {**AUTO, "download_delay": 1.0}),
    Case("auto: the max", Feedback("ok", 200, latency=100.0), HostPace(auto=9.0),
         {**AUTO, "autothrottle_max_delay": 10.0}),
    Case("auto and a 429", Feedback("throttled", 429, retry_after=3.0, latency=0.3), HostPace(auto=1.0), AUTO),
    Case("auto and a 403", Feedback("blocked", 403, latency=1.0), HostPace(auto=0.3), AUTO),
    Case("auto, latency unknown", Feedback("ok", 200), HostPace(auto=2.0), AUTO),
    Case("auto off: its delay ignored", Feedback("ok", 200, latency=0.1), HostPace(auto=7.0)),
    Case("auto, start below the floor", Feedback("ok", 200, latency=0.2),
         settings={**AUTO, "autothrottle_start_delay": 0.5, "download_delay": 2.0}),
    Case("auto, start below the floor, a 500", Feedback("ok", 500, latency=0.2),
         settings={**AUTO, "autothrottle_start_delay": 0.5, "download_delay": 2.0}),
    # blocking signs, proxies
    Case("first sign switches (threshold 1)", Feedback("blocked", 403), settings={
        "proxies": TWO_PROXIES[:1], "ban_threshold": 1}),
    Case("second sign", Feedback("blocked", 403), HostPace(ban=1), {"proxies": TWO_PROXIES}),
    Case("blocked, no proxies", Feedback("blocked", 403), HostPace(ban=2, blocked=2)),
    Case("blocked through a proxy", Feedback("blocked", 403, proxy=0), HostPace(ban=4, proxied=True),
         {"proxies": TWO_PROXIES}),
    Case("ban page", Feedback("blocked", 200, latency=0.05), settings={"proxies": TWO_PROXIES}),
    Case("failed proxy benched", Feedback("proxy", proxy=1), HostPace(proxied=True), {"proxies": TWO_PROXIES}),
    Case("407 through a proxy", Feedback("proxy", 407, proxy=0), HostPace(proxied=True, ban=1),
         {"proxies": TWO_PROXIES}),
    Case("proxy failure, no proxy named", Feedback("proxy"), settings={"proxies": TWO_PROXIES}),
    Case("an error changes nothing", Feedback("error"), HostPace(backoff=2.0, strikes=1, cut=1, good=3, ban=1)),
    Case("an error on a proxied host", Feedback("error", proxy=0), HostPace(proxied=True),
         {"proxies": TWO_PROXIES}),
    # fetches waiting for the host
    Case("waiting, 429", Feedback("throttled", 429, retry_after=3.0), waiting=True),
    Case("waiting, success", Feedback("ok", 200), waiting=True),
    Case("waiting, next later", Feedback("ok", 200), next_in=10.0, waiting=True),
    Case("waiting, next past", Feedback("timeout"), next_in=-10.0, waiting=True),
]


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(f"{REDIS}/{TEST_DB}")
    yield client
    client.close()


class Twin:
    """One host in Redis, driven through the real limiter, and its Python twin."""

    def __init__(self, client: redis.Redis, settings: dict[str, Any], crawl_delay: float | None) -> None:
        self.redis = client
        self.keys = Keys(f"twin{token()}")
        self.settings = Settings.from_env().replace(**{**BASE, **settings})
        self.limiter = HostLimiter(client, self.keys, self.settings)
        self.crawl_delay = crawl_delay
        self.rules = PaceRules.of(self.settings, crawl_delay)

    def now(self) -> float:
        seconds, micros = self.redis.time()
        return seconds + micros / 1e6

    def write(self, pace: HostPace) -> None:
        fields = {"next": repr(pace.next), "backoff": repr(pace.backoff), "strikes": pace.strikes,
                  "cut": pace.cut, "good": pace.good, "ban": pace.ban, "proxied": int(pace.proxied),
                  "throttled": pace.throttled, "blocked": pace.blocked}
        if pace.auto is not None:
            fields["auto"] = repr(pace.auto)
        self.redis.delete(self.keys.host(HOST))
        self.redis.hset(self.keys.host(HOST), mapping=fields)

    def read(self) -> HostPace:
        h = {k.decode(): v.decode() for k, v in self.redis.hgetall(self.keys.host(HOST)).items()}
        return HostPace(next=float(h.get("next", 0)), backoff=float(h.get("backoff", 0)),
                        strikes=int(h.get("strikes", 0)), cut=int(h.get("cut", 0)), good=int(h.get("good", 0)),
                        auto=float(h["auto"]) if "auto" in h else None, ban=int(h.get("ban", 0)),
                        proxied=h.get("proxied") == "1", throttled=int(h.get("throttled", 0)),
                        blocked=int(h.get("blocked", 0)))

    def release(self, pace: HostPace, feedback: Feedback, *, waiting: bool = False) -> tuple[HostPace, HostPace]:
        """Release through the script from ``pace`` and check it against the twin: (the host's
        pace as Redis has it after, as the twin says it at the time before the call)."""
        self.write(pace)
        for key in (self.keys.host_wait(HOST), self.keys.hosts_due(0), self.keys.proxies_benched(0)):
            self.redis.delete(key)
        if waiting:  # as park leaves it: the fetch in the room, the host marked
            self.redis.zadd(self.keys.host_wait(HOST), {"waiting-fetch": 0})
            self.redis.hset(self.keys.host(HOST), "waiting", 1)
        before, sent_late = self.now(), time.monotonic()
        proxied = self.limiter.release(HOST, "task", feedback, crawl_delay=self.crawl_delay)
        sent_early, after = time.monotonic(), self.now()
        got = self.read()
        # Seconds since the request went out, at the far ends of the call (-1: not known).
        ago = (sent_early - feedback.sent_at, sent_late - feedback.sent_at) if feedback.sent_at else (-1.0, -1.0)
        early = released(pace, feedback, self.rules, before, waiting=waiting, sent_ago=ago[0])
        late = released(pace, feedback, self.rules, after, waiting=waiting, sent_ago=ago[1])
        want = early.pace
        assert replace(got, next=0.0, backoff=0.0, auto=None) == replace(want, next=0.0, backoff=0.0, auto=None)
        assert got.backoff == pytest.approx(want.backoff, rel=1e-12)
        assert (got.auto is None) is (want.auto is None)
        if want.auto is not None:
            assert got.auto == pytest.approx(want.auto, rel=1e-12)
        assert early.pace.next - CLOCK <= got.next <= late.pace.next + CLOCK
        assert proxied is early.proxied
        benched = self.redis.zscore(self.keys.proxies_benched(0), str(feedback.proxy))
        if early.bench_until is None:
            assert benched is None
        else:
            assert early.bench_until - CLOCK <= benched <= late.bench_until + CLOCK  # type: ignore[operator]
        due = self.redis.zscore(self.keys.hosts_due(0), HOST)
        if early.due is None:
            assert due is None
        else:
            assert early.due - CLOCK <= due <= late.due + CLOCK  # type: ignore[operator]
        return got, want

    def check_limits(self, pace: HostPace) -> tuple[float, int]:
        """The delay and concurrency :meth:`HostLimiter.acquire` gives the host, against the twin."""
        for key in (self.keys.host_wait(HOST), self.keys.proxies_benched(0), self.keys.host_slots(HOST)):
            self.redis.delete(key)
        self.redis.hdel(self.keys.host(HOST), "waiting")  # as the mover leaves an emptied room
        delay, concurrency = limits(pace, self.rules)
        went = 0
        for i in range(max(concurrency, 4) + 1):
            self.redis.hset(self.keys.host(HOST), "next", 0)  # the delay is not what is measured here
            if not self.limiter.acquire(HOST, f"probe{i}", crawl_delay=self.crawl_delay).go:
                break
            went += 1
            if i == 0:
                assert float(self.redis.hget(self.keys.host(HOST), "delay")) == pytest.approx(delay, rel=1e-12)
        assert went == (concurrency or max(concurrency, 4) + 1)
        return delay, concurrency

    def clean(self) -> None:
        for key in self.redis.scan_iter(f"{self.keys.prefix}:*"):
            self.redis.delete(key)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_script_and_its_python_twin_agree(client, case):
    twin = Twin(client, case.settings, case.crawl_delay)
    try:
        pace = case.pace
        if case.next_in is not None:
            pace = replace(pace, next=twin.now() + case.next_in)
        got, _ = twin.release(pace, case.feedback, waiting=case.waiting)
        twin.check_limits(got)
    finally:
        twin.clean()


FEEDBACKS = [Feedback("ok", 200, latency=0.2), Feedback("ok", 200, latency=1.5), Feedback("ok", 404, latency=0.1),
             Feedback("ok", 500, latency=3.0), Feedback("ok", 200), Feedback("throttled", 429),
             Feedback("throttled", 503, retry_after=2.0, latency=0.4), Feedback("throttled", 429, retry_after=0.5),
             Feedback("blocked", 403, latency=0.3), Feedback("blocked"), Feedback("timeout"),
             Feedback("timeout"), Feedback("proxy", proxy=1), Feedback("proxy", 407, proxy=0), Feedback("error")]


STEPS = 60


@pytest.mark.parametrize("seed,settings", [
    (1, {}),
    (2, {**AUTO, "download_delay": 0.25, "host_concurrency": 3, "proxies": TWO_PROXIES}),
    (3, {"download_delay": 1.0, "host_concurrency": 4, "ban_threshold": 5, "proxies": TWO_PROXIES[:1]}),
    (4, {**AUTO, "host_concurrency": 0, "autothrottle_max_delay": 2.0}),
])
def test_a_run_of_answers_leaves_script_and_twin_in_the_same_state(client, seed, settings):
    """:data:`STEPS` answers in a row on one host, the twin carrying its own state (its ``next`` taken
    from Redis after each step: that one depends on the clock)."""
    rng = random.Random(seed)
    twin = Twin(client, settings, crawl_delay=0.5 if seed % 2 else None)
    try:
        pace = HostPace()
        for _ in range(STEPS):
            feedback = rng.choice(FEEDBACKS)
            if rng.random() < 0.5:  # sent a while ago (a busy worker sends late after its acquire)
                feedback = replace(feedback, sent_at=time.monotonic() - rng.uniform(0.0, 2.0))
            got, want = twin.release(pace, feedback, waiting=rng.random() < 0.2)
            pace = replace(want, next=got.next)
        twin.check_limits(pace)
    finally:
        twin.clean()
