"""Parse stage: decode an HTML page, extract title, visible text and links, follow them.

Encoding follows the browsers' order (w3lib): BOM, HTTP header, ``<meta>``,
then detection (charset-normalizer); GB2312/GBK decode as GB18030 and
Shift_JIS as CP932, as browsers do.

A page up to :data:`~crawler_tasks.core.budget.LARGE_BODY` bytes is parsed into a
tree (lxml, in C: the fast way for small pages); a larger one is read as a
stream of parser events (:class:`_Collector`), which keeps only what the record
needs (the capped links and text), never the tree: a tree costs up to 30 times
its body. Both ways give the same title, text and links, except that a tree
stops at 255 levels of nesting and the stream reads on.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit, urlunsplit

import charset_normalizer
import lxml.etree
import lxml.html
from w3lib.encoding import html_to_unicode

from ..core import counters
from ..core.budget import LARGE_BODY, ByteBudget
from ..core.errors import InvalidURL
from ..core.limits import Limits
from ..core.lru import memoize
from ..core.models import CrawlRequest, PageRecord
from ..core.urls import SCHEMES, URL_CACHE_BYTES, url_length
from . import enqueue

if TYPE_CHECKING:
    from .runtime import Runtime

log = logging.getLogger(__name__)

_INVISIBLE = frozenset(("script", "style", "noscript", "template", "svg"))
#: Bytes of bodies parsed into trees at once per worker process: a tree costs up to
#: 30 times its body, so 32 threads each parsing a 1 MiB page would need about 1 GB.
TREE_BYTES = 4 * LARGE_BODY
_trees = ByteBudget(TREE_BYTES)
#: Characters of a large page fed to the stream parser at a time.
FEED = 1 << 16
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\S+")
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")


@dataclass
class Parsed:
    title: str | None
    text: str
    links: list[str] = field(default_factory=list)
    links_over_cap: int = 0
    #: Links longer than ``max_url_length`` bytes: counted, not kept.
    links_too_long: int = 0
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
               robots_header: str = "", max_links: int = 0, max_url_length: int = 0) -> Parsed:
    """Title, bounded visible text and absolute outlinks of an HTML page.

    Links resolve against ``<base href>`` and ``url``; fragments are dropped;
    non-http(s) links and ``rel=nofollow`` links are skipped; a robots
    ``nofollow`` (meta or ``X-Robots-Tag``) yields no links at all. At most
    ``max_links`` distinct links are kept (0 = all); ``links_over_cap`` counts
    the candidates past the cap. Links over ``max_url_length`` bytes (0 = no
    cap) are not kept either; ``links_too_long`` counts them.
    """
    args = (body, url, content_type, text_maxsize, robots_header, max_links, max_url_length)
    if len(body) > LARGE_BODY:
        return _parse_stream(*args)
    with _trees.hold(len(body)):
        return _parse_tree(*args)


def _parse_tree(body: bytes, url: str, content_type: str | None, text_maxsize: int,
                robots_header: str, max_links: int, max_url_length: int) -> Parsed:
    encoding, html = decode_html(body, content_type)
    root = _document(html)
    if root is None:
        return Parsed(title=None, text="", encoding=encoding, html=html)
    nofollow = "nofollow" in robots_header.lower() or _meta_nofollow(root)
    title = _title(root)
    links = _Links(url, 0) if nofollow else _links(root, url, max_links, max_url_length)
    text = _visible_text(root, text_maxsize)
    return Parsed(title=title, text=text, links=links.links, links_over_cap=links.over,
                  links_too_long=links.too_long, nofollow=nofollow, encoding=encoding, html=html)


def _document(text: str) -> lxml.html.HtmlElement | None:
    text = _XML_DECL.sub("", text)
    try:
        return lxml.html.document_fromstring(text)
    except (lxml.etree.ParserError, ValueError):
        return None


def _title(root: lxml.html.HtmlElement) -> str | None:
    found = root.find(".//title")
    if found is None or found.text_content() is None:
        return None
    return _clean_title(found.text_content())


def _clean_title(text: str) -> str | None:
    return _SPACE.sub(" ", text).strip() or None


def _meta_nofollow(root: lxml.html.HtmlElement) -> bool:
    return any(_robots_nofollow(meta.get("name"), meta.get("content")) for meta in root.iter("meta"))


def _robots_nofollow(name: str | None, content: str | None) -> bool:
    """Whether a ``<meta name content>`` forbids following the page's links."""
    if (name or "").lower() not in ("robots", "googlebot"):
        return False
    directives = {d.strip() for d in (content or "").lower().split(",")}
    return bool(directives & {"nofollow", "none"})


