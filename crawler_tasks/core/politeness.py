"""Per-host politeness as values: a host's key, the limiter's answer, a download's feedback.

The limiter that keeps them for the cluster is :mod:`crawler_tasks.state.hosts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

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

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", FeedbackKind(self.kind))


@dataclass(frozen=True)
class RobotsVerdict:
    """May this URL be fetched: ``allowed``; or not yet (``wait_until``, Redis time)."""

    allowed: bool = True
    crawl_delay: float | None = None
    wait_until: float | None = None
    reason: str = ""
    counter: str = ""


ALLOW = RobotsVerdict()
