"""The bookshop example crawled as a Scrapy user writes it (callbacks, selectors, an item class,
an errback), with the defaults on: robots.txt obeyed, two requests in flight per host, the
private-network guard (``crawler-tasks crawl`` lets the seed's host through); only the delay
is shortened.

The shop serves what real shops serve: a disallowed /cart, pages to ignore, a 404, a
link that always answers 500, a 410 the crawl asks to see, and a 403 to any request
without the header it requires.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.system.test_programs import ROOT, crawl_id_of, example_copy, example_site, records, run

BOOKSHOP = ROOT / "examples" / "bookshop"
sys.path.insert(0, str(BOOKSHOP))
import bookshop_site as shop  # noqa: E402


@pytest.fixture(scope="module")
def shop_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return example_copy(tmp_path_factory, BOOKSHOP)


@pytest.fixture(scope="module")
def site(shop_dir: Path) -> Iterator[str]:
    with example_site(shop_dir, "bookshop_site.py", "bookshop at ") as base:
        yield base


def expected_books(base: str) -> list[dict]:
    return [{"title": shop.title(n), "price": float(shop.price(n).lstrip("£").replace(",", "")),
             "upc": shop.upc(n), "in_stock": True, "url": f"{base}/catalogue/book-{n}.html"}
            for n in range(1, shop.BOOKS + 1) if n not in shop.OUT_OF_STOCK]


@pytest.mark.parametrize("pipeline", ["local", "split"])
def test_the_bookshop_spider_yields_exactly_its_books_and_its_errback_hears_the_failures(
        site: str, shop_dir: Path, pipeline: str):
    (shop_dir / "lost.jsonl").unlink(missing_ok=True)
    store = f"books-{pipeline}.db"
    done = run("crawl", "--plugins", "bookshop_plugin", "--delay", "0.05", "--quiet", "--store", store,
               f"{site}/", cwd=shop_dir, CRAWLER_PIPELINE=pipeline,
               CRAWLER_ITEM_PIPELINES="bookshop_plugin.StockAndPrice:100",
               CRAWLER_MIDDLEWARES="bookshop_plugin.ShopClient:100")
    assert done.returncode == 0, done.stdout + done.stderr
    got = records(store, cwd=shop_dir)

    books = [item for r in got.values() if r["rule"] == "bookshop_plugin.book" for item in r["items"]]
    assert sorted(books, key=lambda b: b["upc"]) == expected_books(site)  # 43: 8 out of stock dropped
    assert got[f"{site}/catalogue/withdrawn.html"]["items"] == [
        {"title": "Book 99: withdrawn from sale", "url": f"{site}/catalogue/withdrawn.html"}]  # its 410 reached it
    assert got[f"{site}/catalogue/withdrawn.html"]["status"] == 410
    pages = {f"{site}/", f"{site}/cart", f"{site}/broken", f"{site}/catalogue/missing.html",
             f"{site}/catalogue/withdrawn.html"} | {f"{site}/catalogue/page-{n}.html" for n in range(1, 7)} | {
        f"{site}/catalogue/book-{n}.html" for n in range(1, 52)}
    assert set(got) == pages  # /about and /terms were never asked for
    assert got[f"{site}/cart"]["status"] is None and "robots.txt" in got[f"{site}/cart"]["description"]
    assert all(r["status"] != 403 for r in got.values())  # the middleware's header went with every request
    assert got[f"{site}/catalogue/missing.html"]["rule"] is None  # a 404 never reaches its callback

    lost = [json.loads(line) for line in (shop_dir / "lost.jsonl").read_text().splitlines()]
    assert sorted(lost, key=lambda f: f["url"]) == [
        {"url": f"{site}/broken", "kind": "download", "reason": "http_500", "status": 500},
        {"url": f"{site}/catalogue/missing.html", "kind": "http", "reason": "http_404", "status": 404}]

    crawl_id = crawl_id_of(done)
    stats = json.loads(run("stats", "--crawl-id", crawl_id, "--json", cwd=shop_dir).stdout)["crawls"][crawl_id]
    assert stats["items/kept"] == 44 and stats["items/dropped/out_of_stock"] == 8
    assert not any(name.startswith("plugin/failed") for name in stats)

    # The items feed: a row per item, typed by its class.
    summary = json.loads(run("items", "--store", store, "--crawl-id", crawl_id, "--json", cwd=shop_dir).stdout)
    assert summary == [{"crawl_id": crawl_id, "type": "Book", "items": 43},
                       {"crawl_id": crawl_id, "type": "Withdrawn", "items": 1}]
    table = run("export", "--items", "--format", "csv", "--type", "Book", "--store", store, "--crawl-id", crawl_id,
                cwd=shop_dir)
    assert table.returncode == 0, table.stderr
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert sorted((r["upc"], float(r["price"]), r["title"]) for r in rows) == [
        (b["upc"], b["price"], b["title"]) for b in expected_books(site)]
    assert {r["type"] for r in rows} == {"Book"} and all(r["url"].endswith(".html") for r in rows)
