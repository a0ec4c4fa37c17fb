"""The Elasticsearch items feed (an index per item type) through the real elasticsearch-py
client, against :class:`ESServer`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from crawler_tasks.backends.elasticsearch import ElasticsearchStore
from crawler_tasks.backends.elasticsearch.items import ITEMS_MAPPING, items_index
from tests.backends.test_elasticsearch import make, page
from tests.fakes.es_server import ESServer


@pytest.fixture
def server() -> Iterator[ESServer]:
    with ESServer() as srv:
        yield srv


@pytest.fixture
def store(server: ESServer) -> Iterator[ElasticsearchStore]:
    s = make(server)
    yield s
    s.close()


def shop_page(i: int, items: list[dict], types: list[str], crawl_id: str = "c1", at: int = 0):
    return page(i, crawl_id=crawl_id, items=items, item_types=types,
                fetched_at=f"2026-01-01T00:00:{at:02d}+00:00")


def feed(store: ElasticsearchStore, crawl_id: str | None = None, kind: str | None = None) -> list[tuple]:
    return [(r.crawl_id, r.fingerprint, r.position, r.type, r.item) for r in store.item_rows(crawl_id, kind)]


def test_each_item_is_a_document_in_the_index_of_its_type(server: ESServer, store: ElasticsearchStore) -> None:
    book, other = {"title": "Dune", "price": 9.5}, {"note": "a dict"}
    assert store.upsert([shop_page(1, [book, other], ["Book", "item"]), page(2)]) == []
    assert sorted(server.index_names()) == ["pages", "pages-items-book", "pages-items-item"]
    assert server.mapping("pages-items-book") == ITEMS_MAPPING
    assert feed(store) == [("c1", "fp0001", 0, "Book", book), ("c1", "fp0001", 1, "item", other)]
    assert feed(store, kind="Book") == [("c1", "fp0001", 0, "Book", book)]
    [row] = store.item_rows(kind="Book")
    assert (row.url, row.fetched_at) == ("http://site.test/p/1", "2026-01-01T00:00:00+00:00")
    assert store.item_counts() == {("c1", "Book"): 1, ("c1", "item"): 1}
    assert items_index("pages", "Weird Type/ÿ") == "pages-items-weird_type__"


def test_a_page_stored_again_replaces_its_items_and_a_batch_sent_twice_writes_each_once(
        store: ElasticsearchStore) -> None:
    first = [shop_page(1, [{"n": 1}, {"n": 2}, {"n": 3}], ["Book", "Book", "item"]),
             shop_page(2, [{"n": 4}], ["Book"], crawl_id="c2")]
    assert store.upsert(first) == [] and store.upsert(first) == []
    assert store.item_counts() == {("c1", "Book"): 2, ("c1", "item"): 1, ("c2", "Book"): 1}
    # Fetched again: one item now, of another type at position 0; the other crawl's page stays.
    assert store.upsert([shop_page(1, [{"n": 9}], ["Review"], at=5)]) == []
    assert feed(store, "c1") == [("c1", "fp0001", 0, "Review", {"n": 9})]
    assert store.item_counts() == {("c1", "Review"): 1, ("c2", "Book"): 1}
    assert store.upsert([shop_page(1, [], [], at=9)]) == []  # no items at all now
    assert store.item_counts() == {("c2", "Book"): 1}


def test_a_store_without_items_looks_for_the_feed_once_a_minute_not_each_batch(
        server: ESServer, store: ElasticsearchStore) -> None:
    assert store.upsert([page(1)]) == []
    server.clear_requests()
    assert store.upsert([page(2)]) == [] and store.upsert([page(3)]) == []
    assert server.requests == [("PUT", "/_bulk"), ("PUT", "/_bulk")]
    assert store.item_counts() == {} and feed(store) == []


def test_an_item_of_a_crawl_whose_items_a_worker_never_wrote_is_still_replaced(server: ESServer) -> None:
    writer, other = make(server), make(server)
    assert writer.upsert([shop_page(1, [{"n": 1}, {"n": 2}], ["item", "item"])]) == []
    assert other.upsert([shop_page(1, [], [], at=3)]) == []  # this process never wrote an item
    assert writer.item_counts() == {}
    writer.close(), other.close()
