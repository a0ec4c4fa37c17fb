"""The Elasticsearch store against a real server: the same core assertions as the test-server suite.

Skipped unless ``CRAWLER_TEST_ES_URL`` names a store URI, e.g.::

    CRAWLER_TEST_ES_URL=elasticsearch://127.0.0.1:9200/crawler-test pytest tests/backends/test_elasticsearch_contract.py
    CRAWLER_TEST_ES_URL='elasticsearchs://elastic:pw@127.0.0.1:9200/crawler-test?ca_certs=/path/ca.pem' pytest ...

(``CRAWLER_ES_API_KEY`` is used when the URI has no user.) Each run writes to
``<index>-<random>`` and ``<index>-<random>-stats`` and deletes both at the end.
The server must be Elasticsearch 9 with elasticsearch-py 9 (8 with 8).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from crawler_tasks.backends.elasticsearch import ElasticsearchStore
from crawler_tasks.core.models import PageRecord
from crawler_tasks.core.settings import Settings
from tests.backends.test_elasticsearch import page

URL = os.environ.get("CRAWLER_TEST_ES_URL", "")
pytestmark = pytest.mark.skipif(
    not URL, reason="set CRAWLER_TEST_ES_URL=elasticsearch://127.0.0.1:9200/crawler-test to run against a real server")


def unique(uri: str) -> str:
    """``uri`` with a random suffix on its index name (its query, if any, kept)."""
    base, sep, query = uri.partition("?")
    return f"{base.rstrip('/')}-{uuid.uuid4().hex[:8]}{sep}{query}"


@pytest.fixture(scope="module")
def store() -> Iterator[ElasticsearchStore]:
    s = ElasticsearchStore.from_uri(unique(URL), Settings.from_env())
    yield s
    s.client.indices.delete(index=[s.index, s.stats_index, s.feed.pattern], ignore_unavailable=True)
    s.close()


def hostile(i: int) -> PageRecord:
    """A record with values a careless mapping fails on: a 2 MB body, 40 KB keyword values, 1,000 links."""
    huge = "http://site.test/" + "a" * 40_000
    return page(i, body="<p>" + "é ✓ texte " * 200_000 + "</p>", redirect_to=huge, content_type="text/" + "x" * 40_000,
                headers={"Location": huge, "Content-Type": "text/html"},
                links=[f"http://site.test/l/{n}" for n in range(1000)] + [huge])


def test_mapping_round_trip_and_redelivery(store: ElasticsearchStore) -> None:
    records = [page(i) for i in range(30)] + [page(100 + i, crawl_id="c2") for i in range(5)] + [hostile(500)]
    assert store.upsert(records[::-1]) == []
    mapping = store.client.indices.get_mapping(index=store.index)[store.index]["mappings"]
    props = mapping["properties"]
    assert str(mapping["dynamic"]).lower() == "false"
    assert {name: props[name]["type"] for name in ("url", "fingerprint", "crawl_id", "links", "status", "size",
                                                   "fetched_at", "body", "headers", "meta")} == {
        "url": "keyword", "fingerprint": "keyword", "crawl_id": "keyword", "links": "keyword",
        "status": "integer", "size": "long", "fetched_at": "date", "body": "text",
        "headers": "flattened", "meta": "flattened"}
    assert props["body"]["index"] is False

    assert store.count() == 36 and store.count("c2") == 5
    c1 = sorted((r for r in records if r.crawl_id == "c1"), key=lambda r: (r.fetched_at, r.fingerprint))
    assert list(store.records("c1")) == c1
    assert store.get("fp0500") == records[-1] and store.get("missing") is None

    assert store.upsert(records[:10]) == []  # a redelivered batch
    assert store.upsert([page(3, title="second delivery")]) == []
    assert store.count() == 36 and store.get("fp0003").title == "second delivery"


def test_a_record_breaking_the_mapping_fails_alone(store: ElasticsearchStore) -> None:
    before = store.count()
    failures = store.upsert([page(900), page(901, status="abc"), page(902, fetched_at="yesterday")])
    assert [f.fingerprint for f in failures] == ["fp0901", "fp0902"]
    assert all(f.reason.startswith(("document_parsing_exception: ", "mapper_parsing_exception: "))
               for f in failures)
    assert store.count() == before + 1 and store.get("fp0901") is None


def test_stats_are_updated_in_place(store: ElasticsearchStore) -> None:
    store.write_stats("c1", {"total_num": 3, "total_request_size": 300, "total_response_size": 9000,
                             "status/200": 2, "status/404": 1, "gate/admitted": 5})
    store.write_stats("c1", {"total_num": 4, "total_request_size": 400, "total_response_size": 9500,
                             "status/200": 3, "status/404": 1, "retry/reason_count/timeout": 1})
    doc = store.read_stats("c1")
    assert doc is not None and doc.pop("updated_at")
    assert doc == {"crawl_id": "c1", "total_num": 4, "total_request_size": 400, "total_response_size": 9500,
                   "status": {"200": 3, "404": 1}, "counters": {"retry/reason_count/timeout": 1}}
    store.client.indices.refresh(index=store.stats_index)
    assert store.client.count(index=store.stats_index)["count"] == 1
    assert store.client.count(index=store.stats_index, query={"range": {"status.200": {"gte": 3}}})["count"] == 1
    mapping = store.client.indices.get_mapping(index=store.stats_index)[store.stats_index]["mappings"]
    assert mapping["properties"]["status"]["properties"]["200"]["type"] == "long"


def test_the_items_feed_replaces_a_pages_items_when_it_is_stored_again(store: ElasticsearchStore) -> None:
    first = page(900, crawl_id="feed", items=[{"n": 1}, {"n": 2, "deep": {"k": "v"}}], item_types=["Book", "item"])
    assert store.upsert([first]) == [] and store.upsert([first]) == []
    assert store.item_counts("feed") == {("feed", "Book"): 1, ("feed", "item"): 1}
    again = page(900, crawl_id="feed", items=[{"n": 3}], item_types=["Review"])
    assert store.upsert([again]) == []
    assert [(r.type, r.item) for r in store.item_rows("feed")] == [("Review", {"n": 3})]
