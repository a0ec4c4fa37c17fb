"""The Scrapy tutorial's spiders in one, for the quotes site: quotes and their pagination,
the authors' pages, and the JSON API. ``quotes_plugin.py`` is the same spider for
crawler_tasks; both yield the same items.

    scrapy runspider quotes_scrapy.py -a base=http://127.0.0.1:8767 -O items.jsonl
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy


class QuotesSpider(scrapy.Spider):
    name = "quotes"
    custom_settings = {"ROBOTSTXT_OBEY": True, "DOWNLOAD_DELAY": 0.05}

    async def start(self) -> AsyncIterator[scrapy.Request]:  # Scrapy 2.13 and later
        for request in self.start_requests():
            yield request

    def start_requests(self) -> Iterator[scrapy.Request]:
        yield scrapy.Request(f"{self.base}/", callback=self.parse)
        yield scrapy.Request(f"{self.base}/api/quotes?page=1", callback=self.parse_api)

    def parse(self, response: Any) -> Iterator[Any]:
        for quote in response.css("div.quote"):
            yield {"kind": "quote", "text": quote.css("span.text::text").get(),
                   "author": quote.css("small.author::text").get(),
                   "tags": quote.css("div.tags a.tag::text").getall()}
        yield from response.follow_all(css=".author + a", callback=self.parse_author)
        yield from response.follow_all(css="li.next a", callback=self.parse)

    def parse_author(self, response: Any) -> Iterator[dict[str, Any]]:
        def extract(query: str) -> str:
            return response.css(query).get(default="").strip()

        yield {"kind": "author", "name": extract("h3.author-title::text"),
               "birthdate": extract(".author-born-date::text"), "bio": extract(".author-description::text")}

    def parse_api(self, response: Any) -> Iterator[Any]:
        data = response.json()
        for quote in data["quotes"]:
            yield {"kind": "api_quote", "author": quote["author"]["name"], "text": quote["text"],
                   "tags": quote["tags"]}
        if data["has_next"]:
            yield scrapy.Request(response.urljoin(f"/api/quotes?page={data['page'] + 1}"), callback=self.parse_api)
