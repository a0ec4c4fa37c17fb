"""The render step of a fetch: which requests go to the ``crawl.render`` workers, and the
browser's turn between a page's download and its parse.

The rules are :mod:`crawler_tasks.core.render`'s; the browser is
:class:`crawler_tasks.net.render.Browser`, one per render worker process. A rendered page
goes through every stage as any page does: the gate and the bands before, robots.txt
and the host's politeness for its document, then the same parse (on its DOM) and the
same stores (its record says ``rendered``, and keeps the response as served in ``body``
beside the ``dom``).
"""

from __future__ import annotations

import codecs
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..core import counters
from ..core.errors import BrowserMissing, FetchError, RenderTimeout
from ..core.models import CrawlRequest
from ..core.policy import HandOn
from ..core.render import page_wait, stuck, unsettled, wants_render
from ..core.responses import Download
from ..core.urls import host_of
from .parse.base import decode_html

if TYPE_CHECKING:
    from ..core.limits import Limits
    from .deps import FetchDeps, ParseDeps

#: Content types a browser renders (others are kept as downloaded).
RENDERED_TYPES = frozenset({"text/html", "application/xhtml+xml"})


def needs_render(rt: ParseDeps, req: CrawlRequest, limits: Limits) -> bool:
    """Whether ``req`` is rendered: it says so, its rule renders, or its host is one of
    ``CRAWLER_RENDER_HOSTS``."""
    if req.render:
        return True
    rules = rt.program.rules
    rule = rules.pick(req.url, host_of(req.url), limits.plugins) if rules.renders else None
    return wants_render(req.url, asked=False, rule_renders=rule is not None and rule.render,
                        hosts=rt.settings.render_hosts)


def marked(rt: ParseDeps, requests: Sequence[CrawlRequest], limits: Limits) -> list[CrawlRequest]:
    """``requests`` with ``render`` set on those to render (unchanged when nothing renders)."""
    if not rt.settings.render_hosts and not rt.program.rules.renders:
        return list(requests)
    return [r.replace(render=True) if not r.render and needs_render(rt, r, limits) else r for r in requests]


def renders(result: Download) -> bool:
    """Whether a download is one a browser renders: a whole HTML response of status 2xx."""
    return 200 <= result.status < 300 and result.content_type in RENDERED_TYPES


def render(rt: FetchDeps, req: CrawlRequest, served: Download, proxy: str | None) -> Download | FetchError:
    """``served`` with the DOM the browser made of it (``dom``, ``rendered``), or the
    :class:`~crawler_tasks.core.errors.FetchError` that ended the render. Each request the
    page makes is fetched through ``proxy`` (None: direct) by this thread's guarded session."""
    s = rt.settings
    wait = page_wait(req.meta, s.render_wait)
    try:
        dom, report = rt.browser.render(req.url, served, wait=wait, proxy=proxy)
    except FetchError as err:
        return err
    except BrowserMissing as err:  # no browser on this worker
        return FetchError(f"render: {err}")
    if dom is None:
        return RenderTimeout(stuck(wait, s.render_timeout_s))
    served.dom, served.rendered = dom, report
    return served


def with_dom(rt: FetchDeps, outcome: HandOn, result: Download) -> HandOn:
    """The kept page of a render, its DOM to parse: the record says how it was rendered
    (and, for a page read before its wait condition, why), and keeps the response as
    served in ``body``; the DOM beyond ``CRAWLER_DOWNLOAD_MAXSIZE`` bytes is cut."""
    report = result.rendered
    assert report is not None and result.dom is not None
    s = rt.settings
    record = outcome.record
    record.rendered = report.to_dict()
    if not report.settled:
        record.description = unsettled(report, s.render_timeout_s)
    if s.store_body and outcome.body is not None:
        record.encoding, record.body = decode_html(outcome.body, record.headers.get("content-type"))
    dom = result.dom.encode("utf-8", errors="replace")
    if len(dom) > s.download_maxsize:
        dom, record.truncated = dom[:s.download_maxsize], True
    dom = codecs.BOM_UTF8 + dom  # the DOM is UTF-8, whatever the response's header and <meta> say
    counts = dict(outcome.counts)
    for name, n in ((counters.RENDERED, 1), (counters.RENDER_UNSETTLED, int(not report.settled)),
                    (counters.RENDER_REQUESTS, report.requests), (counters.RENDER_BLOCKED, report.blocked),
                    (counters.RENDER_REFUSED, report.refused)):
        if n:
            counts[name] = counts.get(name, 0) + n
    return dataclasses.replace(outcome, body=dom, counts=counts)
