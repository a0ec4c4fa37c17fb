"""One URL through the user's program, nothing stored: what ``crawler-tasks parse`` prints and
``crawler-tasks shell`` opens.

The request goes through the crawl's request middlewares, the guarded downloader
(the private-network guard as configured), the response middlewares and the
crawler's decision, then, when a page comes of it, the same parse a worker runs:
the default extraction, the request's callback or the rule its URL matches, the
item pipelines. No Redis is used: neither robots.txt nor the host's politeness
is consulted, nothing is gated, counted or stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import requests

from ..core import counters
from ..core.errors import FetchError
from ..core.limits import CrawlConfig, Limits
from ..core.models import CrawlRequest, PageRecord
from ..core.policy import (
    HTML_TYPES,
    Drop,
    Fail,
    HandOn,
    Outcome,
    Redirect,
    Retry,
    Skip,
    decide,
    decode_text,
    with_headers,
)
from ..core.program import Program
from ..core.responses import Download
from ..core.settings import Settings
from ..core.urls import host_of
from ..net.download import download
from . import failures, middleware
from .middleware import Go
from .parse.base import decode_html
from .parse.links import follow
from .parse.page import choose, parse_body
from .parse.rules import Extracted, Parser
from .parse.view import Page


@dataclass
class Probe:
    """What became of one request: ``outcome`` (``page``, ``redirect``, ``retry``, ``failed``,
    ``dropped``, ``skipped``), its record, the parser that ran on it, the requests that
    would follow, the counters it would add, and the page (for the shell)."""

    request: CrawlRequest
    outcome: str
    record: PageRecord | None = None
    parser: str | None = None
    requests: list[CrawlRequest] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    page: Page | None = None
    #: Why it was not a page: a retry's reason, a failure's description.
    note: str | None = None

    @property
    def items(self) -> list[dict[str, Any]]:
        return list(self.record.items) if self.record is not None else []


def limits_for(req: CrawlRequest, settings: Settings, program: Program) -> Limits:
    """The limits of a crawl seeded with ``req`` alone, its plugins' ``custom_settings`` on."""
    config = CrawlConfig(req.crawl_id, domains=frozenset({host_of(req.url)}))
    return replace(Limits.of(config, settings, program.settings_for(())), plugins=program.plugins, store="")


def probe(settings: Settings, program: Program, req: CrawlRequest, session: requests.Session) -> Probe:
    """Fetch ``req`` once and run what a worker runs on it, storing nothing."""
    limits = limits_for(req, settings, program)
    chain = program.middlewares_for(limits.plugins)
    step = middleware.before_download(chain, req, limits)
    if not isinstance(step, Go):
        return _ended(req, step)
    try:
        result: Download | FetchError = download(session, with_headers(step.request, limits.headers),
                                                 timeout=settings.download_timeout,
                                                 maxsize=settings.download_maxsize, proxy=step.proxy)
    except FetchError as err:
        result = err
    if isinstance(result, Download) and chain:
        answered = middleware.after_download(chain, req, step.proxy, result, limits, settings)
        if not isinstance(answered, Download):
            return _ended(req, answered)
        result = answered
    outcome = decide(req, result, settings, limits, reads_text=True)
    if not isinstance(outcome, HandOn):
        return _ended(req, outcome)
    record = outcome.record
    probed = Probe(req, "page", record)
    if outcome.http_error is not None:
        failure = failures.failure_of("http", outcome.http_error, f"HTTP {record.status}", req, record.status)
        probed.requests, probed.counts = failures.tell(program, failure, req, limits)
        probed.note = f"{outcome.http_error}: told to the errback and the error handler"
    elif outcome.body is not None:
        probed.requests, probed.counts, links = parse_body(settings, program, req, record, outcome.body, limits)
        found, too_long = follow(req, links, limits, settings.max_url_length)
        probed.requests += found
        if too_long:
            probed.counts[counters.LINKS_TOO_LONG] = probed.counts.get(counters.LINKS_TOO_LONG, 0) + too_long
        probed.parser = record.rule
        probed.page = _page(req, record, outcome.body)
    if probed.page is None and isinstance(result, Download):
        probed.page = _page(req, record, result.body)
    return probed


def parser_for(program: Program, req: CrawlRequest, settings: Settings) -> str:
    """What would parse ``req``'s page: ``callback NAME``, ``rule NAME``, or why nothing does."""
    chosen = choose(program, req, req.url, limits_for(req, settings, program))
    if isinstance(chosen, Parser):
        return f"{chosen.kind} {chosen.name}"
    if isinstance(chosen, Extracted):
        return f"none: {chosen.error}"
    return "none: the default extraction (no rule matches, no callback)"


def _page(req: CrawlRequest, record: PageRecord, body: bytes) -> Page:
    """A page of ``body`` for the shell, with a tree of its own."""
    content_type = record.headers.get("content-type")
    if record.content_type in HTML_TYPES:
        text = decode_html(body, content_type)[1]
    else:
        text = decode_text(body, content_type)[1]
    return Page(req, record, text)


def _ended(req: CrawlRequest, outcome: Outcome) -> Probe:
    """A request that came to no page to parse."""
    match outcome:
        case Redirect(record=record, target=target, counts=counts):
            return Probe(req, "redirect", record, requests=[target], counts=dict(counts),
                         note=f"redirect to {target.url}")
        case Retry(reason=reason, counts=counts):
            return Probe(req, "retry", counts=dict(counts), note=f"a worker would retry it: {reason}")
        case Fail(record=record, counts=counts):
            return Probe(req, "failed", record, counts=dict(counts), note=record.description)
        case Skip(record=record, counts=counts):
            return Probe(req, "skipped", record, counts=dict(counts), note=record.description)
        case Drop(counts=counts, follow=follow):
            return Probe(req, "dropped", requests=list(follow), counts=dict(counts),
                         note="a middleware dropped it")
    return Probe(req, "ended", note=type(outcome).__name__)
