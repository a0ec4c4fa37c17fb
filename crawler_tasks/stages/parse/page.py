"""The parse stage: a page's HTML parsed into its record, and the links it may follow.

A page up to :data:`~crawler_tasks.core.memory.LARGE_BODY` bytes is parsed into a
tree (:mod:`~crawler_tasks.stages.parse.tree`); a larger one is read as a
stream of parser events (:mod:`~crawler_tasks.stages.parse.stream`), never a
tree: a tree costs up to 30 times its body. Both give the same title, text and
links. The trees parsed at once in a worker process are bounded by
:data:`TREE_BYTES` of bodies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import lxml.html

from ...core import counters
from ...core.items import DICT_TYPE
from ...core.memory import LARGE_BODY, ByteAllowance
from ...core.models import CrawlRequest, PageRecord
from ...core.policy import HTML_TYPES, decode_text
from ...core.urls import host_of
from .. import enqueue, failures, render
from .base import Caps, Parsed
from .links import follow
from .rules import Extracted, Parser, run_pipelines, run_rule
from .stream import parse_stream
from .tree import Visit, parse_tree
from .view import Page

if TYPE_CHECKING:
    from ...core.limits import Limits
    from ...core.program import Program
    from ...core.settings import Settings
    from ..deps import ParseDeps

#: Bytes of bodies parsed into trees at once per worker process: a tree costs up to
#: 30 times its body, so 128 threads each parsing a 1 MiB page would need about 4 GB.
TREE_BYTES = 4 * LARGE_BODY
_trees = ByteAllowance(TREE_BYTES)


def parse_html(body: bytes, *, url: str, content_type: str | None, caps: Caps,
               robots_header: str = "", visit: Visit | None = None) -> Parsed:
    """Title, bounded visible text and absolute outlinks of an HTML page.

    Links resolve against ``<base href>`` and ``url``; fragments are dropped;
    non-http(s) links and ``rel=nofollow`` links are skipped; a robots
    ``nofollow`` (meta or ``X-Robots-Tag``) yields no links at all. At most
    ``caps.max_links`` distinct links are kept (0 = all); ``links_over_cap`` counts
    the candidates past the cap. Links over ``caps.max_url_length`` bytes (0 = no
    cap) are not kept either; ``links_too_long`` counts them. ``visit`` sees a small
    page's tree whole before its text is taken (a large page, streamed, has none).
    """
    if len(body) > LARGE_BODY:
        return parse_stream(body, url, content_type, caps, robots_header)
    with _trees.hold(len(body)):
        return parse_tree(body, url, content_type, caps, robots_header, visit)


def parse_page(rt: ParseDeps, req: CrawlRequest, record: PageRecord, body: bytes,
               limits: Limits, counts: Mapping[str, int] | None = None) -> enqueue.TaskEnd:
    """:func:`parse_body` in a worker, and how the page's task ends: the requests it gives
    marked for rendering where they are to be rendered, its ``counts`` and the parse's.
    Links the gate answered for lately (:class:`~crawler_tasks.core.known_links.KnownLinks`)
    are counted as duplicates, their requests made only if the gate replays the page."""
    kept_back: list[str] = []
    children, parsed, links = parse_body(rt.settings, rt.program, req, record, body, limits)
    ended = {**(counts or {}), **parsed}
    if links:
        found, too_long = follow(req, links, limits, rt.settings.max_url_length,
                                 rt.known_links.known(req.crawl_id), kept_back)
        children += found
        if too_long:
            _merge(ended, {counters.LINKS_TOO_LONG: too_long})
    if children:
        children = render.marked(rt, children, limits)
    rebuild = None
    if kept_back:
        ended[counters.DUPLICATES] = ended.get(counters.DUPLICATES, 0) + len(kept_back)

        def rebuild() -> list[CrawlRequest]:
            found = follow(req, kept_back, limits, rt.settings.max_url_length)[0]
            return render.marked(rt, found, limits) if found else found
    return enqueue.TaskEnd(children, ended, record=record, kept_back=rebuild)


def parse_body(settings: Settings, program: Program, req: CrawlRequest, record: PageRecord, body: bytes,
               limits: Limits) -> tuple[list[CrawlRequest], dict[str, int], list[str]]:
    """Fill ``record`` from its ``body``; return the requests for the links to follow
    and the parse's counters (``links/over_cap``: links past ``CRAWLER_MAX_LINKS_PER_PAGE``;
    ``links/too_long``: links longer than ``CRAWLER_MAX_URL_LENGTH``), in ``limits``, the
    crawl's; and the page's links to follow (:func:`~.links.follow` makes their requests).

    An HTML page gets the default extraction; its parser (the request's callback, or
    the rule its URL matches) sees its tree first. Another text page (JSON...) reaches
    only its parser."""
    caps = Caps.of(settings)
    chosen: Parser | Extracted | None = None
    if req.callback or len(program.rules):
        chosen = choose(program, req, record.url, limits)
        if isinstance(chosen, Extracted):
            record.description = chosen.error
    if record.content_type not in HTML_TYPES:
        return _text_page(program, req, record, body, chosen, (limits, caps))
    ran: list[Extracted] = []

    def visit(parsed: Parsed, root: lxml.html.HtmlElement | None) -> None:
        record.title = parsed.title
        assert isinstance(chosen, Parser)
        ran.append(_program(program, chosen, Page(req, record, parsed.html, root), limits, caps))

    parsed = parse_html(body, url=record.url, content_type=record.headers.get("content-type"),
                        caps=caps, robots_header=record.headers.get("x-robots-tag", ""),
                        visit=visit if isinstance(chosen, Parser) else None)
    record.title = parsed.title
    record.text = parsed.text
    record.links = parsed.links
    if record.rendered is None:
        record.encoding = parsed.encoding
    if settings.store_body and record.rendered is not None:
        record.dom = parsed.html  # its body keeps the response as served
    elif settings.store_body:
        record.body = parsed.html
    counts = {counters.LINKS_OVER_CAP: parsed.links_over_cap, counters.LINKS_TOO_LONG: parsed.links_too_long}
    if isinstance(chosen, Parser) and not ran:  # a large page, streamed: its parser parses a tree of its own
        with _trees.hold(len(body)):
            ran.append(_program(program, chosen, Page(req, record, parsed.html), limits, caps))
    extracted = ran[0] if ran else chosen
    children: list[CrawlRequest] = []
    follow_links = req.extract_links
    if isinstance(extracted, Extracted):
        children = extracted.requests
        follow_links = follow_links and extracted.follow
        _merge(counts, extracted.counts)
    return children, {name: n for name, n in counts.items() if n}, parsed.links if follow_links else []


def _text_page(program: Program, req: CrawlRequest, record: PageRecord, body: bytes,
               chosen: Parser | Extracted | None,
               bounds: tuple[Limits, Caps]) -> tuple[list[CrawlRequest], dict[str, int], list[str]]:
    """A page that is not HTML (JSON, XML, text) through its parser: no default extraction."""
    if chosen is None:
        return [], {}, []
    if isinstance(chosen, Parser):
        text = record.body if record.body is not None else decode_text(body, record.headers.get("content-type"))[1]
        chosen = _program(program, chosen, Page(req, record, text), *bounds)
    return chosen.requests, {name: n for name, n in chosen.counts.items() if n}, []


def choose(program: Program, req: CrawlRequest, url: str, limits: Limits) -> Parser | Extracted | None:
    """What parses the page of ``req``: its callback, else the rule its URL matches (None: no
    rule, the default extraction alone); an Extracted that says why neither can (a plugin
    the crawl names, or the callback, is not loaded here)."""
    missing = program.missing(limits.plugins)
    if missing:
        why = f"plugin {', '.join(missing)} is not loaded on this worker (CRAWLER_PLUGINS)"
        return Extracted(counts={counters.plugin_failed("missing"): 1}, error=why)
    if req.callback:
        func = program.function(req.callback, limits.plugins)
        if func is None:
            why = f"callback {req.callback} is not a function of a plugin loaded on this worker (CRAWLER_PLUGINS)"
            return Extracted(follow=False, counts={counters.plugin_failed("callback_missing"): 1}, error=why)
        return Parser(req.callback, func, follow=False, kind="callback")
    rule = program.rules.pick(url, host_of(url), limits.plugins)
    return None if rule is None else Parser.of_rule(rule)


def _program(program: Program, parser: Parser, page: Page, limits: Limits, caps: Caps) -> Extracted:
    """The page through ``parser`` and its crawl's item pipelines; its record gets the items
    kept, the parser's name, and what failed."""
    req, record = page.request, page.record
    extracted = run_rule(parser, page, limits, caps)
    piped = run_pipelines(extracted.items, program.pipelines_for(limits.plugins), page,
                          f"{parser.kind} {parser.name}")
    failed = piped.failed
    record.rule = parser.name
    record.items = piped.items
    record.item_types = piped.types if any(t != DICT_TYPE for t in piped.types) else []
    record.description = extracted.error or (failed[1] if failed else None) or extracted.note or piped.note
    _merge(extracted.counts, piped.counts)
    told = [(parser.kind, extracted.reason, extracted.error)] if extracted.error else []
    if failed:
        told.append(("pipeline", *failed))
    for kind, reason, description in told:  # the error handler hears of each
        follow, more = failures.tell(program, failures.failure_of(kind, reason, description, req, record.status),
                                     req, limits)
        extracted.requests += follow
        _merge(extracted.counts, more)
    return extracted


def _merge(counts: dict[str, int], more: dict[str, int]) -> None:
    for name, n in more.items():
        counts[name] = counts.get(name, 0) + n


def parse_claim(rt: ParseDeps, claim_id: str, req: CrawlRequest, task_id: str) -> None:
    """The split pipeline's parse step: parse the page ``claim_id``, enqueue links, queue
    the record for the store, drop the claim."""
    with rt.large_bodies.permit() as permit:  # a large body's slot, until its record is queued
        record, body = rt.claims.load(req.crawl_id, claim_id, with_body=True, permit=permit)
        limits = rt.limits(req.crawl_id)  # once for the page
        rt.lifecycle.opening(req.crawl_id, limits)
        enqueue.complete(rt, req, task_id, parse_page(rt, req, record, body or b"", limits), limits=limits)
    rt.claims.delete(req.crawl_id, claim_id)  # done now, or long ago (a late duplicate)
