"""The parse stage: a page's HTML parsed into its record, and the links it may follow.

A page up to :data:`~crawler_tasks.core.memory.LARGE_BODY` bytes is parsed into a
tree (:mod:`~crawler_tasks.stages.parse.tree`); a larger one is read as a
stream of parser events (:mod:`~crawler_tasks.stages.parse.stream`), never a
tree: a tree costs up to 30 times its body. Both give the same title, text and
links. The trees parsed at once in a worker process are bounded by
:data:`TREE_BYTES` of bodies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core import counters
from ...core.memory import LARGE_BODY, ByteAllowance
from ...core.models import CrawlRequest, PageRecord
from ...core.urls import host_of
from .. import enqueue, failures, render
from .base import Caps, Parsed
from .links import follow
from .rules import Extracted, Page, run_pipelines, run_rule
from .stream import parse_stream
from .tree import parse_tree

if TYPE_CHECKING:
    from ...core.limits import Limits
    from ...core.program import Program
    from ..deps import ParseDeps

#: Bytes of bodies parsed into trees at once per worker process: a tree costs up to
#: 30 times its body, so 128 threads each parsing a 1 MiB page would need about 4 GB.
TREE_BYTES = 4 * LARGE_BODY
_trees = ByteAllowance(TREE_BYTES)


def parse_html(body: bytes, *, url: str, content_type: str | None, caps: Caps,
               robots_header: str = "") -> Parsed:
    """Title, bounded visible text and absolute outlinks of an HTML page.

    Links resolve against ``<base href>`` and ``url``; fragments are dropped;
    non-http(s) links and ``rel=nofollow`` links are skipped; a robots
    ``nofollow`` (meta or ``X-Robots-Tag``) yields no links at all. At most
    ``caps.max_links`` distinct links are kept (0 = all); ``links_over_cap`` counts
    the candidates past the cap. Links over ``caps.max_url_length`` bytes (0 = no
    cap) are not kept either; ``links_too_long`` counts them.
    """
    args = (body, url, content_type, caps, robots_header)
    if len(body) > LARGE_BODY:
        return parse_stream(*args)
    with _trees.hold(len(body)):
        return parse_tree(*args)


def parse_page(rt: ParseDeps, req: CrawlRequest, record: PageRecord, body: bytes,
               limits: Limits | None = None) -> tuple[list[CrawlRequest], dict[str, int]]:
    """Fill ``record`` from its HTML ``body``; return the requests for the links to follow
    and the parse's counters (``links/over_cap``: links past ``CRAWLER_MAX_LINKS_PER_PAGE``;
    ``links/too_long``: links longer than ``CRAWLER_MAX_URL_LENGTH``). ``limits``: the
    crawl's, when the caller resolved them (looked up here otherwise)."""
    s = rt.settings
    caps = Caps.of(s)
    parsed = parse_html(body, url=record.url, content_type=record.headers.get("content-type"),
                        caps=caps, robots_header=record.headers.get("x-robots-tag", ""))
    record.title = parsed.title
    record.text = parsed.text
    record.links = parsed.links
    if record.rendered is None:
        record.encoding = parsed.encoding
    if rt.settings.store_body and record.rendered is not None:
        record.dom = parsed.html  # its body keeps the response as served
    elif rt.settings.store_body:
        record.body = parsed.html
    counts = {counters.LINKS_OVER_CAP: parsed.links_over_cap, counters.LINKS_TOO_LONG: parsed.links_too_long}
    children: list[CrawlRequest] = []
    follow_links = req.extract_links
    program = rt.program
    if len(program.rules):
        limits = limits or rt.limits(req.crawl_id)
        extracted = _program(program, Page(req, record, parsed.html), len(body), limits, caps)
        if extracted is not None:
            children = extracted.requests
            follow_links = follow_links and extracted.follow
            for name, n in extracted.counts.items():
                counts[name] = counts.get(name, 0) + n
    if follow_links:
        limits = limits or rt.limits(req.crawl_id)
        links, too_long = follow(req, parsed.links, limits, s.max_url_length)
        children += links
        counts[counters.LINKS_TOO_LONG] += too_long
    if children:
        children = render.marked(rt, children, limits or rt.limits(req.crawl_id))
    return children, {name: n for name, n in counts.items() if n}


def _program(program: Program, page: Page, size: int, limits: Limits, caps: Caps) -> Extracted | None:
    """The page (of ``size`` bytes) through its crawl's rule and item pipelines (None: no
    rule for it); its record gets the items kept, the rule's name, and what failed."""
    req, record = page.request, page.record
    missing = program.missing(limits.plugins)
    if missing:
        record.description = f"plugin {', '.join(missing)} is not loaded on this worker (CRAWLER_PLUGINS)"
        return Extracted(counts={counters.plugin_failed("missing"): 1})
    rule = program.rules.pick(record.url, host_of(record.url), limits.plugins)
    if rule is None:
        return None
    with _trees.hold(size):  # the rule may parse a tree of the page
        extracted = run_rule(rule, page, limits, caps)
        items, counts, failed = run_pipelines(extracted.items, program.pipelines_for(limits.plugins), page)
    record.rule = rule.name
    record.items = items
    record.description = extracted.error or (failed[1] if failed else None) or extracted.note
    for name, n in counts.items():
        extracted.counts[name] = extracted.counts.get(name, 0) + n
    told = [("rule", extracted.reason, extracted.error)] if extracted.error else []
    if failed:
        told.append(("pipeline", *failed))
    for kind, reason, description in told:  # the error handler hears of each
        follow, more = failures.tell(program, failures.failure_of(kind, reason, description, req, record.status),
                                     req, limits)
        extracted.requests += follow
        for name, n in more.items():
            extracted.counts[name] = extracted.counts.get(name, 0) + n
    return extracted


def parse_claim(rt: ParseDeps, claim_id: str, req: CrawlRequest, task_id: str) -> None:
    """The split pipeline's parse step: parse the page ``claim_id``, enqueue links, queue
    the record for the store, drop the claim."""
    with rt.large_bodies.permit() as permit:  # a large body's slot, until its record is queued
        record, body = rt.claims.load(req.crawl_id, claim_id, with_body=True, permit=permit)
        limits = rt.limits(req.crawl_id)  # once for the page
        children, counts = parse_page(rt, req, record, body or b"", limits)
        enqueue.complete(rt, req, task_id, enqueue.TaskEnd(children, counts, record=record), limits=limits)
    rt.claims.delete(req.crawl_id, claim_id)  # done now, or long ago (a late duplicate)