def _visible_text(root: lxml.html.HtmlElement, limit: int) -> str:
    """Text a reader sees; mutates ``root`` (drops scripts, styles, comments, in C)."""
    lxml.etree.strip_elements(root, lxml.etree.Comment, *_INVISIBLE, with_tail=False)
    body = root.find("body")
    node = body if body is not None else root
    return " ".join(" ".join(node.itertext()).split())[:limit]


def _links(root: lxml.html.HtmlElement, url: str, cap: int = 0, max_length: int = 0) -> _Links:
    """The page's links (see :class:`_Links`), found in its tree."""
    base = url
    base_el = root.find(".//base[@href]")
    if base_el is not None:
        base = urljoin(url, base_el.get("href").strip())
    links = _Links(base, cap, max_length)
    for el in root.iter("a", "area"):
        links.add(el.get("href"), el.get("rel"))
    return links


class _Links:
    """Distinct absolute links in document order, at most ``cap`` (0 = all), how many
    candidates came past the cap (``over``), and how many were longer than ``max_length``
    bytes (``too_long``, 0 = no limit: counted, not kept)."""

    def __init__(self, base: str, cap: int, max_length: int = 0) -> None:
        self.base, self.cap, self.max_length = base, cap, max_length
        self.too_long = 0
        parts = urlsplit(base)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.seen: set[str] = set()
        self.links: list[str] = []
        self.over = 0
        self.candidates = 0

    def add(self, href: str | None, rel: str | None) -> None:
        """The link of one ``<a>`` or ``<area>`` (its ``href`` and ``rel``)."""
        href = (href or "").strip()
        if not href or href.startswith("#") or "nofollow" in (rel or "").lower().split():
            return  # a bare fragment points into this same document
        self.candidates += 1
        if self.cap and len(self.links) >= self.cap:
            self.over += 1  # not resolved, not kept: past the cap only the count matters
            return
        if href.startswith("/") and not href.startswith("//"):
            link = _absolute_path(self.origin, href)  # the same on every page of the site: cached
        else:
            link = _absolute(self.base, href)
        if link and self.max_length and url_length(link) > self.max_length:
            self.too_long += 1
            return
        if link and link not in self.seen:
            self.seen.add(link)
            self.links.append(link)


def _parse_stream(body: bytes, url: str, content_type: str | None, text_maxsize: int,
                  robots_header: str, max_links: int, max_url_length: int) -> Parsed:
    """:func:`_parse_tree`'s result, from parser events: what it holds is bounded by the
    caps (links, text), not by the page."""
    encoding, html = decode_html(body, content_type)
    seen = _stream(html, _Collector(url, text_maxsize, max_links, max_url_length))
    if not seen.rooted:  # no element at all: an empty document
        return Parsed(title=None, text="", encoding=encoding, html=html)
    if seen.late_base is not None:  # a <base> after links: they resolve against it too
        seen.links = _stream(html, _Collector(url, 0, max_links, max_url_length,
                                              base=seen.late_base)).links
    nofollow = "nofollow" in robots_header.lower() or seen.nofollow
    links = _Links(url, 0) if nofollow else seen.links
    return Parsed(title=seen.title, text=seen.text(), links=links.links, links_over_cap=links.over,
                  links_too_long=links.too_long, nofollow=nofollow, encoding=encoding, html=html)


