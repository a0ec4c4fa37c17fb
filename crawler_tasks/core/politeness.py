"""Per-host politeness: a host's key, the limiter's answer, a download's feedback, and the
rules that adapt a host's pace to what its answers say.

The limiter that keeps each host's pace for the cluster is :mod:`crawler_tasks.state.hosts`:
its Lua scripts apply these rules atomically in Redis, one call per page. The functions
here say the same rules in Python, as pure functions of a :class:`HostPace` (what the
limiter keeps of a host), a :class:`Feedback` and the :class:`PaceRules` from the
settings: :func:`released` is what a release does to the host (back-off on 429/503 and
``Retry-After``, relaxing on success, the concurrency cut after timeouts, AutoThrottle,
the ban count that switches a host to the proxies, benching a failed proxy) and
:func:`limits` the delay and concurrency the host then has. ``tests/state/test_pace_twin.py``
runs both on the same inputs and checks they agree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from .settings import Settings

DEFAULT_PORTS = {"http": 80, "https": 443}


def host_key(url: str) -> str:
    """The politeness key of ``url``: lower-case host and port (the scheme's default if none)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    host = (parts.hostname or "").lower()
    return f"{host}:{port or DEFAULT_PORTS.get(parts.scheme, 0)}"


@dataclass(frozen=True)
class Slot:
    """What :meth:`crawler_tasks.state.hosts.HostLimiter.acquire` answered: go now, or wait until ``until`` (Redis time)."""

    go: bool
    until: float = 0.0
    #: Index of the proxy (``CRAWLER_PROXIES``) to go through; None = direct.
    proxy: int | None = None
    #: Seconds to wait before sending: a fetch handed over just before its host's next time
    #: goes at that time (its slot is held meanwhile).
    wait: float = 0.0


class FeedbackKind(StrEnum):
    """What a download told about its host (the same strings go to the limiter's Lua)."""

    OK = "ok"  # a response (whatever its status, unless another kind says more)
    THROTTLED = "throttled"  # 429 or 503: slow down
    BLOCKED = "blocked"  # 403, a ban page, a connection reset
    TIMEOUT = "timeout"  # timed out, refused or failed to connect: the host struggles
    PROXY = "proxy"  # the proxy the request went through failed
    ERROR = "error"  # anything else: nothing learnt about the host


#: Answers that are blocking signs: ``CRAWLER_BAN_THRESHOLD`` in a row switch the host to
#: the proxies (when there are some).
BLOCKING_SIGNS = frozenset({FeedbackKind.THROTTLED, FeedbackKind.BLOCKED})


@dataclass(frozen=True)
class Feedback:
    """What a download told about its host, for :meth:`crawler_tasks.state.hosts.HostLimiter.release`.

    ``kind`` (:class:`FeedbackKind`; its string value is accepted too): ``ok``
    (a response), ``throttled`` (429 or 503), ``blocked`` (403, a ban page, a
    connection reset), ``timeout`` (timed out or the connection failed),
    ``proxy`` (the proxy ``proxy`` failed), ``error`` (anything else).
    Throttled and blocked answers are blocking signs. ``latency`` is -1 when
    unknown, ``status`` 0 when no response came.
    """

    kind: FeedbackKind = FeedbackKind.OK
    status: int = 0
    retry_after: float | None = None
    latency: float = -1.0
    proxy: int | None = None
    #: ``time.monotonic()`` when the request went out (0.0: not known): the host's next
    #: request is spaced from it (:func:`released`).
    sent_at: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", FeedbackKind(self.kind))


#: Seconds before a host's next time that its next waiting fetch is handed over: about the
#: hand-over's own latency (publish, delivery, the task's start). The fetch, its slot
#: reserved, then waits out the rest in its thread and is sent at the host's next time.
LEAD_S = 0.05
#: Seconds after the host's next time that such a fetch is sent: the previous request may
#: have reached the host a few milliseconds after its own start.
MARGIN_S = 0.01
#: A first back-off (seconds) is at least this, or twice the host's delay floor.
BACKOFF_START = 1.0
#: A back-off halved below this (or to the floor) is dropped.
BACKOFF_MIN = 0.05
#: Timeouts (or failed connections) in a row that cut a host's concurrency by one.
TIMEOUT_STRIKES = 3
#: Good answers in a row that give one cut slot back.
GOOD_TO_RESTORE = 10


@dataclass(frozen=True)
class PaceRules:
    """The settings the pace rules read, for one host (``floor``: the larger of
    ``CRAWLER_DOWNLOAD_DELAY`` and the host's robots.txt ``Crawl-delay``)."""

    floor: float = 0.0
    backoff_max: float = 60.0  # CRAWLER_RETRY_BACKOFF_MAX: caps the back-off and Retry-After
    concurrency: int = 2  # CRAWLER_HOST_CONCURRENCY (0: no cap)
    autothrottle: bool = False
    target_concurrency: float = 1.0
    max_delay: float = 60.0  # AutoThrottle's
    start_delay: float = 5.0  # AutoThrottle's, for a host it has no latency of
    ban_threshold: int = 3
    proxies: int = 0  # how many are configured
    proxy_bench_s: float = 300.0

    @classmethod
    def of(cls, settings: Settings, crawl_delay: float | None = None, *, delay: float | None = None,
           concurrency: int | None = None) -> PaceRules:
        """The rules ``settings`` give a host whose robots.txt says ``crawl_delay``, for a
        crawl whose own ``delay`` and ``concurrency`` (None: the settings') replace the settings'."""
        s = settings
        return cls(floor=delay_floor(s.download_delay, crawl_delay, delay), backoff_max=s.retry_backoff_max,
                   concurrency=s.host_concurrency if concurrency is None else concurrency,
                   autothrottle=s.autothrottle,
                   target_concurrency=s.autothrottle_target_concurrency,
                   max_delay=s.autothrottle_max_delay, start_delay=s.autothrottle_start_delay,
                   ban_threshold=s.ban_threshold, proxies=len(s.proxies), proxy_bench_s=s.proxy_bench_s)


@dataclass(frozen=True)
class HostPace:
    """What the limiter keeps of a host's pace (the fields of its Redis hash).

    ``next``: when (Redis time) its next request may start · ``backoff``: the
    back-off delay after 429/503 (0: none) · ``strikes``: timeouts in a row ·
    ``cut``: slots taken off its concurrency · ``good``: good answers in a row
    while cut · ``auto``: AutoThrottle's delay (None: no latency seen yet) ·
    ``ban``: blocking signs in a row · ``proxied``: it goes through the proxies ·
    ``throttled``, ``blocked``: counts for ``stats``.
    """

    next: float = 0.0
    backoff: float = 0.0
    strikes: int = 0
    cut: int = 0
    good: int = 0
    auto: float | None = None
    ban: int = 0
    proxied: bool = False
    throttled: int = 0
    blocked: int = 0


@dataclass(frozen=True)
class Released:
    """What releasing a slot with some feedback did: the host's new ``pace``; ``proxied``:
    it goes through the proxies now; ``bench_until``: the failed proxy is benched until
    then (Redis time; None: none benched); ``due``: when the host's waiting fetches may
    move (None when none wait)."""

    pace: HostPace
    proxied: bool
    bench_until: float | None = None
    due: float | None = None


def delay_floor(setting: float, crawl_delay: float | None, own: float | None = None) -> float:
    """The least delay between two requests to a host: the crawl's ``own`` delay (else the
    ``setting``), raised to the host's robots.txt ``crawl_delay``."""
    return max(setting if own is None else own, crawl_delay or 0.0)


def throttle(pace: HostPace, retry_after: float | None, rules: PaceRules, now: float) -> HostPace:
    """A 429 or 503: the back-off doubles (at least :data:`BACKOFF_START` or twice the
    floor, at most ``backoff_max``) and the host pauses, for every worker, for
    ``Retry-After`` (capped at ``backoff_max``) or else the back-off."""
    backoff = min(max(pace.backoff * 2, rules.floor * 2, BACKOFF_START), rules.backoff_max)
    pause = backoff if retry_after is None or retry_after < 0 else min(retry_after, rules.backoff_max)
    return replace(pace, backoff=backoff, next=max(pace.next, now + pause), throttled=pace.throttled + 1)


def time_out(pace: HostPace) -> HostPace:
    """A timeout or failed connection: :data:`TIMEOUT_STRIKES` in a row cut the host's
    concurrency by one more slot; the run of good answers starts again."""
    strikes, cut = pace.strikes + 1, pace.cut
    if strikes >= TIMEOUT_STRIKES:
        strikes, cut = 0, cut + 1
    return replace(pace, strikes=strikes, cut=cut, good=0)


def succeed(pace: HostPace, rules: PaceRules) -> HostPace:
    """A response: the back-off halves (dropped at the floor or below :data:`BACKOFF_MIN`),
    the timeouts in a row are forgotten, and :data:`GOOD_TO_RESTORE` good answers in a row
    give a cut slot back."""
    backoff = pace.backoff
    if backoff > 0:
        backoff /= 2
        if backoff <= rules.floor or backoff < BACKOFF_MIN:
            backoff = 0.0
    cut, good = pace.cut, pace.good
    if cut > 0:
        good += 1
        if good >= GOOD_TO_RESTORE:
            cut, good = cut - 1, 0
    return replace(pace, backoff=backoff, strikes=0, cut=cut, good=good)


def autothrottle(pace: HostPace, latency: float, status: int, rules: PaceRules) -> HostPace:
    """Scrapy's AutoThrottle: the delay moves half-way towards ``latency`` / target
    concurrency (never below that target), kept between the floor and ``max_delay``; an
    answer other than 200 may raise it, never lower it."""
    current = pace.auto if pace.auto is not None else max(rules.floor, rules.start_delay)
    target = latency / rules.target_concurrency
    new = min(max(rules.floor, max(target, (current + target) / 2)), rules.max_delay)
    if status == 200 or new > current:
        return replace(pace, auto=new)
    return pace


def count_ban(pace: HostPace, kind: FeedbackKind, status: int, rules: PaceRules) -> HostPace:
    """Blocking signs in a row: ``ban_threshold`` of them switch the host to the proxies
    (when there are some, and for good); an answer below 400 ends the run."""
    if kind in BLOCKING_SIGNS:
        ban = pace.ban + 1
        proxied = pace.proxied or (rules.proxies > 0 and ban >= rules.ban_threshold)
        blocked = pace.blocked + (kind is FeedbackKind.BLOCKED)
        return replace(pace, ban=ban, proxied=proxied, blocked=blocked)
    if kind is FeedbackKind.OK and status < 400 and pace.ban > 0:
        return replace(pace, ban=0)
    return pace


def released(pace: HostPace, feedback: Feedback, rules: PaceRules, now: float, *,
             waiting: bool = False, sent_ago: float = -1.0) -> Released:
    """The host's pace after a download that held a slot told ``feedback`` (at Redis time
    ``now``; ``waiting``: fetches wait for the host). ``sent_ago``: seconds since the
    request went out (-1: not known); the next request waits the host's delay from then,
    not only from when its slot was taken (a busy worker may send a while after that);
    ``next`` moves only when that time is still ahead."""
    kind = feedback.kind
    if kind is FeedbackKind.THROTTLED:
        pace = throttle(pace, feedback.retry_after, rules, now)
    elif kind is FeedbackKind.TIMEOUT:
        pace = time_out(pace)
    elif kind is FeedbackKind.OK:
        pace = succeed(pace, rules)
    if rules.autothrottle and feedback.latency >= 0 and kind is not FeedbackKind.TIMEOUT:
        pace = autothrottle(pace, feedback.latency, feedback.status, rules)
    pace = count_ban(pace, kind, feedback.status, rules)
    delay = limits(pace, rules)[0]
    if sent_ago >= 0 and delay > sent_ago:  # a time already past would hold nothing back
        pace = replace(pace, next=max(pace.next, now - sent_ago + delay))
    bench = None
    if kind is FeedbackKind.PROXY and feedback.proxy is not None and feedback.proxy >= 0:
        bench = now + rules.proxy_bench_s
    return Released(pace, pace.proxied and rules.proxies > 0, bench,
                    max(now, pace.next) if waiting else None)


def limits(pace: HostPace, rules: PaceRules) -> tuple[float, int]:
    """(delay, concurrency) the host has now: the floor, raised by the back-off and by
    AutoThrottle (when on); the concurrency (0: no cap) less the cut slots, at least 1."""
    delay = max(rules.floor, pace.backoff)
    if rules.autothrottle:
        delay = max(delay, pace.auto if pace.auto is not None else rules.start_delay)
    concurrency = rules.concurrency
    if concurrency > 0 and pace.cut > 0:
        concurrency = max(1, concurrency - pace.cut)
    return delay, concurrency


@dataclass(frozen=True)
class RobotsVerdict:
    """May this URL be fetched: ``allowed``; or not yet (``wait_until``, Redis time)."""

    allowed: bool = True
    crawl_delay: float | None = None
    wait_until: float | None = None
    reason: str = ""
    counter: str = ""


ALLOW = RobotsVerdict()
