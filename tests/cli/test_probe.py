"""``crawler-tasks parse`` and ``crawler-tasks shell`` on the bookshop example: one URL through
the program, nothing stored (no Redis is needed: the broker URL points nowhere)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error, cli

BOOKSHOP = Path(__file__).resolve().parents[2] / "examples" / "bookshop"
sys.path.insert(0, str(BOOKSHOP))
import bookshop_site  # noqa: E402

#: The bookshop's plugin, its pipeline and its middleware, and a broker nobody runs.
ENV = {"PYTHONPATH": str(BOOKSHOP), "CRAWLER_PLUGINS": "bookshop_plugin",
       "CRAWLER_ITEM_PIPELINES": "bookshop_plugin.StockAndPrice:100",
       "CRAWLER_MIDDLEWARES": "bookshop_plugin.ShopClient:100",
       "CRAWLER_BROKER_URL": "redis://127.0.0.1:1/0", "CRAWLER_REDIS_URL": "redis://127.0.0.1:1/0"}


@pytest.fixture(scope="module")
def shop() -> Iterator[str]:
    server = bookshop_site.serve()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_parse_prints_what_a_callback_yields(shop: str):
    done = cli("parse", f"{shop}/catalogue/page-6.html", "--callback", "bookshop_plugin.catalogue", env=ENV)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"GET {shop}/catalogue/page-6.html",
        "outcome   page 200 text/html",
        "parser    bookshop_plugin.catalogue",
        "# items (0)",
        "# requests (1)",
        f"GET {shop}/catalogue/book-51.html callback=bookshop_plugin.book errback=bookshop_plugin.lost"]


def test_parse_runs_the_rule_the_url_matches_and_the_pipelines(shop: str):
    home = json.loads(cli("parse", f"{shop}/", "--json", env=ENV).stdout)
    assert home["parser"] == "bookshop_plugin.home" and home["status"] == 200
    assert [r["url"] for r in home["requests"]][:2] == [f"{shop}/catalogue/page-1.html",
                                                        f"{shop}/catalogue/withdrawn.html"]
    book = json.loads(cli("parse", f"{shop}/catalogue/book-1.html", "-c", "bookshop_plugin.book", "--json",
                          "--cb-kwargs", '{"listed_on": "x"}', env=ENV).stdout)
    assert book["items"] == [{"title": bookshop_site.title(1), "price": 2021.01, "upc": "a00001ff",
                              "in_stock": True, "url": f"{shop}/catalogue/book-1.html"}]
    out_of_stock = json.loads(cli("parse", f"{shop}/catalogue/book-3.html", "-c", "bookshop_plugin.book",
                                  "--json", env=ENV).stdout)
    assert out_of_stock["items"] == [] and out_of_stock["counts"] == {"items/dropped/out_of_stock": 1}
    missing = json.loads(cli("parse", f"{shop}/catalogue/missing.html", "-c", "bookshop_plugin.book", "--json",
                             env=ENV).stdout)
    assert (missing["status"], missing["parser"], missing["items"]) == (404, None, [])
    assert missing["note"] == "http_404: told to the errback and the error handler"


def test_the_middleware_runs_as_in_a_crawl(shop: str):
    bare = {**ENV, "CRAWLER_MIDDLEWARES": ""}
    forbidden = json.loads(cli("parse", f"{shop}/", "--json", env=bare).stdout)
    assert forbidden["status"] == 403  # the shop wants the header ShopClient adds


def test_shell_opens_a_prompt_holding_the_page(shop: str):
    done = cli("shell", f"{shop}/catalogue/book-2.html", "-c", "bookshop_plugin.book", env=ENV,
               stdin='print(page.css("p.price_color::text").get())\nprint(len(items), items[0]["price"])\n')
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(">>> ")[1:3] == [f"{bookshop_site.price(2)}\n", "1 518.02\n"]
    assert "parser    callback bookshop_plugin.book" in done.stderr


def test_bad_input_is_one_line(shop: str):
    assert_one_line_error(cli("parse", f"{shop}/", "--cb-kwargs", "[1]", env=ENV), 2)
    assert_one_line_error(cli("parse", "ftp://x/", env=ENV), 2)
    assert_one_line_error(cli("parse", f"{shop}/", "--plugins", "no_such_plugin", env=ENV), 2)
    unknown = cli("parse", f"{shop}/", "-c", "elsewhere.fn", env=ENV)
    assert unknown.returncode == 0 and "plugin/failed/callback_missing=1" in unknown.stdout
    assert "callback elsewhere.fn is not a function of a plugin loaded" in unknown.stdout
