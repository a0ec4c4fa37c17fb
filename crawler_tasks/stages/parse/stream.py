"""The stream parser, for pages over ``LARGE_BODY`` bytes: lxml's parser events, never a tree.

A :class:`Collector` keeps only what the record needs (the capped links and
text), so what it holds is bounded by the caps, not by the page. It gives the
title, text and links the tree parser would (``tests/stages/test_parse.py``
checks it), except that a tree stops at 255 levels of nesting and the stream
reads on.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

import lxml.etree

from .base import INVISIBLE, XML_DECL, Caps, Parsed, clean_title, decode_html, robots_nofollow
from .links import Links

#: Characters of a large page fed to the stream parser at a time.
FEED = 1 << 16
_WORD = re.compile(r"\S+")


def parse_stream(body: bytes, url: str, content_type: str | None, caps: Caps, robots_header: str) -> Parsed:
    """:func:`~crawler_tasks.stages.parse.tree.parse_tree`'s result, from parser events: what
    it holds is bounded by the caps (links, text), not by the page."""
    encoding, html = decode_html(body, content_type)
    seen = _stream(html, Collector(url, caps.text_maxsize, caps.max_links, caps.max_url_length))
    if not seen.rooted:  # no element at all: an empty document
        return Parsed(title=None, text="", encoding=encoding, html=html)
    if seen.late_base is not None:  # a <base> after links: they resolve against it too
        seen.links = _stream(html, Collector(url, 0, caps.max_links, caps.max_url_length,
                                             base=seen.late_base)).links
    nofollow = "nofollow" in robots_header.lower() or seen.nofollow
    links = Links(url, 0) if nofollow else seen.links
    return Parsed(title=seen.title, text=seen.text(), links=links.links, links_over_cap=links.over,
                  links_too_long=links.too_long, nofollow=nofollow, encoding=encoding, html=html)


def _stream(html: str, collector: Collector) -> Collector:
    """Feed ``html`` to an lxml HTML parser whose events go to ``collector``."""
    parser = lxml.etree.HTMLParser(target=collector)
    start = m.end() if (m := XML_DECL.match(html)) else 0
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


class Collector:
    """lxml parser target: the title, robots ``nofollow``, links and visible text of a
    page, as the tree parser finds them in the tree.

    Only the first root element counts (the tree's root); the text is that of the root's
    first ``body`` child, else of the root; comments and invisible elements are dropped
    from it without splitting the text around them, as ``strip_elements`` does.
    """

    def __init__(self, url: str, text_maxsize: int, max_links: int, max_url_length: int = 0, *,
                 base: str | None = None) -> None:
        self.url = url
        self.links = Links(base or url, max_links, max_url_length)
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
                self.links = Links(base, self.links.cap, self.links.max_length)
        elif tag == "meta" and robots_nofollow(attrib.get("name"), attrib.get("content")):
            self.nofollow = True
        elif tag == "title" and self.title is None and self._title is None:
            self._title, self._title_depth = [], self.depth
        self.depth += 1
        self.rooted = True
        if self.hidden or tag in INVISIBLE:
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
            self.title = clean_title("".join(self._title)) or ""  # "": the first one was empty
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
