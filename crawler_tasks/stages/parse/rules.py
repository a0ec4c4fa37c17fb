"""A page through the user's program: its parser (a request's callback, or the URL rule),
then the item pipelines.

The parser gets a :class:`~.view.Page`; what it returns or yields is sorted into
items (of any kind itemadapter knows: dicts, dataclasses, attrs classes, pydantic
models, Scrapy-style items; at most ``CRAWLER_MAX_ITEMS_PER_PAGE``) and requests
(made absolute, kept to the crawl's scope and depth like any link, then gated
and banded by the enqueue stage). Each item then passes the crawl's item
pipelines in ascending priority; a :class:`~crawler_tasks.core.errors.DropItem`
leaves it out, counted per reason. What is kept is stored as a dict of JSON values.

A parser or pipeline that raises does not fail the page: the record says what
failed (``description``), ``plugin/failed/<kind>`` counts it, and a failed
parser's page follows its links only as the parser says.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...core import counters
from ...core.asks import Request, as_child
from ...core.errors import DropItem, InvalidURL
from ...core.items import type_name
from ...core.models import CrawlRequest
from ...core.program import Pipeline, Rule
from .base import Caps
from .view import Page

if TYPE_CHECKING:
    from ...core.limits import Limits

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Parser:
    """What parses a page: a request's callback (``kind`` ``callback``, called with its
    ``cb_kwargs``) or the URL rule that matches it (``rule``)."""

    name: str
    func: Callable[..., Any]
    follow: bool
    kind: str = "rule"

    @classmethod
    def of_rule(cls, rule: Rule) -> Parser:
        return cls(rule.name, rule.func, rule.follow)


@dataclass
class Extracted:
    """What a page's parser gave: items and requests, and whether its links are followed."""

    items: list[Any] = field(default_factory=list)
    requests: list[CrawlRequest] = field(default_factory=list)
    follow: bool = True
    counts: dict[str, int] = field(default_factory=dict)
    #: Why the parser failed (the record's description), None when it did not.
    error: str | None = None
    #: The exception class of a failed parser (the error handler's ``reason``).
    reason: str = ""
    #: Why an item was left out (the record's description when the parser did not fail).
    note: str | None = None


def run_rule(parser: Parser | Rule, page: Page, limits: Limits, caps: Caps) -> Extracted:
    """Run ``parser`` on ``page``. A parser that raises, or yields something else than items
    and requests, fails where it stands: what it yielded before is kept, and its page's links
    are followed as it says, never more. At most ``caps.max_items`` items and
    ``caps.max_links`` requests (0: all) are kept."""
    if isinstance(parser, Rule):
        parser = Parser.of_rule(parser)
    out = Extracted(follow=parser.follow)
    kwargs = page.cb_kwargs if parser.kind == "callback" else {}
    try:
        for thing in _results(parser.func(page, **kwargs)):
            if isinstance(thing, Request):
                _request(out, thing, page, limits, caps)
            elif is_item(thing):
                if len(out.items) < caps.max_items:
                    out.items.append(thing)
                else:
                    _add(out.counts, counters.ITEMS_OVER_CAP)
            else:
                raise TypeError(f"yielded a {type(thing).__name__}, not an item or a Request")
    except Exception as exc:  # noqa: BLE001 - user code: any failure is the parser's
        log.warning("%s %s failed on %s: %s: %s", parser.kind, parser.name, page.url, type(exc).__name__, exc)
        _add(out.counts, counters.plugin_failed(parser.kind))
        out.reason = type(exc).__name__
        out.error = f"{parser.kind} {parser.name} failed: {type(exc).__name__}: {str(exc)[:300]}"
    return out


def is_item(thing: Any) -> bool:
    """Whether ``thing`` is an item: a dict, or a kind itemadapter knows (imported only then:
    it imports every item library installed, pydantic and Scrapy included)."""
    if isinstance(thing, dict):
        return True
    from itemadapter import ItemAdapter

    return bool(ItemAdapter.is_item(thing))


def as_json(item: Any) -> dict[str, Any]:
    """``item`` as the dict a record stores; :class:`TypeError` or :class:`ValueError` when
    JSON cannot carry one of its values."""
    if isinstance(item, dict):
        data = item
    else:
        from itemadapter import ItemAdapter

        data = ItemAdapter(item).asdict()
    json.dumps(data)
    return data


def _results(result: Any) -> Iterable[Any]:
    if result is None:
        return ()
    if isinstance(result, Request) or is_item(result):
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


@dataclass
class Piped:
    """Items through the pipelines: those kept (dicts) and their types (:func:`type_name`),
    the counts (kept, dropped per reason, failed pipelines), the first failure (exception
    class, the record's description), and why an item JSON cannot carry was left out."""

    items: list[dict[str, Any]] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    failed: tuple[str, str] | None = None
    note: str | None = None


def run_pipelines(items: list[Any], pipelines: tuple[Pipeline, ...], page: Page, parser: str = "") -> Piped:
    """``items`` through ``pipelines`` in order, then made dicts (``parser`` names what
    yielded them, in the note of an item JSON cannot carry)."""
    out = Piped()
    counts = out.counts
    for item in items:
        for pipeline in pipelines:
            try:
                item = pipeline.process(item, page)
                if not is_item(item):
                    raise TypeError(f"returned a {type(item).__name__}, not the item")
            except DropItem as drop:
                _add(counts, counters.items_dropped(reason_name(drop.reason)))
                break
            except Exception as exc:  # noqa: BLE001 - user code
                log.warning("item pipeline %s failed on %s: %s: %s", pipeline.name, page.url,
                            type(exc).__name__, exc)
                _add(counts, counters.plugin_failed("pipeline"))
                _add(counts, counters.items_dropped("pipeline_failed"))
                out.failed = out.failed or (type(exc).__name__, f"item pipeline {pipeline.name} failed: "
                                                                f"{type(exc).__name__}: {str(exc)[:300]}")
                break
        else:
            try:
                out.items.append(as_json(item))
                out.types.append(type_name(item))
            except (TypeError, ValueError) as exc:  # a value JSON cannot carry fails its item alone
                why = f"{parser or 'a pipeline'}: an item was left out, JSON cannot carry it: {str(exc)[:200]}"
                log.warning("%s (%s)", why, page.url)
                _add(counts, counters.items_dropped("not_json"))
                out.note = out.note or why
    if out.items:
        counts[counters.ITEMS] = len(out.items)
    return out


_REASON = re.compile(r"[^a-z0-9_]+")


def reason_name(reason: str) -> str:
    """A drop reason as a counter part: lower case, runs of other characters made ``_``."""
    return _REASON.sub("_", str(reason).lower()).strip("_")[:60] or "unspecified"


def _add(counts: dict[str, int], name: str, n: int = 1) -> None:
    counts[name] = counts.get(name, 0) + n
