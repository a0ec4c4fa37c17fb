"""A page through the user's program: its parse rule, then the item pipelines.

The rule gets a :class:`Page`; what it returns or yields is sorted into items
(dicts of JSON values, at most ``CRAWLER_MAX_ITEMS_PER_PAGE``) and requests
(made absolute, kept to the crawl's scope and depth like any link, then gated
and banded by the enqueue stage). Each item then passes the crawl's item
pipelines in ascending priority; a :class:`~crawler_tasks.core.errors.DropItem`
leaves it out, counted per reason.

A rule or pipeline that raises does not fail the page: the record says what
failed (``description``), ``plugin/failed/<kind>`` counts it, a failed rule's
page keeps the default extraction and follows its links.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

import lxml.etree
import lxml.html

from ...core import counters
from ...core.errors import DropItem, InvalidURL
from ...core.models import CrawlRequest, PageRecord
from ...core.program import Pipeline, Request, Rule, as_child
from .base import XML_DECL, Caps

if TYPE_CHECKING:
    from ...core.limits import Limits

log = logging.getLogger(__name__)


class Page:
    """What a parse rule sees of a fetched page.

    ``text`` is the decoded HTML; ``tree`` its lxml document (parsed on first use,
    None for a document lxml cannot read); ``meta`` the request's meta.
    """

    def __init__(self, request: CrawlRequest, record: PageRecord, text: str) -> None:
        self.url = record.url
        self.status = record.status
        self.headers = record.headers
        self.text = text
        self.meta = request.meta
        self.crawl_id = request.crawl_id
        self.depth = request.depth
        self.title = record.title
        #: The request and record the page came from (what the crawler needs, not the rule).
        self.request, self.record = request, record
        self._tree: lxml.html.HtmlElement | None = None
        self._parsed = False
        self._base: str | None = None

    @property
    def tree(self) -> lxml.html.HtmlElement | None:
        if not self._parsed:
            self._parsed = True
            try:
                self._tree = lxml.html.document_fromstring(XML_DECL.sub("", self.text) or "<html/>",
                                                           base_url=self.url)
            except (lxml.etree.ParserError, ValueError):
                self._tree = None
        return self._tree

    def xpath(self, expression: str) -> Any:
        """``tree.xpath(expression)`` (a list of nodes or strings, or a string or number for
        an expression such as ``normalize-space(...)``); an empty list when the page has no tree."""
        tree = self.tree
        return [] if tree is None else tree.xpath(expression)

    def urljoin(self, href: str) -> str:
        """``href`` made absolute against the page's URL (its ``<base href>`` first)."""
        if self._base is None:
            found = self.tree.find(".//base[@href]") if self.tree is not None else None
            self._base = self.url if found is None else urljoin(self.url, found.get("href", "").strip())
        return urljoin(self._base, href.strip())

    def __repr__(self) -> str:
        return f"<Page {self.status} {self.url}>"


@dataclass
class Extracted:
    """What a page's rule gave: items and requests, and whether its links are followed."""

    items: list[dict[str, Any]] = field(default_factory=list)
    requests: list[CrawlRequest] = field(default_factory=list)
    follow: bool = True
    counts: dict[str, int] = field(default_factory=dict)
    #: Why the rule failed (the record's description), None when it did not.
    error: str | None = None
    #: The exception class of a failed rule (the error handler's ``reason``).
    reason: str = ""
    #: Why an item was left out (the record's description when the rule did not fail).
    note: str | None = None


def run_rule(rule: Rule, page: Page, limits: Limits, caps: Caps) -> Extracted:
    """Run ``rule`` on ``page``. A rule that raises, or yields something else than items and
    requests, fails where it stands: what it yielded before is kept, and its page's links are
    followed as the rule says, never more. An item holding a value JSON cannot carry is left
    out alone. At most ``caps.max_items`` items and ``caps.max_links`` requests (0: all) are
    kept."""
    out = Extracted(follow=rule.follow)
    try:
        for thing in _results(rule.func(page)):
            if isinstance(thing, Request):
                _request(out, thing, page, limits, caps)
            elif isinstance(thing, dict):
                _item(out, thing, rule, page, caps)
            else:
                raise TypeError(f"yielded a {type(thing).__name__}, not an item (dict) or a Request")
    except Exception as exc:  # noqa: BLE001 - user code: any failure is the rule's
        log.warning("rule %s failed on %s: %s: %s", rule.name, page.url, type(exc).__name__, exc)
        _add(out.counts, counters.plugin_failed("rule"))
        out.reason = type(exc).__name__
        out.error = f"rule {rule.name} failed: {type(exc).__name__}: {str(exc)[:300]}"
    return out


