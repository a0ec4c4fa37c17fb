"""What a download's result means, read in one place: for the fetch decision and for the host.

A result is a response (:class:`~crawler_tasks.core.responses.Download`) or a failure
(a :class:`~crawler_tasks.core.errors.FetchError` subclass). :func:`classify` says, in
one :class:`Verdict`:

- whether the attempt failed (``failure``: the failure itself, or for a 408, 429 or 5xx
  response a :class:`~crawler_tasks.core.errors.BadStatus`), so whether it is retried
  (``retry``: the failure's kind says whether a retry is safe) and what it is counted as
  (``counted_as``: ``retry/reason_count/<reason>``): :func:`crawler_tasks.core.policy.decide`
  reads this;
- what it tells the host limiter (``feedback``, a :class:`FeedbackKind`):
  :func:`host_feedback` turns it into the :class:`Feedback` the limiter's rules
  (:mod:`crawler_tasks.core.politeness`) take.

=================================  ============  ==========================
result                             retried       host feedback
=================================  ============  ==========================
429, 503                           yes           throttled
407 through a proxy                no            proxy
403, a ban page (with proxies)     no            blocked
408, other 5xx                     yes           ok
any other response                 no            ok
timeout                            yes           timeout
connection refused / failed        yes           timeout
connection reset                   yes           blocked
DNS failure                        yes           error
proxy failure                      yes           proxy
headers cut, body incomplete       yes           error
TLS, bad response, refused
address, redirects, other          no            error
=================================  ============  ==========================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import (
    AddressRefused,
    BadResponse,
    BadStatus,
    ConnectionFailed,
    ConnectionRefused,
    ConnectionReset,
    DNSFailure,
    FetchError,
    FetchTimeout,
    HeadersCut,
    MiddlewareRetry,
    PermitTimeout,
    ProxyFailure,
    RenderFailed,
    RenderTimeout,
    RequestFailed,
    ResponseIncomplete,
    TLSFailure,
    TooManyRedirects,
)
from .politeness import Feedback, FeedbackKind
from .responses import Download, retry_after_seconds

if TYPE_CHECKING:
    from .proxies import Proxies

#: Statuses retried besides every 5xx (Scrapy's RETRY_HTTP_CODES, less the 5xx).
RETRY_STATUSES = frozenset({408, 429})
#: Statuses that tell a client to slow down.
THROTTLE_STATUSES = frozenset({429, 503})
#: Statuses that say the client is blocked.
BLOCK_STATUSES = frozenset({403})
#: The status a proxy answers when it wants credentials (it failed us, not the site).
PROXY_AUTH_STATUS = 407

#: What each kind of failure tells the host limiter (the most specific class listed wins).
FAILURE_FEEDBACK: dict[type[FetchError], FeedbackKind] = {
    FetchError: FeedbackKind.ERROR,
    FetchTimeout: FeedbackKind.TIMEOUT,
    ConnectionFailed: FeedbackKind.TIMEOUT,
    ConnectionRefused: FeedbackKind.TIMEOUT,
    ConnectionReset: FeedbackKind.BLOCKED,
    DNSFailure: FeedbackKind.ERROR,
    ProxyFailure: FeedbackKind.PROXY,
    TLSFailure: FeedbackKind.ERROR,
    AddressRefused: FeedbackKind.ERROR,
    BadResponse: FeedbackKind.ERROR,
    HeadersCut: FeedbackKind.ERROR,
    ResponseIncomplete: FeedbackKind.ERROR,
    TooManyRedirects: FeedbackKind.ERROR,
    BadStatus: FeedbackKind.ERROR,
    RequestFailed: FeedbackKind.ERROR,
    PermitTimeout: FeedbackKind.ERROR,  # this process was busy: nothing learnt of the host
    # Made after the host was told of its document's download: listed for completeness.
    RenderFailed: FeedbackKind.ERROR,
    RenderTimeout: FeedbackKind.ERROR,
    # Made after the host heard what the response itself said: listed for completeness.
    MiddlewareRetry: FeedbackKind.ERROR,
}


@dataclass(frozen=True)
class Verdict:
    """What one result means: ``feedback`` for the host; ``failure`` when the attempt failed
    (None: a response to keep, whatever its status)."""

    feedback: FeedbackKind
    failure: FetchError | None = None

    @property
    def retry(self) -> bool:
        """Whether the request is sent again (while it has retries left)."""
        return self.failure is not None and self.failure.retryable

    @property
    def counted_as(self) -> str | None:
        """The reason its retry (or its last failure) is counted under, if it failed."""
        return None if self.failure is None else self.failure.reason


def classify(result: Download | FetchError | None, proxies: Proxies | None = None, *,
             via_proxy: bool = False) -> Verdict:
    """The verdict on ``result`` (None: the download ended in no known way); ``proxies``:
    the configured ones, whose ban pattern marks a blocked answer; ``via_proxy``: the
    request went through one."""
    if isinstance(result, Download):
        return Verdict(response_feedback(result, proxies, via_proxy=via_proxy), status_failure(result))
    if isinstance(result, FetchError):
        return Verdict(failure_feedback(result), result)
    return Verdict(FeedbackKind.ERROR)


def status_failure(dl: Download) -> BadStatus | None:
    """The failure a 408, 429 or 5xx response counts as (with its ``Retry-After``), else None."""
    if dl.status in RETRY_STATUSES or dl.status >= 500:
        return BadStatus(dl.status, retry_after_seconds(dl.headers.get("retry-after")))
    return None


def response_feedback(dl: Download, proxies: Proxies | None = None, *,
                      via_proxy: bool = False) -> FeedbackKind:
    """What a response tells the host limiter: throttled (429, 503), the proxy failed (407
    through a proxy), blocked (403, a ban page), or ok."""
    if dl.status in THROTTLE_STATUSES:
        return FeedbackKind.THROTTLED
    if via_proxy and dl.status == PROXY_AUTH_STATUS:
        return FeedbackKind.PROXY
    if dl.status in BLOCK_STATUSES or (proxies is not None and proxies.is_ban_page(dl.body)):
        return FeedbackKind.BLOCKED
    return FeedbackKind.OK


def failure_feedback(err: FetchError) -> FeedbackKind:
    """What a failure tells the host limiter (:data:`FAILURE_FEEDBACK`)."""
    for kind in type(err).__mro__:
        if kind in FAILURE_FEEDBACK:
            return FAILURE_FEEDBACK[kind]
    return FeedbackKind.ERROR


def host_feedback(result: Download | FetchError | None, proxies: Proxies | None = None,
                  proxy: int | None = None) -> Feedback:
    """What a download (through ``proxy``, None = direct) tells the host limiter: its
    :class:`FeedbackKind` with the status, ``Retry-After`` (throttled only) and latency of
    a response (none for a failed proxy: the proxy's latency says nothing of the host)."""
    verdict = classify(result, proxies, via_proxy=proxy is not None)
    kind = verdict.feedback
    if not isinstance(result, Download):
        return Feedback(kind, proxy=proxy)
    if kind is FeedbackKind.PROXY:
        return Feedback(kind, result.status, proxy=proxy)
    retry_after = verdict.failure.retry_after if kind is FeedbackKind.THROTTLED and verdict.failure else None
    return Feedback(kind, result.status, retry_after, result.elapsed, proxy, result.sent_at)
