"""Parse stage: decode an HTML page, extract title, visible text and links, follow them.

Encoding follows the browsers' order (w3lib): BOM, HTTP header, ``<meta>``,
then detection (charset-normalizer); GB2312/GBK decode as GB18030 and
Shift_JIS as CP932, as browsers do.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit, urlunsplit

import charset_normalizer
import lxml.etree
import lxml.html
from w3lib.encoding import html_to_unicode

from . import enqueue
from .crawls import Limits
from .errors import InvalidURL
from .models import CrawlRequest, PageRecord
from .urls import SCHEMES, URL_CACHE_SIZE

if TYPE_CHECKING:
    from .runtime import Runtime

log = logging.getLogger(__name__)

_INVISIBLE = ("script", "style", "noscript", "template", "svg")
#: Bodies above this many bytes are parsed one at a time per worker process: a
#: parse tree costs tens of times its body, so 32 threads parsing 10 MiB pages at
#: once would need gigabytes. Parsing holds the GIL anyway, so little is lost.
LARGE_BODY = 1 << 20
_large_parse = threading.Lock()
_SPACE = re.compile(r"\s+")


@dataclass
class Parsed:
    title: str | None
    text: str
    links: list[str] = field(default_factory=list)
    links_over_cap: int = 0
    nofollow: bool = False
    encoding: str | None = None
    #: The whole document decoded with ``encoding`` (the record's ``body``).
    html: str = ""


def detect_encoding(body: bytes) -> str | None:
    best = charset_normalizer.from_bytes(body[:65536]).best()
    return best.encoding if best else None


def decode_html(body: bytes, content_type: str | None) -> tuple[str, str]:
    """(encoding, text) of an HTML body."""
    encoding, text = html_to_unicode(content_type, body, auto_detect_fun=detect_encoding)
    return encoding, text


def parse_html(body: bytes, *, url: str, content_type: str | None, text_maxsize: int,
               robots_header: str = "", max_links: int = 0) -> Parsed:
    """Title, bounded visible text and absolute outlinks of an HTML page.

    Links resolve against ``<base href>`` and ``url``; fragments are dropped;
    non-http(s) links and ``rel=nofollow`` links are skipped; a robots
    ``nofollow`` (meta or ``X-Robots-Tag``) yields no links at all. At most
    ``max_links`` distinct links are kept (0 = all); ``links_over_cap`` counts
    the candidates past the cap.
    """
    if len(body) > LARGE_BODY:
        with _large_parse:
            return _parse_html(body, url, content_type, text_maxsize, robots_header, max_links)
    return _parse_html(body, url, content_type, text_maxsize, robots_header, max_links)


def _parse_html(body: bytes, url: str, content_type: str | None, text_maxsize: int,
                robots_header: str, max_links: int) -> Parsed:
    encoding, html = decode_html(body, content_type)
    root = _document(html)
    if root is None:
        return Parsed(title=None, text="", encoding=encoding, html=html)
    nofollow = "nofollow" in robots_header.lower() or _meta_nofollow(root)
    title = _title(root)
    links, over = ([], 0) if nofollow else _links(root, url, max_links)
    text = _visible_text(root, text_maxsize)
    return Parsed(title=title, text=text, links=links, links_over_cap=over, nofollow=nofollow,
                  encoding=encoding, html=html)


def _document(text: str) -> lxml.html.HtmlElement | None:
    text = re.sub(r"^\s*<\?xml[^>]*\?>", "", text)
    try:
        return lxml.html.document_fromstring(text)
    except (lxml.etree.ParserError, ValueError):
        return None


def _title(root: lxml.html.HtmlElement) -> str | None:
    found = root.find(".//title")
    if found is None or found.text_content() is None:
        return None
    title = _SPACE.sub(" ", found.text_content()).strip()
    return title or None


def _meta_nofollow(root: lxml.html.HtmlElement) -> bool:
    for meta in root.iter("meta"):
        if (meta.get("name") or "").lower() in ("robots", "googlebot"):
            directives = {d.strip() for d in (meta.get("content") or "").lower().split(",")}
            if directives & {"nofollow", "none"}:
                return True
    return False


def _visible_text(root: lxml.html.HtmlElement, limit: int) -> str:
    """Text a reader sees; mutates ``root`` (drops scripts, styles, comments, in C)."""
    lxml.etree.strip_elements(root, lxml.etree.Comment, *_INVISIBLE, with_tail=False)
    body = root.find("body")
    node = body if body is not None else root
    return " ".join(" ".join(node.itertext()).split())[:limit]


def _links(root: lxml.html.HtmlElement, url: str, cap: int = 0) -> tuple[list[str], int]:
    """Distinct absolute links in document order, at most ``cap`` (0 = all), and how many more."""
    base = url
    base_el = root.find(".//base[@href]")
    if base_el is not None:
        base = urljoin(url, base_el.get("href").strip())
    parts = urlsplit(base)
    origin = f"{parts.scheme}://{parts.netloc}"
    seen: set[str] = set()
    links: list[str] = []
    over = 0
    for el in root.iter("a", "area"):
        href = (el.get("href") or "").strip()
        if not href or href.startswith("#") or "nofollow" in (el.get("rel") or "").lower().split():
            continue  # a bare fragment points into this same document
        if cap and len(links) >= cap:
            over += 1  # not resolved, not kept: past the cap only the count matters
            continue
        if href.startswith("/") and not href.startswith("//"):
            link = _absolute_path(origin, href)  # the same on every page of the site: cached
        else:
            link = _absolute(base, href)
        if link and link not in seen:
            seen.add(link)
            links.append(link)
    return links, over


@functools.lru_cache(maxsize=URL_CACHE_SIZE)
def _absolute_path(origin: str, href: str) -> str | None:
    """``_absolute`` for an href starting with one ``/``: it depends only on the base's origin."""
    return _absolute(origin + "/", href)


