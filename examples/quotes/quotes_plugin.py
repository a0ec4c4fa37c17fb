"""The Scrapy tutorial's spiders (``quotes_scrapy.py``) written for crawler_tasks: the same
selectors and the same items; the two seeds' URL rules stand for ``start_requests``.

    crawler-tasks crawl --plugins quotes_plugin --delay 0.05 --store quotes.db \\
        http://127.0.0.1:8767/ "http://127.0.0.1:8767/api/quotes?page=1"
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from crawler_tasks import Page, Request, rule


@rule(r"/(page/\d+/)?$", follow=False)
def parse(page: Page) -> Iterator[Any]:
    for quote in page.css("div.quote"):
        yield {"kind": "quote", "text": quote.css("span.text::text").get(),
               "author": quote.css("small.author::text").get(),
               "tags": quote.css("div.tags a.tag::text").getall()}
    yield from page.follow_all(css=".author + a", callback=parse_author)
    yield from page.follow_all(css="li.next a", callback=parse)


def parse_author(page: Page) -> Iterator[dict[str, Any]]:
    def extract(query: str) -> str:
        return page.css(query).get(default="").strip()

    yield {"kind": "author", "name": extract("h3.author-title::text"),
           "birthdate": extract(".author-born-date::text"), "bio": extract(".author-description::text")}


@rule(r"/api/quotes\?page=\d+$", follow=False)
def parse_api(page: Page) -> Iterator[Any]:
    data = page.json()
    for quote in data["quotes"]:
        yield {"kind": "api_quote", "author": quote["author"]["name"], "text": quote["text"],
               "tags": quote["tags"]}
    if data["has_next"]:
        yield Request(page.urljoin(f"/api/quotes?page={data['page'] + 1}"), callback=parse_api)