def _stream(html: str, collector: _Collector) -> _Collector:
    """Feed ``html`` to an lxml HTML parser whose events go to ``collector``."""
    parser = lxml.etree.HTMLParser(target=collector)
    start = m.end() if (m := _XML_DECL.match(html)) else 0
    try:
        for i in range(start, len(html), FEED):
            chunk = html[i:i + FEED]
            if "\x00" in chunk:  # libxml2 reports each NUL apart: one Python call per byte
                chunk = chunk.replace("\x00", "\ufffd")
            parser.feed(chunk)
        parser.close()
    except (lxml.etree.LxmlError, ValueError):
        pass  # an empty document; what came before an error stands, as a tree's would
    collector.close()
    return collector


class _Collector:
    """lxml parser target: the title, robots ``nofollow``, links and visible text of a
    page, as :func:`_parse_tree` finds them in the tree.

    Only the first root element counts (the tree's root); the text is that of the root's
    first ``body`` child, else of the root; comments and invisible elements are dropped
    from it without splitting the text around them, as ``strip_elements`` does.
    """

    def __init__(self, url: str, text_maxsize: int, max_links: int, max_url_length: int = 0, *,
                 base: str | None = None) -> None:
        self.url = url
        self.links = _Links(base or url, max_links, max_url_length)
        self.based = base is not None
        #: A ``<base href>`` found after the first link (the links need a second pass).
        self.late_base: str | None = None
        self.nofollow = False
        self.title: str | None = None
        self._title: list[str] | None = None  # while inside the first <title>
        self._title_depth = 0
        self.depth = 0
        self.rooted = False  # a root element began
        self.done = False  # the root element ended: the tree has nothing more
        self.hidden = 0  # depth inside an invisible element
        self.in_body = False
        self.body_seen = False
        self.root_text = _Words(text_maxsize)
        self.body_text = _Words(text_maxsize)

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        if self.done:
            return
        if tag == "a" or tag == "area":
            self.links.add(attrib.get("href"), attrib.get("rel"))
        elif tag == "base" and "href" in attrib and not self.based:
            self.based = True
            base = urljoin(self.url, attrib["href"].strip())
            if self.links.candidates:
                self.late_base = base
            else:
                self.links = _Links(base, self.links.cap, self.links.max_length)
        elif tag == "meta" and _robots_nofollow(attrib.get("name"), attrib.get("content")):
            self.nofollow = True
        elif tag == "title" and self.title is None and self._title is None:
            self._title, self._title_depth = [], self.depth
        self.depth += 1
        self.rooted = True
        if self.hidden or tag in _INVISIBLE:
            self.hidden += 1
            return
        self._break()
        if tag == "body" and self.depth == 2 and not self.body_seen:
            self.in_body = self.body_seen = True

    def end(self, tag: str) -> None:
        if self.done:
            return
        self.depth -= 1
        self.done = self.depth == 0
        if self._title is not None and self.depth == self._title_depth:
            self.title = _clean_title("".join(self._title)) or ""  # "": the first one was empty
            self._title = None
        if self.hidden:
            self.hidden -= 1
            return
        self._break()
        if self.in_body and self.depth == 1:
            self.in_body = False

    def data(self, data: str) -> None:
        if self.done:
            return
        if self._title is not None:
            self._title.append(data)
        if not self.hidden and self.depth:
            self.root_text.add(data)
            if self.in_body:
                self.body_text.add(data)

    def pi(self, target: str, data: str) -> None:
        """A processing instruction is a node of its own: its text stands apart."""
        if not self.done and not self.hidden and self.depth:
            self._break()
            self.root_text.add(data)
            if self.in_body:
                self.body_text.add(data)
            self._break()

    def close(self) -> None:
        self._break()
        if self.title == "":
            self.title = None

    def _break(self) -> None:
        """An element boundary ends the run of text."""
        self.root_text.end()
        self.body_text.end()

    def text(self) -> str:
        return (self.body_text if self.body_seen else self.root_text).text()


