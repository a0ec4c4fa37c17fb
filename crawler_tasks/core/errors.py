"""The crawler's error tree.

::

    CrawlerError
    ├── BadInput                  the caller's mistake: never retried, one line on the CLI
    │   ├── InvalidURL            not a URL we can fetch
    │   │   ├── UnsupportedScheme scheme other than http/https
    │   │   └── URLTooLong        longer than CRAWLER_MAX_URL_LENGTH
    │   ├── BlockedSeed           a seed naming an address the private-network guard refuses
    │   ├── SettingsError         an environment variable with a bad value
    │   ├── UnknownStore          a store URI no backend understands
    │   ├── StoreNotConfigured    a masked store URI this process was not configured with
    │   └── PluginError           a plugin, item pipeline or middleware that cannot be loaded
    ├── BrokerUnavailable         the broker or the state Redis does not answer
    │   ├── BrokerRefused         it answers but refuses us (password, TLS certificate)
    │   └── StateUnavailable      a state-Redis command failed mid-task: safe to retry
    ├── QueueFull                 more fetches wait in the broker than CRAWLER_MAX_QUEUED
    ├── FeedSourceUnavailable     a seed feed could not read its source (seed file, sitemap)
    ├── CrawlStalled              nothing moved for CRAWLER_STALL_TIMEOUT while work was outstanding
    ├── CrawlStateLost            the state Redis came back without a running crawl's state
    ├── FetchError                a download failed; ``retryable`` says if trying again may help
    │   ├── FetchTimeout          no whole response within the download timeout
    │   ├── ConnectionFailed      no connection, for no better-known cause
    │   │   ├── DNSFailure        the host name did not resolve
    │   │   ├── ConnectionRefused the host refused the connection
    │   │   └── ConnectionReset   the host reset the connection (a blocking sign)
    │   ├── ProxyFailure          the proxy failed (refused, reset, 407 to CONNECT)
    │   ├── TLSFailure            the TLS handshake failed (an untrusted certificate...)
    │   ├── AddressRefused        the private-network guard refused the host's address
    │   ├── BadResponse           malformed or over-long status line or headers
    │   ├── HeadersCut            the connection closed inside the response headers
    │   ├── ResponseIncomplete    the body ended before the length the response declared
    │   ├── TooManyRedirects      more redirect hops than allowed
    │   ├── BadStatus             a response whose status counts as a failed attempt (408, 429, 5xx)
    │   ├── MiddlewareRetry       a response middleware asked for a retry (RetryRequest)
    │   └── RequestFailed         requests refused the request (a bad proxy URL...)
    ├── StoreUnavailable          a backend could not take a write: safe to retry
    ├── ClaimMissing              a page's claim check expired before parse/store read it
    ├── DropItem                  raised by an item pipeline: the item is not stored (its reason counted)
    ├── DropRequest               raised by a middleware: the request is neither fetched nor stored
    └── RetryRequest              raised by a response middleware: the request is tried again, demoted
"""

from __future__ import annotations


class CrawlerError(Exception):
    """Base class of every error this package raises on purpose."""


class BadInput(CrawlerError):
    """The input is wrong; retrying the same input cannot help."""


class InvalidURL(BadInput):
    """A URL that cannot be fetched (no host, bad port, not a URL at all)."""


class UnsupportedScheme(InvalidURL):
    """A URL whose scheme is not http or https."""


class BlockedSeed(BadInput):
    """A seed whose host is a literal address the private-network guard refuses
    (``CRAWLER_DENY_PRIVATE_NETWORKS``, ``CRAWLER_PRIVATE_ALLOWLIST``)."""


class URLTooLong(InvalidURL):
    """A URL longer than ``CRAWLER_MAX_URL_LENGTH`` bytes."""


class SettingsError(BadInput):
    """An environment variable holds a value of the wrong kind."""


class UnknownStore(BadInput):
    """A store URI that names no known backend."""


class StoreNotConfigured(BadInput):
    """A store URI whose password is masked (as Redis keeps it) that matches none of the
    stores this process was configured with, so it cannot be opened here."""


class BrokerUnavailable(CrawlerError):
    """The broker or the state Redis did not answer."""


class BrokerRefused(BrokerUnavailable):
    """The broker or the state Redis answered but refused us: a password or TLS certificate."""


class StateUnavailable(BrokerUnavailable):
    """A command to the state Redis failed while a task ran; the task is retried."""


class QueueFull(CrawlerError):
    """More fetches wait in the broker than ``CRAWLER_MAX_QUEUED``: try again later."""


class FeedSourceUnavailable(CrawlerError):
    """A seed feed could not read its source (a missing seed file, a sitemap that failed).

    The feed logs one line and counts the tick (or that sitemap) as failed; the
    next tick tries again.
    """


class CrawlStalled(CrawlerError):
    """A crawl had work outstanding but nothing moved for the stall timeout."""


class CrawlStateLost(CrawlerError):
    """The state Redis came back without a running crawl's state (restarted without
    persistence): what it tracked is gone, the records already stored are not."""


