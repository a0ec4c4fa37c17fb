"""What a parse rule or a request's callback sees of a fetched page: :class:`Page`.

Its selectors are parsel's (Scrapy's own selector library): ``page.css()``,
``page.xpath()`` and ``page.re()`` give selector lists with ``.get()``,
``.getall()``, ``.attrib`` and ``.re_first()``; ``page.json()`` and
``page.jmespath()`` read JSON responses. An HTML page's selectors work on the lxml
tree the default extraction parsed: one tree per page.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

import lxml.etree
import lxml.html

from ...core.asks import Request
from ...core.errors import BadInput
from ...core.models import CrawlRequest, PageRecord
from .base import XML_DECL

if TYPE_CHECKING:  # parsel is imported once a page's selectors are used
    from parsel import Selector, SelectorList

JSON_TYPES = ("application/json", "text/json")


class Page:
    """What a parse rule or a callback sees of a fetched page.

    ``text`` is the decoded body; ``tree`` its lxml document (None for a document
    lxml cannot read, or a page that is not HTML); ``meta`` the request's meta;
    ``cb_kwargs`` its callback's keyword arguments.
    """

    def __init__(self, request: CrawlRequest, record: PageRecord, text: str,
                 tree: lxml.html.HtmlElement | None = None) -> None:
        self.url = record.url
        self.status = record.status
        self.headers = record.headers
        self.text = text
        self.meta = request.meta
        self.cb_kwargs = request.cb_kwargs
        self.crawl_id = request.crawl_id
        self.depth = request.depth
        self.title = record.title
        #: The request and record the page came from (what the crawler needs, not the rule).
        self.request, self.record = request, record
        self._tree = tree
        self._parsed = tree is not None
        self._selector: Selector | None = None
        self._base: str | None = None

    @property
    def is_json(self) -> bool:
        """Whether the response says it is JSON."""
        kind = (self.record.content_type or "").lower()
        return kind in JSON_TYPES or kind.endswith("+json")

    @property
    def tree(self) -> lxml.html.HtmlElement | None:
        if not self._parsed:
            self._parsed = True
            if not self.is_json:
                try:
                    self._tree = lxml.html.document_fromstring(XML_DECL.sub("", self.text) or "<html/>",
                                                               base_url=self.url)
                except (lxml.etree.ParserError, ValueError):
                    self._tree = None
        return self._tree

    @property
    def selector(self) -> Selector:
        """The page's parsel selector: on its HTML tree, or on its JSON."""
        if self._selector is None:
            from parsel import Selector

            tree = self.tree
            if tree is not None:
                self._selector = Selector(root=tree, type="html", base_url=self.url)
            elif self.is_json:
                self._selector = Selector(text=self.text or "null", type="json")
            else:
                self._selector = Selector(text="<html/>", type="html", base_url=self.url)
        return self._selector

    def css(self, query: str) -> SelectorList[Selector]:
        """The elements matching the CSS selector ``query`` (``::text``, ``::attr(name)``)."""
        return self.selector.css(query)

    def xpath(self, query: str, **variables: Any) -> SelectorList[Selector]:
        """The nodes matching the XPath ``query`` (``$name`` variables from keywords)."""
        return self.selector.xpath(query, **variables)

    def re(self, regex: str, replace_entities: bool = True) -> list[str]:
        """The matches of ``regex`` in the page (its groups when it has some)."""
        return self.selector.re(regex, replace_entities)

    def re_first(self, regex: str, default: str | None = None) -> str | None:
        """The first match of ``regex`` in the page, else ``default``."""
        return self.selector.re_first(regex, default)

    def json(self) -> Any:
        """The body as JSON (:class:`ValueError` when it is not JSON)."""
        return json.loads(self.text)

    def jmespath(self, query: str) -> SelectorList[Selector]:
        """The values a JMESPath ``query`` finds in the JSON body."""
        return self.selector.jmespath(query)

    def urljoin(self, href: str) -> str:
        """``href`` made absolute against the page's URL (its ``<base href>`` first)."""
        if self._base is None:
            found = self.tree.find(".//base[@href]") if self.tree is not None else None
            self._base = self.url if found is None else urljoin(self.url, found.get("href", "").strip())
        return urljoin(self._base, href.strip())

    def follow(self, url: str | Selector, callback: Callable[..., Any] | str | None = None,
               **fields: Any) -> Request:
        """A :class:`~crawler_tasks.core.asks.Request` for ``url``: a URL relative to the
        page, an ``<a>`` or ``<link>`` selector (its ``href``), an ``<img>`` (its ``src``) or
        an attribute's selector; ``fields`` are the Request's other fields."""
        return Request(self.urljoin(_href(url)), callback=callback, **fields)

    def follow_all(self, urls: Iterable[str | Selector] | None = None,
                   callback: Callable[..., Any] | str | None = None, *, css: str | None = None,
                   xpath: str | None = None, **fields: Any) -> list[Request]:
        """:meth:`follow` for each of ``urls``, or of the elements ``css`` or ``xpath`` select."""
        if (urls is None) == (css is None and xpath is None) or (css is not None and xpath is not None):
            raise BadInput("follow_all: give urls, css or xpath, one of them")
        found = urls if urls is not None else (self.css(css) if css is not None else self.xpath(xpath or ""))
        return [self.follow(u, callback, **fields) for u in found]

    def __repr__(self) -> str:
        return f"<Page {self.status} {self.url}>"


def _href(url: str | Selector) -> str:
    """The URL a string or a selector stands for (as Scrapy's ``response.follow``)."""
    if isinstance(url, str):
        return url
    if hasattr(url, "root"):  # a parsel Selector
        root = url.root
        if isinstance(root, str):
            return root
        tag = getattr(root, "tag", None)
        if tag in ("a", "link") and root.get("href") is not None:
            return str(root.get("href"))
        if tag == "img" and root.get("src") is not None:
            return str(root.get("src"))
        raise BadInput(f"follow: a <{tag}> selector has no URL (an <a>, <link> or <img>, or an attribute)")
    raise BadInput(f"follow: expected a URL or a selector, got {type(url).__name__}")