class _Words:
    """``" ".join(" ".join(runs).split())[:limit]`` of text runs fed in pieces, keeping
    only the first ``limit`` characters' worth."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.words: list[str] = []
        self.size = -1  # of " ".join(words)
        self._word: list[str] = []  # pieces of the word being read
        self._word_size = 0

    def add(self, text: str) -> None:
        """More of the current run."""
        if self.size >= self.limit:
            return
        for m in _WORD.finditer(text):
            if m.start():
                self.end()
            if self._word_size < self.limit:  # past the limit the word is cut anyway
                piece = m.group()[:self.limit - self._word_size]
                self._word.append(piece)
                self._word_size += len(piece)
            if m.end() < len(text):
                self.end()
            if self.size >= self.limit:
                return
        if text and text[-1].isspace():
            self.end()

    def end(self) -> None:
        """The current run (or word) ends here."""
        if self._word:
            word = "".join(self._word)
            self._word, self._word_size = [], 0
            if self.size < self.limit:
                self.words.append(word)
                self.size += len(word) + 1

    def text(self) -> str:
        self.end()
        return " ".join(self.words)[:self.limit]


@memoize(URL_CACHE_BYTES)
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


def follow(req: CrawlRequest, links: list[str], limits: Limits,
           max_url_length: int = 0) -> tuple[list[CrawlRequest], int]:
    """Requests for the links ``req``'s page may follow: in the crawl's scope, within depth;
    and how many were over ``max_url_length`` bytes once percent-encoded (0 = no limit)."""
    depth = req.depth + 1
    if limits.max_depth and depth > limits.max_depth:
        return [], 0
    meta = _inherited_meta(req)
    out: list[CrawlRequest] = []
    too_long = 0
    for link in links:
        if not limits.allows(link, origin=req.url):
            continue
        try:
            child = CrawlRequest(url=link, depth=depth, crawl_id=req.crawl_id, meta=meta)
        except InvalidURL:
            continue
        if max_url_length and len(child.url) > max_url_length:  # percent-encoding made it longer
            too_long += 1
            continue
        out.append(child)
    return out, too_long


def _inherited_meta(req: CrawlRequest) -> dict:
    return {k: v for k, v in req.meta.items() if k not in ("NotExtract", "url_id")}


def parse_page(rt: Runtime, req: CrawlRequest, record: PageRecord,
               body: bytes) -> tuple[list[CrawlRequest], dict[str, int]]:
    """Fill ``record`` from its HTML ``body``; return the requests for the links to follow
    and the parse's counters (``links/over_cap``: links past ``CRAWLER_MAX_LINKS_PER_PAGE``;
    ``links/too_long``: links longer than ``CRAWLER_MAX_URL_LENGTH``)."""
    s = rt.settings
    parsed = parse_html(body, url=record.url, content_type=record.headers.get("content-type"),
                        text_maxsize=s.text_maxsize,
                        robots_header=record.headers.get("x-robots-tag", ""),
                        max_links=s.max_links_per_page, max_url_length=s.max_url_length)
    record.title = parsed.title
    record.text = parsed.text
    record.links = parsed.links
    record.encoding = parsed.encoding
    if rt.settings.store_body:
        record.body = parsed.html
    counts = {counters.LINKS_OVER_CAP: parsed.links_over_cap, counters.LINKS_TOO_LONG: parsed.links_too_long}
    if req.extract_links:
        children, too_long = follow(req, parsed.links, rt.limits(req.crawl_id), s.max_url_length)
        counts[counters.LINKS_TOO_LONG] += too_long
    else:
        children = []
    return children, {name: n for name, n in counts.items() if n}


def parse_claim(rt: Runtime, claim_id: str, req: CrawlRequest, task_id: str) -> None:
    """The split pipeline's parse step: parse the page ``claim_id``, enqueue links, queue
    the record for the store, drop the claim."""
    with rt.large_bodies.permit() as permit:  # a large body's slot, until its record is queued
        record, body = rt.claims.load(req.crawl_id, claim_id, with_body=True, permit=permit)
        children, counts = parse_page(rt, req, record, body or b"")
        enqueue.complete(rt, req, task_id, children, counts, record=record)
    rt.claims.delete(req.crawl_id, claim_id)  # done now, or long ago (a late duplicate)
