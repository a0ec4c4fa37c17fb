"""A page through a rule and the item pipelines (pure: no Redis, no worker)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from crawler_tasks import DropItem, Request
from crawler_tasks.core.limits import Limits
from crawler_tasks.core.models import CrawlRequest, PageRecord
from crawler_tasks.core.program import Pipeline, Rule
from crawler_tasks.stages.parse.base import Caps
from crawler_tasks.stages.parse.rules import Parser, reason_name, run_pipelines, run_rule
from crawler_tasks.stages.parse.view import Page

HTML = """<html><head><base href="/shop/"><title>T</title></head><body>
<h1>Chair</h1><span class="price">$12.50</span><a href="item/2">next</a></body></html>"""
LIMITS = Limits(domains=frozenset({"s.test"}), max_depth=3, max_pages=0, store="x")


def page(url: str = "http://s.test/shop/item/1", html: str = HTML) -> tuple[Page, CrawlRequest]:
    req = CrawlRequest(url=url, crawl_id="c", depth=1, meta={"k": "v"})
    record = PageRecord(url=url, fingerprint="f", crawl_id="c", depth=1, fetched_at="x", status=200)
    return Page(req, record, html), req


def run(func: Any, *, follow: bool = True, max_items: int = 10, url: str = "http://s.test/shop/item/1"):
    p, req = page(url)
    rule = Rule(re.compile("."), None, follow, 0, func, "t.rule")
    return run_rule(rule, p, LIMITS, Caps(0, max_links=5, max_url_length=100, max_items=max_items))


def test_a_page_offers_its_tree_xpath_and_urljoin_against_its_base():
    p, _ = page()
    assert p.xpath("normalize-space(//h1)").get() == "Chair"
    assert p.urljoin("item/2") == "http://s.test/shop/item/2"  # <base href="/shop/">
    assert (p.meta, p.crawl_id, p.depth, p.status) == ({"k": "v"}, "c", 1, 200)
    empty, _ = page(html="")
    assert empty.xpath("//a").getall() == [] and empty.urljoin("x") == "http://s.test/shop/item/x"


def test_a_rule_yields_items_and_requests_made_children_of_the_page():
    def rule(p: Page) -> Any:
        yield {"name": p.css("h1::text").get()}
        yield Request("item/2", priority=7, meta={"m": 1}, headers={"X-A": "b"})
        yield Request("http://elsewhere.test/", priority=9)  # out of the crawl's scope
        yield Request("item/3", dont_filter=True, method="HEAD")

    out = run(rule, follow=False)
    assert out.error is None and out.follow is False
    assert out.items == [{"name": "Chair"}]
    assert [(r.url, r.priority, r.depth, r.crawl_id, r.meta, r.headers, r.dont_filter, r.method)
            for r in out.requests] == [
        ("http://s.test/shop/item/2", 7, 2, "c", {"m": 1}, {"X-A": "b"}, False, "GET"),
        ("http://s.test/shop/item/3", 0, 2, "c", {}, {}, True, "HEAD")]


def test_a_rule_returning_one_item_or_nothing_is_fine():
    assert run(lambda p: {"a": 1}).items == [{"a": 1}]
    assert run(lambda p: None).items == []


def test_items_past_the_cap_are_counted_not_kept():
    out = run(lambda p: ({"n": i} for i in range(5)), max_items=3)
    assert len(out.items) == 3 and out.counts == {"items/over_cap": 2}


def test_a_rule_that_fails_keeps_what_it_yielded_and_never_widens_the_crawl():
    def broken(p: Page) -> Any:
        yield {"partial": True}
        yield Request("item/2")
        raise KeyError("price")

    out = run(broken, follow=False)
    assert out.items == [{"partial": True}] and [r.url for r in out.requests] == ["http://s.test/shop/item/2"]
    assert out.follow is False  # its page's links are followed as the rule says, not all of them
    assert out.error == "rule t.rule failed: KeyError: 'price'" and out.reason == "KeyError"
    assert out.counts == {"plugin/failed/rule": 1}

    class Book:  # neither a dict nor an item class itemadapter knows
        title = "x"

    wrong = run(lambda p: [{"first": 1}, Book()], follow=False)
    assert "yielded a Book, not an item" in wrong.error and wrong.items == [{"first": 1}]
    assert wrong.follow is False
    assert "yielded a int" in run(lambda p: [1]).error


def test_a_callback_fails_as_a_callback_and_gets_its_keyword_arguments():
    p, _ = page()
    p.cb_kwargs = {"shelf": "a"}

    def cb(page: Page, shelf: str) -> Any:
        yield {"shelf": shelf}
        raise ValueError("no")

    out = run_rule(Parser("t.cb", cb, follow=False, kind="callback"), p, LIMITS, Caps(0, max_items=5))
    assert out.items == [{"shelf": "a"}] and out.follow is False
    assert out.error == "callback t.cb failed: ValueError: no" and out.counts == {"plugin/failed/callback": 1}


def test_an_item_json_cannot_carry_is_left_out_alone_and_said():
    p, _ = page()
    piped = run_pipelines([{"when": object()}, {"ok": 1}], (), p, "rule t.rule")
    assert piped.items == [{"ok": 1}] and piped.failed is None
    assert piped.counts == {"items/dropped/not_json": 1, "items/kept": 1}
    assert piped.note.startswith("rule t.rule: an item was left out, JSON cannot carry it: ")


def test_items_of_any_kind_are_stored_as_dicts():
    import attrs
    import pydantic

    @dataclasses.dataclass
    class Book:
        title: str
        price: float

    @attrs.define
    class Author:
        name: str

    class Quote(pydantic.BaseModel):
        text: str
        tags: list[str]

    out = run(lambda p: [Book("Dune", 9.5), Author("Herbert"), Quote(text="q", tags=["a"]), {"plain": 1}])
    assert out.error is None and len(out.items) == 4
    p, _ = page()
    piped = run_pipelines(out.items, (), p)
    assert piped.items == [{"title": "Dune", "price": 9.5}, {"name": "Herbert"}, {"text": "q", "tags": ["a"]},
                           {"plain": 1}]
    assert piped.types == ["Book", "Author", "Quote", "item"] and piped.counts == {"items/kept": 4}


def test_a_pipeline_gets_the_item_as_yielded_and_may_return_another_kind():
    @dataclasses.dataclass
    class Book:
        title: str
        price: str

    seen: list[type] = []

    def clean(item: Any, p: Page) -> Any:
        seen.append(type(item))
        item.price = float(item.price.lstrip("£").replace(",", ""))
        return item

    p, _ = page()
    piped = run_pipelines([Book("A", "£1,021.03")], (Pipeline("a.clean", 0, clean),), p)
    assert seen == [Book] and piped.items == [{"title": "A", "price": 1021.03}] and piped.types == ["Book"]


def test_requests_out_of_scope_or_depth_are_counted():
    out = run(lambda p: [Request("http://elsewhere.test/a"), Request("item/3")])
    assert out.counts == {"requests/offsite": 1} and len(out.requests) == 1
    p, _ = page()
    deep = Limits(domains=frozenset({"s.test"}), max_depth=1, max_pages=0, store="x")
    rule = Rule(re.compile("."), None, True, 0, lambda pg: [Request("item/3")], "t.rule")
    assert run_rule(rule, p, deep, Caps(0, max_items=5)).counts == {"requests/too_deep": 1}


def test_pipelines_run_in_order_and_count_drops_per_reason():
    seen: list[str] = []

    def first(item: dict, p: Page) -> dict:
        seen.append("first")
        if item["price"] is None:
            raise DropItem("No price!")
        return {**item, "price": float(item["price"])}

    def second(item: dict, p: Page) -> dict:
        seen.append("second")
        return {**item, "checked": True}

    p, _ = page()
    piped = run_pipelines(
        [{"price": "1.5"}, {"price": None}, {"price": "2"}],
        (Pipeline("a.first", 100, first), Pipeline("a.second", 200, second)), p)
    assert piped.items == [{"price": 1.5, "checked": True}, {"price": 2.0, "checked": True}]
    assert piped.counts == {"items/dropped/no_price": 1, "items/kept": 2}
    assert piped.failed is None and piped.types == ["item", "item"]
    assert seen == ["first", "second", "first", "first", "second"]


def test_a_pipeline_that_raises_drops_the_item_and_says_why():
    def bug(item: dict, p: Page) -> dict:
        if item.get("bad"):
            raise RuntimeError("boom")
        return item

    p, _ = page()
    piped = run_pipelines([{"bad": 1}, {"ok": 1}], (Pipeline("a.bug", 0, bug),), p)
    assert piped.items == [{"ok": 1}]
    assert piped.counts == {"plugin/failed/pipeline": 1, "items/dropped/pipeline_failed": 1, "items/kept": 1}
    assert piped.failed == ("RuntimeError", "item pipeline a.bug failed: RuntimeError: boom")


def test_drop_reasons_become_counter_parts():
    assert reason_name("No price!") == "no_price"
    assert reason_name("  ") == "unspecified"
    assert reason_name("x" * 100) == "x" * 60