def _item(out: Extracted, item: dict[str, Any], rule: Rule, page: Page, caps: Caps) -> None:
    """Keep ``item`` (within the cap) unless JSON cannot carry it: that one is left out,
    logged, counted and noted on the page's record."""
    try:
        json.dumps(item)  # a value JSON cannot carry fails here, not in the store
    except (TypeError, ValueError) as exc:
        why = f"rule {rule.name}: an item was left out, JSON cannot carry it: {str(exc)[:200]}"
        log.warning("%s (%s)", why, page.url)
        _add(out.counts, counters.items_dropped("not_json"))
        out.note = out.note or why
        return
    if len(out.items) < caps.max_items:
        out.items.append(item)
    else:
        _add(out.counts, counters.ITEMS_OVER_CAP)


def _results(result: Any) -> Iterable[Any]:
    if result is None:
        return ()
    if isinstance(result, (dict, Request)):
        return (result,)
    return result


def _request(out: Extracted, wanted: Request, page: Page, limits: Limits, caps: Caps) -> None:
    """A rule's request as a child of the page's, when the crawl's scope and depth allow it."""
    req, cap, max_url_length = page.request, caps.max_links, caps.max_url_length
    depth = req.depth + 1
    url = page.urljoin(wanted.url)
    if limits.max_depth and depth > limits.max_depth:
        _add(out.counts, counters.REQUESTS_TOO_DEEP)
        return
    if not limits.allows(url, origin=req.url):
        _add(out.counts, counters.REQUESTS_OFFSITE)
        return
    if cap and len(out.requests) >= cap:
        _add(out.counts, counters.LINKS_OVER_CAP)
        return
    try:
        child = as_child(wanted, req, url=url, depth=depth)
    except InvalidURL:
        return
    if max_url_length and len(child.url) > max_url_length:
        _add(out.counts, counters.LINKS_TOO_LONG)
        return
    out.requests.append(child)


def run_pipelines(items: list[dict[str, Any]], pipelines: tuple[Pipeline, ...],
                  page: Page) -> tuple[list[dict[str, Any]], dict[str, int], tuple[str, str] | None]:
    """``items`` through ``pipelines`` in order: the items kept, the counts (kept, dropped
    per reason, failed pipelines), and the first failure: (exception class, the record's
    description)."""
    kept: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    failed: tuple[str, str] | None = None
    for item in items:
        for pipeline in pipelines:
            try:
                item = pipeline.process(item, page)
                if not isinstance(item, dict):
                    raise TypeError(f"returned a {type(item).__name__}, not the item (a dict)")
                json.dumps(item)
            except DropItem as drop:
                _add(counts, counters.items_dropped(reason_name(drop.reason)))
                break
            except Exception as exc:  # noqa: BLE001 - user code
                log.warning("item pipeline %s failed on %s: %s: %s", pipeline.name, page.url,
                            type(exc).__name__, exc)
                _add(counts, counters.plugin_failed("pipeline"))
                _add(counts, counters.items_dropped("pipeline_failed"))
                failed = failed or (type(exc).__name__, f"item pipeline {pipeline.name} failed: "
                                                        f"{type(exc).__name__}: {str(exc)[:300]}")
                break
        else:
            kept.append(item)
    if kept:
        counts[counters.ITEMS] = len(kept)
    return kept, counts, failed


_REASON = re.compile(r"[^a-z0-9_]+")


def reason_name(reason: str) -> str:
    """A drop reason as a counter part: lower case, runs of other characters made ``_``."""
    return _REASON.sub("_", str(reason).lower()).strip("_")[:60] or "unspecified"


def _add(counts: dict[str, int], name: str, n: int = 1) -> None:
    counts[name] = counts.get(name, 0) + n
