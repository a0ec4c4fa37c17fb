"""What a rule or a callback sees of a page: parsel's selectors, JSON, follow (pure)."""

from __future__ import annotations

import lxml.html
import pytest

from crawler_tasks import Request
from crawler_tasks.core.errors import BadInput
from crawler_tasks.core.models import CrawlRequest, PageRecord
from crawler_tasks.stages.parse.view import Page

HTML = """<html><head><base href="/shop/"><title>Books</title>
<script type="application/json" id="data">{"stock": {"count": 7}}</script></head><body>
<article class="book"><h3><a href="b/1" title="One">One</a></h3><p class="price">£1,021.03</p></article>
<article class="book"><h3><a href="b/2" title="Two">Two</a></h3><p class="price">£9.50</p></article>
<link rel="next" href="page-2"><img src="/img/c.png"></body></html>"""


def page(html: str = HTML, content_type: str = "text/html", url: str = "http://s.test/shop/",
         **req: object) -> Page:
    request = CrawlRequest(url=url, crawl_id="c", **req)  # type: ignore[arg-type]
    record = PageRecord(url=url, fingerprint="f", crawl_id="c", depth=0, fetched_at="x", status=200,
                        content_type=content_type)
    return Page(request, record, html)


def test_css_and_xpath_give_selector_lists_like_scrapy():
    p = page()
    assert p.css("article.book h3 a::text").getall() == ["One", "Two"]
    assert p.css("article.book h3 a::attr(title)").get() == "One"
    assert p.css("article.book a")[1].attrib["href"] == "b/2"
    assert p.xpath("//p[@class='price']/text()").re_first(r"£([\d.,]+)") == "1,021.03"
    assert p.xpath("//article[$n]//a/text()", n=2).get() == "Two"
    assert p.css("nothing::text").get() is None and p.css("nothing::text").get(default="-") == "-"
    assert p.re(r"£([\d.]+)") == ["1", "9.50"] and p.re_first(r"£(\d),") == "1"


def test_a_script_is_still_there_for_selectors_and_jmespath_reads_it():
    p = page()
    assert p.css("script#data::text").jmespath("stock.count").get() == 7


def test_json_pages_read_as_json_and_by_jmespath():
    p = page('{"quotes": [{"text": "a", "tags": ["x"]}, {"text": "b", "tags": []}], "has_next": true}',
             content_type="application/json", url="http://s.test/api/quotes?page=1")
    assert p.json()["has_next"] is True
    assert p.jmespath("quotes[].text").getall() == ["a", "b"]
    assert p.tree is None


def test_follow_takes_urls_and_selectors_and_makes_requests_against_the_base():
    p = page()
    first = p.follow(p.css("article a")[0], callback=parse_book, cb_kwargs={"n": 1}, priority=3)
    assert first == Request("http://s.test/shop/b/1", priority=3, callback=f"{__name__}.parse_book",
                            cb_kwargs={"n": 1})
    assert p.follow(p.css("link[rel=next]")[0]).url == "http://s.test/shop/page-2"
    assert p.follow(p.css("img")[0]).url == "http://s.test/img/c.png"
    assert p.follow(p.css("a::attr(href)")[1]).url == "http://s.test/shop/b/2"
    assert [r.url for r in p.follow_all(css="article h3 a")] == ["http://s.test/shop/b/1", "http://s.test/shop/b/2"]
    assert [r.url for r in p.follow_all(["x", "/y"])] == ["http://s.test/shop/x", "http://s.test/y"]
    with pytest.raises(BadInput, match="has no URL"):
        p.follow(p.css("p")[0])
    with pytest.raises(BadInput, match="one of them"):
        p.follow_all()


def parse_book(pg: Page) -> None:
    return None


def test_a_callback_must_be_found_again_by_name():
    with pytest.raises(BadInput, match="module-level function"):
        Request("http://s.test/", callback=lambda pg: None)

    def nested(pg: Page) -> None:
        return None

    with pytest.raises(BadInput, match="module-level function"):
        Request("http://s.test/", errback=nested)
    assert Request("http://s.test/", callback="myapp.parse").callback == "myapp.parse"


def test_a_page_given_a_tree_uses_it():
    root = lxml.html.document_fromstring(HTML)
    p = Page(CrawlRequest(url="http://s.test/shop/"),
             PageRecord(url="http://s.test/shop/", fingerprint="f", crawl_id="c", depth=0, fetched_at="x"),
             HTML, root)
    assert p.tree is root and p.selector.root is root


def test_an_item_loader_fills_an_item_class_from_the_page_selectors():
    import dataclasses

    from itemloaders import ItemLoader
    from itemloaders.processors import MapCompose, TakeFirst

    @dataclasses.dataclass
    class Book:
        title: str | None = None
        price: float | None = None

    class BookLoader(ItemLoader):
        default_output_processor = TakeFirst()
        price_in = MapCompose(lambda p: p.lstrip("£").replace(",", ""), float)

    p = page()
    loader = BookLoader(item=Book(), selector=p.css("article.book")[0])
    loader.add_css("title", "h3 a::attr(title)")
    loader.add_css("price", "p.price::text")
    assert loader.load_item() == Book(title="One", price=1021.03)
