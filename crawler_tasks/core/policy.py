"""What to do with a download: pure rules, no I/O, tested without workers.

:func:`decide` turns a request and what its download gave (a response or a
:class:`~crawler_tasks.core.errors.FetchError`) into one :data:`Outcome`; the fetch
stage (:mod:`crawler_tasks.stages.fetch`) applies it. Scrapy's scheme: a retry is the
same request ``CRAWLER_RETRY_PRIORITY_ADJUST`` lower after an exponential
backoff or the server's ``Retry-After``; a 3xx is stored and its target becomes
a new request ``CRAWLER_REDIRECT_PRIORITY_ADJUST`` higher, through the gate.
Per-request overrides follow Scrapy: keyword > request ``meta`` > setting.
Before the download, :func:`before_fetch` turns the robots.txt verdict and the
host limiter's answer into a ``Skip`` or a ``Defer``; after it, with proxies
configured, :func:`reroute_reason` says whether the request goes again at once
through a proxy. What a result means (retried? what it tells the host limiter?)
is read in one place, :mod:`.classify`.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urljoin, urlsplit

from w3lib.encoding import html_to_unicode

from . import counters
from .classify import classify
from .errors import FetchError, InvalidURL, TooManyRedirects
from .limits import Limits
from .models import CrawlRequest, PageRecord
from .politeness import BLOCKING_SIGNS, Feedback, FeedbackKind, RobotsVerdict, Slot
from .responses import REDIRECT_STATUSES, Download
from .settings import Settings
from .timing import backoff, now_iso
from .urls import check_length

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
#: Headers a redirect to another host (or scheme) must not carry on (as Scrapy's RedirectMiddleware).
CREDENTIAL_HEADERS = frozenset({"cookie", "authorization"})

#: Counter name (:mod:`crawler_tasks.core.counters`) -> amount.
Counts = dict[str, int]


@dataclass(frozen=True)
class HandOn:
    """Keep the response: parse ``body`` when it is HTML, or a text its request's parser
    reads (else None), then store ``record``. ``http_error``: the 4xx or 5xx the request
    did not accept (``http_404``), which its errback and the error handler hear of."""

    record: PageRecord
    body: bytes | None
    counts: Counts = field(default_factory=dict)
    http_error: str | None = None


@dataclass(frozen=True)
class Redirect:
    """Store the 3xx ``record`` and enqueue ``target`` (promoted) through the gate."""

    record: PageRecord
    target: CrawlRequest
    counts: Counts = field(default_factory=dict)


@dataclass(frozen=True)
class Retry:
    """Send ``request`` (demoted, retry count + 1) again after ``countdown`` seconds."""

    request: CrawlRequest
    countdown: float
    reason: str
    counts: Counts = field(default_factory=dict)


@dataclass(frozen=True)
class Fail:
    """Give up: store ``record``, whose ``description`` says why. ``kind`` and ``reason``
    are what the error handler is told (``download``/``timeout``, ``middleware``/``KeyError``)."""

    record: PageRecord
    counts: Counts = field(default_factory=dict)
    kind: str = "download"
    reason: str = "error"


@dataclass(frozen=True)
class Defer:
    """Not now (politeness): ``request`` waits in Redis for its host until ``until``
    (Redis time) or a free slot, then comes back in its band; no retry is used."""

    request: CrawlRequest
    until: float


@dataclass(frozen=True)
class Skip:
    """Never fetch (robots.txt): store ``record``, whose ``description`` says why."""

    record: PageRecord
    counts: Counts = field(default_factory=dict)


@dataclass(frozen=True)
class Drop:
    """Neither stored nor fetched again (a middleware's choice): count ``counts``; ``follow``
    (the request that replaces this one, if any) goes through the gate."""

    counts: Counts = field(default_factory=dict)
    follow: tuple[CrawlRequest, ...] = ()


@dataclass(frozen=True)
class Controlled:
    """Not fetched: its crawl is ``control`` (paused, cancelled or purged; see
    :mod:`crawler_tasks.stages.control`)."""

    control: str


Outcome = HandOn | Redirect | Retry | Fail | Defer | Skip | Drop | Controlled



def before_fetch(req: CrawlRequest, robots: RobotsVerdict, slot: Slot | None) -> Skip | Defer | None:
    """What to do before downloading ``req``: skip it (robots.txt), let it wait (robots.txt
    not known yet, or its host busy), or None: go (``slot`` is the host slot it holds)."""
    if robots.wait_until is not None:
        return Defer(req, robots.wait_until)
    if not robots.allowed:
        record = base_record(req)
        record.description = robots.reason
        return Skip(record, {robots.counter: 1})
    if slot is not None and not slot.go:
        return Defer(req, slot.until)
    return None


class Reroute(StrEnum):
    """Why a request goes again at once, through a proxy (its retry's reason and counter)."""

    BLOCKED = "blocked"  # its host blocked the direct request
    PROXY_FAILED = "proxy_failed"  # the proxy it went through failed (benched; the next is tried)


def tell_at_once(feedback: Feedback, proxies: int) -> bool:
    """Whether the host limiter must hear ``feedback`` at once, before the outcome is
    decided, rather than in the page's last round trip: with ``proxies`` configured a
    blocking sign may switch the host to them, which then holds for its next requests
    without waiting for this page to be parsed and stored (and is logged)."""
    return proxies > 0 and feedback.kind in BLOCKING_SIGNS


def reroute_reason(feedback: Feedback, *, direct: bool, proxies: int) -> Reroute | None:
    """Why the request that got ``feedback`` goes again at once (None: it does not): its
    proxy failed, or, with ``proxies`` configured, its host blocked it while it went
    ``direct`` (the retry takes a proxy once the host has shown ``CRAWLER_BAN_THRESHOLD``
    blocking signs in a row)."""
    if feedback.kind is FeedbackKind.PROXY:
        return Reroute.PROXY_FAILED
    if direct and proxies > 0 and feedback.kind is FeedbackKind.BLOCKED:
        return Reroute.BLOCKED
    return None


def reroute(req: CrawlRequest, settings: Settings, reason: Reroute) -> Retry | None:
    """Send ``req`` again at once (a retry, demoted) because its host was found blocking
    or its proxy failed: the next attempt takes a proxy. None once its retries are used up."""
    retry = plan_retry(req, settings)
    if retry is None:
        return None
    return Retry(retry, 0.0, reason, {counters.RETRIES: 1, counters.retry_reason(reason): 1})


def with_headers(req: CrawlRequest, headers: tuple[tuple[str, str], ...]) -> CrawlRequest:
    """``req`` also sending ``headers`` (its crawl's ``custom_settings``) where it does not
    send a header of that name itself."""
    if not headers:
        return req
    own = {k.lower() for k in req.headers}
    extra = {k: v for k, v in headers if k.lower() not in own}
    return req.replace(headers={**extra, **req.headers}) if extra else req


def conditional(req: CrawlRequest, previous: PageRecord | None) -> CrawlRequest:
    """``req`` revalidating ``previous`` (``If-None-Match`` / ``If-Modified-Since`` from its
    ``ETag`` / ``Last-Modified``); ``req`` itself when there is nothing to revalidate."""
    if previous is None or previous.status != 200:
        return req
    validators = {name: previous.headers[source] for name, source in VALIDATORS
                  if previous.headers.get(source)}
    if not validators:
        return req
    return req.replace(headers={**req.headers, **validators})


#: Request header -> the response header (as stored, lower case) it echoes.
VALIDATORS = (("If-None-Match", "etag"), ("If-Modified-Since", "last-modified"))


def decide(req: CrawlRequest, result: Download | FetchError, settings: Settings,
           limits: Limits, *, previous: PageRecord | None = None, reads_text: bool = False) -> Outcome:
    """The outcome of fetching ``req``: ``result`` is its response, or why none came.

    ``previous`` is the stored record a recrawl revalidated: a 304 keeps it
    (with a new ``fetched_at``) instead of storing an empty page. A status in the
    request's ``handle_status`` is a page like a 2xx (neither retried nor a failure);
    with ``reads_text`` (a callback or rules will read it) a text body that is not HTML
    (JSON...) is handed on too.
    """
    if isinstance(result, FetchError):
        return on_error(req, result, None, settings)
    accepted = result.status in req.handle_status
    failure = None if accepted else classify(result).failure  # a 408, 429 or 5xx
    if failure is not None:
        return on_error(req, failure, result, settings)
    counts = download_counts(result)
    if result.status == 304 and previous is not None:
        return HandOn(not_modified(req, result, previous), None, {**counts, counters.NOT_MODIFIED: 1})
    record = response_record(req, result, keep_body=settings.store_body)
    location = result.headers.get("location")
    if result.status in REDIRECT_STATUSES and location and not accepted:
        return _on_redirect(req, result.status, location, record, counts, settings, limits)
    page = accepted or 200 <= result.status < 300
    parse = result.content_type in HTML_TYPES and bool(result.body) and page
    text = is_text(result.content_type) and bool(result.body)
    if settings.store_body and not parse and text:
        record.encoding, record.body = decode_text(result.body, result.headers.get("content-type"))
    read = parse or (page and reads_text and text)
    error = f"http_{result.status}" if result.status >= 400 and not accepted else None
    return HandOn(record, result.body if read else None, counts, http_error=error)


#: Types whose body a record keeps as text besides ``text/*`` (HTML goes through the parser).
TEXT_TYPES = frozenset({"application/json", "application/xml", "application/javascript",
                        "application/rss+xml", "application/atom+xml", "application/ld+json"})


def is_text(content_type: str) -> bool:
    """Whether a body of ``content_type`` is kept as text."""
    return content_type.startswith("text/") or content_type in TEXT_TYPES or content_type.endswith("+xml")


def decode_text(body: bytes, content_type: str | None) -> tuple[str, str]:
    """(encoding, text) of a text body: the header's charset, a BOM, or UTF-8 with replacement."""
    encoding, text = html_to_unicode(content_type, body, auto_detect_fun=lambda _: "utf-8")
    return encoding, text


def _on_redirect(req: CrawlRequest, status: int, location: str, record: PageRecord,
                 counts: Counts, settings: Settings, limits: Limits) -> Outcome:
    try:
        target = plan_redirect(req, location, status, settings)
    except (FetchError, InvalidURL) as err:
        record.description = f"redirect not followed: {err}"
        return Fail(record, {**counts, counters.FAILURES: 1}, reason="redirect")
    record.redirect_to = target.url
    if not limits.allows(target.url, origin=req.url):
        return HandOn(record, None, {**counts, counters.REDIRECT_OFFSITE: 1})
    return Redirect(record, target, {**counts, counters.REDIRECTS: 1})


def on_error(req: CrawlRequest, err: FetchError, dl: Download | None,
             settings: Settings) -> Retry | Fail:
    """A retry of ``req`` when ``err`` is worth one and retries are left, else its failure
    record; ``dl``: the response that came, if one did (its counts and headers are kept)."""
    counts = download_counts(dl) if dl is not None else {}
    retry = plan_retry(req, settings) if err.retryable else None
    if retry is not None:
        counts.update({counters.RETRIES: 1, counters.retry_reason(err.reason): 1})
        return Retry(retry, retry_delay(req, settings, err.retry_after), err.reason, counts)
    record = (response_record(req, dl, keep_body=settings.store_body) if dl is not None
              else base_record(req))
    record.description = final_description(err, req)
    counts[counters.FAILURES] = 1
    if err.retryable:
        counts[counters.retry_max_reached(err.reason)] = 1
    return Fail(record, counts, reason=err.reason)


def plan_retry(req: CrawlRequest, settings: Settings, *, max_retries: int | None = None,
               priority_adjust: int | None = None) -> CrawlRequest | None:
    """The retry of ``req`` (demoted, retry count + 1), or None once its retries are used up.

    ``max_retries`` and ``priority_adjust`` override ``req.meta["max_retry_times"]`` /
    ``req.meta["retry_priority_adjust"]``, which override the settings.
    """
    if max_retries is None:
        max_retries = int(req.meta.get("max_retry_times", settings.max_retries))
    if priority_adjust is None:
        priority_adjust = int(req.meta.get("retry_priority_adjust", settings.retry_priority_adjust))
    if req.retries >= max_retries:
        return None
    return req.replace(retries=req.retries + 1, priority=req.priority + priority_adjust)


def retry_delay(req: CrawlRequest, settings: Settings, retry_after: float | None) -> float:
    """Seconds before retry number ``req.retries + 1``: ``Retry-After`` if sent, else the
    backoff less the host's delay (``CRAWLER_DOWNLOAD_DELAY``), which the retry waits anyway
    after the failed request: it still goes no sooner than the backoff after it."""
    if retry_after is not None:
        return min(retry_after, settings.retry_backoff_max)
    return max(0.0, backoff(settings, req.retries) - settings.download_delay)


def plan_redirect(req: CrawlRequest, location: str, status: int,
                  settings: Settings) -> CrawlRequest:
    """The promoted request for a redirect target.

    A 303 turns GET-with-body methods into GET but keeps HEAD; a hop to another
    host or scheme drops ``Cookie`` and ``Authorization``. Raises
    :class:`TooManyRedirects` past ``CRAWLER_REDIRECT_MAX_TIMES`` hops and
    :class:`InvalidURL` for a target that cannot be fetched or is longer than
    ``CRAWLER_MAX_URL_LENGTH``.
    """
    if req.redirects >= settings.redirect_max_times:
        raise TooManyRedirects(f"redirect hops exceeded ({settings.redirect_max_times})")
    url = urljoin(req.url, location)
    method = "GET" if status == 303 and req.method != "HEAD" else req.method
    headers = req.headers if same_origin(req.url, url) else {
        k: v for k, v in req.headers.items() if k.lower() not in CREDENTIAL_HEADERS}
    target = req.replace(url=url, method=method, headers=headers, retries=0,
                         redirects=req.redirects + 1,
                         priority=req.priority + settings.redirect_priority_adjust)
    check_length(target.url, settings.max_url_length)
    return target


def same_origin(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` share scheme and host (credentials may follow)."""
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.hostname) == (pb.scheme, pb.hostname)


def final_description(err: FetchError, req: CrawlRequest) -> str:
    """What the failure record says, with the attempt count once retries were made."""
    attempts = req.retries + 1
    if attempts == 1 or not err.retryable:
        return err.description
    if err.status is not None:
        return f"{err.description} after {attempts} attempts"
    return f"{err.description} ({attempts} attempts)"


def base_record(req: CrawlRequest) -> PageRecord:
    """A record for ``req`` with no response (yet)."""
    return PageRecord(url=req.url, fingerprint=req.fingerprint, crawl_id=req.crawl_id,
                      depth=req.depth, fetched_at=now_iso(), method=req.method, meta=req.meta)


def not_modified(req: CrawlRequest, dl: Download, previous: PageRecord) -> PageRecord:
    """The stored page ``previous`` kept through a 304: its content as it was, with the
    new ``fetched_at`` and the 304 exchange as sent (an archive records a 304 with no
    payload, not the old response again)."""
    seen = response_record(req, dl, keep_body=False)
    return PageRecord.from_dict({
        **previous.to_dict(), "fetched_at": seen.fetched_at, "crawl_id": req.crawl_id,
        "depth": req.depth, "meta": req.meta, "status_line": seen.status_line,
        "raw_headers": seen.raw_headers, "request": seen.request})


def response_record(req: CrawlRequest, dl: Download, *, keep_body: bool = True) -> PageRecord:
    """A record for ``req`` filled from its response.

    It keeps the exchange as sent (status line, raw headers, request) for
    archives, and with ``keep_body`` the body of types that are neither parsed
    nor kept as text, base64 (``body_base64``): text types reach an archive as
    their ``body`` text re-encoded, so they are not kept twice.
    """
    record = base_record(req)
    record.status = dl.status
    record.headers = dl.headers
    record.content_type = dl.content_type or None
    record.size = len(dl.body)
    record.truncated = dl.truncated
    if dl.raw is not None:
        record.status_line = dl.raw.status_line
        record.raw_headers = [[k, v] for k, v in dl.raw.headers]
        record.request = {"line": dl.raw.request_line,
                          "headers": [[k, v] for k, v in dl.raw.request_headers]}
    if dl.body:
        record.payload_digest = "sha1:" + base64.b32encode(hashlib.sha1(dl.body).digest()).decode()
        if keep_body and dl.content_type not in HTML_TYPES and not is_text(dl.content_type):
            record.body_base64 = base64.b64encode(dl.body).decode("ascii")
    return record


def download_counts(dl: Download) -> Counts:
    """Counters one response adds."""
    counts = {counters.TOTAL_NUM: 1, counters.TOTAL_REQUEST_SIZE: dl.request_size,
              counters.TOTAL_RESPONSE_SIZE: dl.response_size, counters.status(dl.status): 1}
    if dl.truncated:
        counts[counters.TRUNCATED] = 1
    return counts
