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
    │   └── StoreNotConfigured    a masked store URI this process was not configured with
    ├── BrokerUnavailable         the broker or the state Redis does not answer
    │   ├── BrokerRefused         it answers but refuses us (password, TLS certificate)
    │   └── StateUnavailable      a state-Redis command failed mid-task: safe to retry
    ├── QueueFull                 more fetches wait in the broker than CRAWLER_MAX_QUEUED
    ├── FeedSourceUnavailable     a seed feed could not read its source (seed file, sitemap)
    ├── CrawlStalled              nothing moved for CRAWLER_STALL_TIMEOUT while work was outstanding
    ├── CrawlStateLost            the state Redis came back without a running crawl's state
    ├── FetchError                a download failed; ``retryable`` says if trying again may help
    ├── StoreUnavailable          a backend could not take a write: safe to retry
    └── ClaimMissing              a page's claim check expired before parse/store read it
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
    """A download failed.

    ``description`` is the human-readable reason stored in the failure record;
    ``reason`` a short stable name for counters (``timeout``, ``dns``,
    ``http_503``...); ``retryable`` is True for connection errors, timeouts,
    408, 429 and 5xx; ``retry_after`` is the server's ``Retry-After`` in
    seconds, when it sent one.
    """

    def __init__(self, description: str, *, retryable: bool, reason: str = "error",
                 status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(description)
        self.description = description
        self.reason = f"http_{status}" if status is not None else reason
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


class StoreUnavailable(CrawlerError):
    """A store backend could not take a write; the batch goes back to the store queue,
    retried with backoff."""


class ClaimMissing(CrawlerError):
    """A claim-check key expired or was evicted before it was read."""
