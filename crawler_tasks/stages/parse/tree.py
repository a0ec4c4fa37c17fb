"""The tree parser, for pages up to ``LARGE_BODY`` bytes: lxml builds the tree, in C, the fast way.

A tree costs up to 30 times its body (which is why large pages are streamed
instead, and why the trees parsed at once are bounded) and stops at 255 levels
of nesting.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urljoin

import lxml.etree
import lxml.html

from .base import INVISIBLE, XML_DECL, Caps, Parsed, clean_title, decode_html, robots_nofollow
from .links import Links

#: Called with the page parsed so far (no text yet) and its whole tree, before the
#: text is taken (which strips the invisible elements from the tree).
Visit = Callable[[Parsed, "lxml.html.HtmlElement | None"], None]


def parse_tree(body: bytes, url: str, content_type: str | None, caps: Caps, robots_header: str,
               visit: Visit | None = None) -> Parsed:
    """Title, bounded visible text and outlinks of an HTML page, from its lxml tree;
    ``visit`` sees the tree whole first (a rule's selectors share it)."""
    encoding, html = decode_html(body, content_type)
    root = _document(html)
    if root is None:
        parsed = Parsed(title=None, text="", encoding=encoding, html=html)
        if visit is not None:
            visit(parsed, None)
        return parsed
    nofollow = "nofollow" in robots_header.lower() or _meta_nofollow(root)
    links = Links(url, 0) if nofollow else _links(root, url, caps.max_links, caps.max_url_length)
    parsed = Parsed(title=_title(root), text="", links=links.links, links_over_cap=links.over,
                    links_too_long=links.too_long, nofollow=nofollow, encoding=encoding, html=html)
    if visit is not None:
        visit(parsed, root)
    parsed.text = _visible_text(root, caps.text_maxsize)
    return parsed


def _document(text: str) -> lxml.html.HtmlElement | None:
    text = XML_DECL.sub("", text)
    try:
        return lxml.html.document_fromstring(text)
    except (lxml.etree.ParserError, ValueError):
        return None


def _title(root: lxml.html.HtmlElement) -> str | None:
    found = root.find(".//title")
    if found is None or found.text_content() is None:
        return None
    return clean_title(found.text_content())


def _meta_nofollow(root: lxml.html.HtmlElement) -> bool:
    return any(robots_nofollow(meta.get("name"), meta.get("content")) for meta in root.iter("meta"))


#: The text nodes under an element, as ``itertext`` gives them, as plain strings (three
#: times faster: no "smart" strings that know their parent).
_TEXTS = lxml.etree.XPath("descendant::text()", smart_strings=False)


#: What a reader does not see: comments, processing instructions, scripts, styles...
_HIDDEN = (lxml.etree.Comment, lxml.etree.ProcessingInstruction, *INVISIBLE)


def _visible_text(root: lxml.html.HtmlElement, limit: int) -> str:
    """Text a reader sees; mutates ``root`` (drops scripts, styles, comments)."""
    _drop_hidden(root)
    body = root.find("body")
    node = body if body is not None else root
    return " ".join(" ".join(_TEXTS(node)).split())[:limit]


def _drop_hidden(root: lxml.html.HtmlElement) -> None:
    """Drop what a reader does not see, the text after each joined to the text before it
    (``word<!-- c -->word`` reads ``wordword``, as the streaming parser and a browser give it)."""
    hidden = list(root.iter(*_HIDDEN))
    dropped = set(hidden)
    for node in hidden:
        tail = node.tail
        if not tail:
            continue
        node.tail = None
        before = node.getprevious()
        while before is not None and before in dropped:
            before = before.getprevious()
        if before is not None:
            before.tail = (before.tail or "") + tail
        elif (parent := node.getparent()) is not None:
            parent.text = (parent.text or "") + tail
    lxml.etree.strip_elements(root, *_HIDDEN, with_tail=False)


def _links(root: lxml.html.HtmlElement, url: str, cap: int = 0, max_length: int = 0) -> Links:
    """The page's links (see :class:`Links`), found in its tree."""
    base = url
    base_el = root.find(".//base[@href]")
    if base_el is not None:
        base = urljoin(url, base_el.get("href").strip())
    links = Links(base, cap, max_length)
    for el in root.iter("a", "area"):
        links.add(el.get("href"), el.get("rel"))
    return links
