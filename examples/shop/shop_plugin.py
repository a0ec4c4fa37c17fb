"""The shop's plugin: list pages yield the product and next-page requests, product pages
yield one item each; an item pipeline turns prices into numbers and drops the items
that have none; a middleware says who is asking on every request.

Run with ``CRAWLER_PLUGINS=shop_plugin`` (or ``crawler-tasks crawl --plugins shop_plugin``),
``CRAWLER_ITEM_PIPELINES=shop_plugin.normalise_price:100`` and
``CRAWLER_MIDDLEWARES=shop_plugin.Identify:100``.
"""

from __future__ import annotations

from typing import Any

from crawler_tasks import DropItem, Page, rule


@rule(r"/(list/\d+)?$", follow=False)
def listing(page: Page) -> Any:
    """A catalogue page: its products first (sooner), then the next page."""
    for link in page.css("a.product"):
        yield page.follow(link, priority=5)
    for link in page.css("a[rel=next]"):
        yield page.follow(link)


@rule(r"/product/\d+$", follow=False)
def product(page: Page) -> dict[str, Any]:
    """A product page: one item."""
    return {
        "name": page.css("h1.name::text").get(default="").strip(),
        "price": page.css("span.price::text").get(default="").strip() or None,
        "sku": page.css("span.sku::text").get(default="").strip(),
    }


def normalise_price(item: dict[str, Any], page: Page) -> dict[str, Any]:
    """``"$1,037.01"`` becomes ``1037.01``; an item without a price is dropped."""
    if not item.get("price"):
        raise DropItem("no price")
    item["price"] = float(str(item["price"]).lstrip("$").replace(",", ""))
    return item


class Identify:
    """A request middleware: every request of the crawl carries a contact header."""

    def process_request(self, request: Any) -> None:
        request.headers["From"] = "crawler@shop.example"