def _absolute(base: str, href: str) -> str | None:
    try:
        parts = urlsplit(urljoin(base, href))
    except ValueError:
        return None
    if parts.scheme not in SCHEMES or not parts.netloc:
        return None
    return urlunsplit(parts._replace(fragment=""))


def follow(req: CrawlRequest, links: list[str], limits: Limits) -> list[CrawlRequest]:
    """Requests for the links ``req``'s page may follow: in the crawl's scope, within depth."""
    depth = req.depth + 1
    if limits.max_depth and depth > limits.max_depth:
        return []
    meta = _inherited_meta(req)
    out: list[CrawlRequest] = []
    for link in links:
        if not limits.allows(link, origin=req.url):
            continue
        try:
            out.append(CrawlRequest(url=link, depth=depth, crawl_id=req.crawl_id, meta=meta))
        except InvalidURL:
            continue
    return out


def _inherited_meta(req: CrawlRequest) -> dict:
    return {k: v for k, v in req.meta.items() if k not in ("NotExtract", "url_id")}


def parse_page(rt: Runtime, req: CrawlRequest, record: PageRecord,
               body: bytes) -> tuple[list[CrawlRequest], dict[str, int]]:
    """Fill ``record`` from its HTML ``body``; return the requests for the links to follow
    and the parse's counters (``links/over_cap``: links past ``CRAWLER_MAX_LINKS_PER_PAGE``)."""
    parsed = parse_html(body, url=record.url, content_type=record.headers.get("content-type"),
                        text_maxsize=rt.settings.text_maxsize,
                        robots_header=record.headers.get("x-robots-tag", ""),
                        max_links=rt.settings.max_links_per_page)
    record.title = parsed.title
    record.text = parsed.text
    record.links = parsed.links
    record.encoding = parsed.encoding
    if rt.settings.store_body:
        record.body = parsed.html
    counts = {"links/over_cap": parsed.links_over_cap} if parsed.links_over_cap else {}
    if not req.extract_links:
        return [], counts
    return follow(req, parsed.links, rt.limits(req.crawl_id)), counts


def parse_claim(rt: Runtime, claim_id: str, req: CrawlRequest, task_id: str) -> None:
    """The split pipeline's parse step: parse the page ``claim_id``, enqueue links, queue
    the record for the store, drop the claim."""
    with rt.large_bodies.permit() as permit:  # a large body's slot, until its record is queued
        record, body = rt.claims.load(req.crawl_id, claim_id, with_body=True, permit=permit)
        children, counts = parse_page(rt, req, record, body or b"")
        enqueue.complete(rt, req, task_id, children, counts, record=record)
    rt.claims.delete(req.crawl_id, claim_id)  # done now, or long ago (a late duplicate)
