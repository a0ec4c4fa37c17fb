"""The bookshop crawled as a Scrapy spider would crawl it: callbacks per kind of page,
selectors, an item class, a pipeline that cleans prices and drops books out of stock,
a middleware that adds the header the shop requires, and an errback for the pages that
fail.

    export CRAWLER_ITEM_PIPELINES=bookshop_plugin.StockAndPrice:100
    export CRAWLER_MIDDLEWARES=bookshop_plugin.ShopClient:100
    crawler-tasks crawl --plugins bookshop_plugin --delay 0.05 --store books.db http://127.0.0.1:8766/
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawler_tasks import DropItem, Failure, Page, Request, rule

#: Where the errback notes each page that failed (one JSON line each).
LOST = Path("lost.jsonl")


@dataclass
class Book:
    title: str
    price: str | float
    upc: str
    in_stock: bool
    url: str


@dataclass
class Withdrawn:
    title: str
    url: str


@rule(r"/$", follow=False)
def home(page: Page) -> Iterator[Request]:
    """The home page (a crawl's seed): the catalogue, and the pages that went wrong."""
    yield page.follow(page.css("a.catalogue")[0], callback=catalogue)
    yield page.follow("/catalogue/withdrawn.html", callback=withdrawn, errback=lost, handle_status=[410])
    yield page.follow("/catalogue/missing.html", callback=book, errback=lost)
    yield page.follow("/broken", callback=book, errback=lost)
    yield page.follow("/cart")  # robots.txt disallows it: never fetched


def catalogue(page: Page) -> Iterator[Request]:
    """A catalogue page: its books, then the next page."""
    for link in page.css("article.product_pod h3 a"):
        yield page.follow(link, callback=book, errback=lost, cb_kwargs={"listed_on": page.url})
    next_page = page.css("li.next a")
    if next_page:
        yield page.follow(next_page[0], callback=catalogue)


def book(page: Page, listed_on: str = "") -> Book:
    """A book page: one Book."""
    return Book(title=page.css("article.product_page h1::text").get(),
                price=page.css("article.product_page p.price_color::text").get(),
                upc=page.xpath("//th[text()='UPC']/following-sibling::td/text()").get(),
                in_stock="In stock" in page.css("p.availability::text").get(default=""),
                url=page.url)


def withdrawn(page: Page) -> Withdrawn:
    """A withdrawn book's page (410): it reaches its callback, asked for by handle_status."""
    return Withdrawn(title=page.css("h1.withdrawn::text").get(), url=page.url)


def lost(failure: Failure) -> None:
    """A page that failed for good (a 404, retries used up on a 500...): noted."""
    with LOST.open("a") as out:
        out.write(json.dumps({"url": failure.url, "kind": failure.kind, "reason": failure.reason,
                              "status": failure.status}) + "\n")


class StockAndPrice:
    """``£1,021.03`` becomes 1021.03; a book out of stock is dropped."""

    def process_item(self, item: Any, page: Page) -> Any:
        if isinstance(item, Book):
            if not item.in_stock:
                raise DropItem("out of stock")
            item.price = float(str(item.price).lstrip("£").replace(",", ""))
        return item


class ShopClient:
    """Every request carries the header the shop requires."""

    def process_request(self, request: Any) -> None:
        request.headers["X-Shop-Client"] = "crawler_tasks-example"