class FetchError(CrawlerError):
    """A download failed; each kind of failure is a subclass.

    ``description`` is the human-readable reason stored in the failure record;
    ``reason`` a short stable name for counters (``retry/reason_count/<reason>``:
    ``timeout``, ``dns``, ``http_503``...); ``retryable`` says whether sending
    the same request again is safe and may help (the class says it, as httpx's
    ``ConnectTimeout`` does); ``status`` and ``retry_after`` (the server's
    ``Retry-After`` in seconds) are set on a :class:`BadStatus`. What a failure
    tells the host limiter is :mod:`crawler_tasks.core.classify`'s to say.
    A plain ``FetchError`` (``error``, not retried) is a failure of no known kind.
    """

    reason: str = "error"
    retryable: bool = False
    status: int | None = None
    retry_after: float | None = None

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class FetchTimeout(FetchError):
    """No whole response came within the download timeout (connect, headers and body)."""

    reason = "timeout"
    retryable = True


class ConnectionFailed(FetchError):
    """No connection to the host (or it broke), for no better-known cause."""

    reason = "connection"
    retryable = True


class DNSFailure(ConnectionFailed):
    """The host name did not resolve (``socket.gaierror``): nothing was sent."""

    reason = "dns"


class ConnectionRefused(ConnectionFailed):
    """The host refused the connection: nothing was sent."""

    reason = "connection_refused"


class ConnectionReset(ConnectionFailed):
    """The host reset the connection: a sign of a blocking host."""

    reason = "connection_reset"


class ProxyFailure(FetchError):
    """The proxy the request went through failed; another proxy may do."""

    reason = "proxy"
    retryable = True


class TLSFailure(FetchError):
    """The TLS handshake failed (an untrusted certificate, a name mismatch...): the same
    handshake fails again."""

    reason = "tls"


class AddressRefused(FetchError):
    """The private-network guard refused every address of the host: nothing was sent, and
    asking again cannot help."""

    reason = "blocked_address"


class BadResponse(FetchError):
    """A malformed response: a bad status line, too many or over-long header lines."""

    reason = "bad_response"


class HeadersCut(FetchError):
    """The connection closed inside the response headers."""

    reason = "headers_cut"
    retryable = True


class ResponseIncomplete(FetchError):
    """The body ended before the length the response declared."""

    reason = "incomplete"
    retryable = True


class TooManyRedirects(FetchError):
    """More redirect hops than allowed (``CRAWLER_REDIRECT_MAX_TIMES``, robots.txt's five)."""

    reason = "redirect_max"


class BadStatus(FetchError):
    """A response whose status counts as a failed attempt: 408, 429 or 5xx, retried
    (after ``retry_after`` when the server said). ``reason`` is ``http_<status>``."""

    retryable = True

    def __init__(self, status: int, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.reason = f"http_{status}"
        self.status = status
        self.retry_after = retry_after


class MiddlewareRetry(FetchError):
    """A response middleware raised :class:`RetryRequest`: ``reason`` is its reason as a
    counter part, the description names the middleware."""

    retryable = True

    def __init__(self, middleware: str, reason: str) -> None:
        super().__init__(f"{middleware} asked for a retry: {reason}")
        self.reason = reason


class RequestFailed(FetchError):
    """requests refused or failed the request for a reason of no other kind."""

    reason = "request"


class PermitTimeout(FetchError):
    """A body grew large and none of this process's large-body permits came free in time:
    tried again later, when the others may be done."""

    reason = "permit_timeout"
    retryable = True


class RenderFailed(FetchError):
    """The browser could not render the page (it crashed, or could not start): a fresh one may."""

    reason = "render_failed"
    retryable = True


class RenderTimeout(FetchError):
    """The page's scripts held the browser past the render time limit and gave no DOM."""

    reason = "render_timeout"


class BrowserMissing(BadInput):
    """No browser to render with: Playwright is not installed, or no Chromium at the path set."""


class StoreUnavailable(CrawlerError):
    """A store backend could not take a write; the batch goes back to the store queue,
    retried with backoff."""


class StoreTooSlow(CrawlerError):
    """A ``crawl.page`` task's record was not written in time (its store is down); the
    task tries again."""


class ClaimMissing(CrawlerError):
    """A claim-check key expired or was evicted before it was read."""


class PluginError(BadInput):
    """A module of ``CRAWLER_PLUGINS``, or a pipeline or middleware of the settings, that
    cannot be imported or used; the worker stops at start."""


class DropItem(CrawlerError):
    """Raised by an item pipeline to leave the item out of its page's record.

    ``reason`` (a few words) is counted as ``items/dropped/<reason>``: lower case,
    other characters than letters, digits and ``_`` made ``_``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DropRequest(CrawlerError):
    """Raised by a request or response middleware: the request ends here, neither fetched
    (or kept) nor stored; ``requests/dropped/<reason>`` counts it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RetryRequest(CrawlerError):
    """Raised by a response middleware (a ban page served with a 200, say): the request is
    tried again like any retry (demoted, after a back-off, within ``CRAWLER_MAX_RETRIES``),
    counted under ``retry/reason_count/<reason>``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
