"""The Elasticsearch test server against the real client: elasticsearch-py and its helpers.

No Redis or RabbitMQ: every test starts its own :class:`ESServer` on 127.0.0.1.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import elasticsearch
import pytest
from elasticsearch import Elasticsearch, helpers

from tests.fakes.es_server import DEFAULT_VERSION, ESServer
from tests.fakes.tls import Pki

#: The store backend's mapping as issue 8 describes it.
PAGES_MAPPING = {
    "properties": {
        "url": {"type": "keyword"},
        "fingerprint": {"type": "keyword"},
        "crawl_id": {"type": "keyword"},
        "content_type": {"type": "keyword"},
        "status": {"type": "integer"},
        "fetched_at": {"type": "date"},
        "title": {"type": "text"},
        "text": {"type": "text"},
        "body": {"type": "binary", "index": False},
        "headers": {"type": "flattened"},
        "truncated": {"type": "boolean"},
        "links": {"type": "object", "properties": {"count": {"type": "long"}}},
    }
}
#: A server of this version reports document parse failures the pre-8.8 way.
LEGACY_VERSION = "8.7.1"


@pytest.fixture
def server() -> Iterator[ESServer]:
    with ESServer() as srv:
        yield srv


@pytest.fixture
def es(server: ESServer) -> Iterator[Elasticsearch]:
    client = Elasticsearch(server.url, request_timeout=5)
    yield client
    client.close()


def page(i: int, **fields: Any) -> dict:
    """A record shaped like the crawler's, as a bulk action (id = fingerprint)."""
    doc = {
        "_index": "pages", "_id": f"fp{i:04d}", "url": f"http://site.test/p/{i}", "fingerprint": f"fp{i:04d}",
        "crawl_id": f"crawl-{i % 2}", "content_type": "text/html", "status": 200 if i % 10 else 404,
        "fetched_at": f"2024-05-01T12:{i // 60 % 60:02d}:{i % 60:02d}Z", "title": f"Page number {i}",
        "text": "hello crawler world" if i % 3 == 0 else "other words", "truncated": False,
        "body": base64.b64encode(f"<html>{i}</html>".encode()).decode(),
        "headers": {"Content-Type": "text/html", "X-Seq": str(i)}, "links": {"count": i % 7},
    }
    doc.update(fields)
    return doc


def make_pages(es: Elasticsearch, n: int = 0) -> None:
    es.indices.create(index="pages", mappings=PAGES_MAPPING)
    if n:
        helpers.bulk(es, (page(i) for i in range(n)))


def item_of(result: dict) -> dict:
    """The single ``{action: item}`` entry of a bulk item."""
    return next(iter(result.values()))


# --------------------------------------------------------------------------- protocol

def test_info_headers_and_request_log(server: ESServer, es: Elasticsearch) -> None:
    info = es.info()
    assert info["version"]["number"] == DEFAULT_VERSION
    assert info["tagline"] == "You Know, for Search"
    assert info.meta.headers["x-elastic-product"] == "Elasticsearch"
    major = elasticsearch.__versionstr__.split(".")[0]
    assert info.meta.headers["content-type"] == f"application/vnd.elasticsearch+json;compatible-with={major}"
    assert es.ping()
    assert server.requests == [("GET", "/"), ("HEAD", "/")]
    assert server.received[0].headers["accept"] == f"application/vnd.elasticsearch+json; compatible-with={major}"


def test_client_of_a_newer_major_is_refused_like_a_real_older_server() -> None:
    """A 9.x client sends compatible-with=9; an 8.x cluster answers 400, and so does the server."""
    with ESServer(version="8.15.0") as srv:
        client = Elasticsearch(srv.url, max_retries=0)
        if elasticsearch.__versionstr__.startswith("8."):
            assert client.info()["version"]["number"] == "8.15.0"
            return
        with pytest.raises(elasticsearch.BadRequestError) as err:
            client.info()
        assert err.value.body["error"]["type"] == "media_type_header_exception"
        assert "Accept version must be either version 8 or 7, but found 9" in str(err.value.body)


def raw_request(url: str, method: str, path: str, body: bytes | None = None,
                content_type: str = "application/json") -> tuple[int, dict, dict]:
    """A plain HTTP request (no compatibility headers): status, headers, JSON body."""
    request = urllib.request.Request(url + path, data=body, method=method,
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read() or b"null")


def test_plain_json_requests_and_legacy_mapper_parsing_exception() -> None:
    """Without compatibility headers the answer is application/json; servers before 8.8 say mapper_parsing."""
    with ESServer(version=LEGACY_VERSION) as srv:
        status, headers, _ = raw_request(srv.url, "PUT", "/pages", json.dumps({"mappings": PAGES_MAPPING}).encode())
        assert (status, headers["content-type"]) == (200, "application/json")
        bulk = (b'{"index":{"_index":"pages","_id":"1"}}\n{"status":"abc"}\n'
                b'{"index":{"_index":"pages","_id":"2"}}\n{"status":7}\n')
        status, _, body = raw_request(srv.url, "POST", "/_bulk", bulk, "application/x-ndjson")
    assert status == 200 and body["errors"] is True
    bad, good = (item_of(i) for i in body["items"])
    assert bad["status"] == 400 and bad["error"]["type"] == "mapper_parsing_exception"
    assert bad["error"]["reason"].startswith("failed to parse field [status] of type [integer] in document with id '1'")
    assert bad["error"]["caused_by"] == {"type": "number_format_exception", "reason": 'For input string: "abc"'}
    assert good["status"] == 201 and good["result"] == "created"


# --------------------------------------------------------------------------- indices

def test_create_index_with_mapping(server: ESServer, es: Elasticsearch) -> None:
    assert not es.indices.exists(index="pages")
    created = es.indices.create(index="pages", mappings=PAGES_MAPPING, settings={"number_of_shards": 1})
    assert created.body == {"acknowledged": True, "shards_acknowledged": True, "index": "pages"}
    assert es.indices.exists(index="pages")
    assert es.indices.get_mapping(index="pages").body == {"pages": {"mappings": PAGES_MAPPING}}
    assert server.received[1].json() == {"mappings": PAGES_MAPPING, "settings": {"number_of_shards": 1}}
    assert es.indices.refresh(index="pages")["_shards"]["failed"] == 0

    with pytest.raises(elasticsearch.BadRequestError) as err:
        es.indices.create(index="pages", mappings=PAGES_MAPPING)
    error = err.value.body["error"]
    assert err.value.message == "resource_already_exists_exception"
    assert error["root_cause"][0]["type"] == "resource_already_exists_exception"
    assert error["reason"].startswith("index [pages/") and error["index"] == "pages"

    with pytest.raises(elasticsearch.BadRequestError) as err:
        es.indices.create(index="bad", mappings={"properties": {"x": {"type": "strnig"}}})
    assert err.value.body["error"]["caused_by"]["reason"] == "No handler for type [strnig] declared on field [x]"
    assert err.value.message == "mapper_parsing_exception"
    with pytest.raises(elasticsearch.NotFoundError) as err:
        es.indices.get_mapping(index="missing")
    assert err.value.message == "index_not_found_exception"


# --------------------------------------------------------------------------- bulk, count, search

def test_bulk_1000_then_count_and_search(server: ESServer, es: Elasticsearch) -> None:
    make_pages(es)
    server.clear_requests()
    ok, errors = helpers.bulk(es, (page(i) for i in range(1000)), chunk_size=500)
    assert (ok, errors) == (1000, [])
    assert [p for _, p in server.requests] == ["/_bulk", "/_bulk"]
    sent = server.received[0].ndjson()
    assert sent[0] == {"index": {"_id": "fp0000", "_index": "pages"}} and sent[1]["url"] == "http://site.test/p/0"

    assert es.count(index="pages")["count"] == 1000
    assert es.count(index="pages", query={"term": {"status": 404}})["count"] == 100
    assert es.count(index="pages", query={"match_all": {}})["count"] == 1000

    found = es.search(index="pages", query={"term": {"crawl_id": "crawl-1"}}, size=5)
    assert found["hits"]["total"] == {"value": 500, "relation": "eq"}
    assert len(found["hits"]["hits"]) == 5 and found["hits"]["hits"][0]["_index"] == "pages"
    assert all(h["_source"]["crawl_id"] == "crawl-1" for h in found["hits"]["hits"])

    terms = es.search(index="pages", query={"terms": {"fingerprint": ["fp0003", "fp0007", "nope"]}})
    assert sorted(h["_id"] for h in terms["hits"]["hits"]) == ["fp0003", "fp0007"]
    assert es.count(index="pages", query={"match": {"text": "Crawler"}})["count"] == 334
    assert es.count(index="pages", query={"term": {"text": "Crawler"}})["count"] == 0  # term is not analysed
    assert es.count(index="pages", query={"term": {"headers.X-Seq": "42"}})["count"] == 1  # flattened key

    ordered = es.search(index="pages", sort=[{"status": "desc"}, {"url": {"order": "desc"}}], from_=2, size=3,
                        source=["url", "status"])
    hits = ordered["hits"]["hits"]
    assert [h["_source"] for h in hits] == [{"url": "http://site.test/p/970", "status": 404},
                                            {"url": "http://site.test/p/960", "status": 404},
                                            {"url": "http://site.test/p/950", "status": 404}]
    assert hits[0]["sort"] == [404, "http://site.test/p/970"] and hits[0]["_score"] is None

    latest = es.search(index="pages", sort="fetched_at:desc", size=1, source=False)
    assert "_source" not in latest["hits"]["hits"][0]
    assert latest["hits"]["hits"][0]["sort"][0] == 1714565799000  # 2024-05-01T12:16:39Z (i = 999), epoch ms

    assert len(list(helpers.scan(es, index="pages", query={"query": {"term": {"status": 200}}}, size=200))) == 900


def test_search_after_paging_and_result_window(es: Elasticsearch) -> None:
    make_pages(es, 50)
    seen, after = [], None
    while True:
        page_ = es.search(index="pages", size=20, sort=[{"fingerprint": "asc"}],
                          **({"search_after": after} if after else {}))["hits"]["hits"]
        if not page_:
            break
        seen += [h["_id"] for h in page_]
        after = page_[-1]["sort"]
    assert seen == [f"fp{i:04d}" for i in range(50)]
    with pytest.raises(elasticsearch.BadRequestError) as err:
        es.search(index="pages", from_=9990, size=20)
    assert "Result window is too large" in err.value.body["error"]["caused_by"]["reason"]
    with pytest.raises(elasticsearch.BadRequestError) as err:
        es.search(index="pages", sort=[{"title": "asc"}])
    assert "Fielddata is disabled on [title]" in err.value.body["error"]["root_cause"][0]["reason"]
    with pytest.raises(elasticsearch.BadRequestError) as err:
        es.search(index="pages", aggs={"by_status": {"terms": {"field": "status"}}})
    assert "does not support [aggs]" in str(err.value.body)


def test_gzip_compressed_requests(server: ESServer) -> None:
    es = Elasticsearch(server.url, http_compress=True)
    make_pages(es, 30)
    assert es.count(index="pages", query={"term": {"status": 404}})["count"] == 3
    bulk = next(r for r in server.received if r.path == "/_bulk")
    assert bulk.headers["content-encoding"] == "gzip" and len(bulk.ndjson()) == 60


def test_parallel_bulk_from_eight_threads(server: ESServer, es: Elasticsearch) -> None:
    make_pages(es)
    results = list(helpers.parallel_bulk(es, (page(i) for i in range(2000)), thread_count=8, chunk_size=100))
    assert len(results) == 2000 and all(ok for ok, _ in results)
    assert es.count(index="pages")["count"] == 2000
    seq_nos = sorted(item_of(info)["_seq_no"] for _, info in results)
    assert seq_nos == list(range(2000))


# --------------------------------------------------------------------------- mapping enforcement

def test_mapping_error_fails_its_item_and_the_rest_are_stored(server: ESServer, es: Elasticsearch) -> None:
    make_pages(es)
    actions = [page(i) for i in range(10)]
    actions[3]["status"] = "two hundred"
    actions[6]["fetched_at"] = "yesterday-ish"
    results = list(helpers.streaming_bulk(es, actions, raise_on_error=False))
    failed = {item_of(info)["_id"]: item_of(info) for ok, info in results if not ok}
    assert sorted(failed) == ["fp0003", "fp0006"]
    assert server.requests == [("PUT", "/pages"), ("PUT", "/_bulk")]  # one bulk request for the batch

    status_error = failed["fp0003"]["error"]
    assert failed["fp0003"]["status"] == 400
    assert status_error["type"] == "document_parsing_exception"  # mapper_parsing_exception before 8.8
    assert "failed to parse field [status] of type [integer] in document with id 'fp0003'" in status_error["reason"]
    assert "Preview of field's value: 'two hundred'" in status_error["reason"]
    assert status_error["caused_by"] == {"type": "number_format_exception",
                                         "reason": 'For input string: "two hundred"'}
    date_error = failed["fp0006"]["error"]
    assert "failed to parse field [fetched_at] of type [date]" in date_error["reason"]
    assert date_error["caused_by"]["reason"] == ("failed to parse date field [yesterday-ish] with format "
                                                 "[strict_date_optional_time||epoch_millis]")

    stored = server.documents("pages")
    assert len(stored) == 8 and "fp0003" not in stored and "fp0006" not in stored
    with pytest.raises(helpers.BulkIndexError) as err:
        helpers.bulk(es, [page(20, status="x"), page(21)])
    assert len(err.value.errors) == 1 and item_of(err.value.errors[0])["status"] == 400
    assert es.count(index="pages")["count"] == 9


@pytest.mark.parametrize(("field", "value", "ok"), [
    ("status", "404", True), ("status", 201.7, True), ("status", 2**31, False), ("status", True, False),
    ("status", "", False), ("fetched_at", 1714564800000, True), ("fetched_at", "2024-05-01", True),
    ("fetched_at", "2024-02-30", False), ("fetched_at", "2024-05-01T12:00:00.123+02:00", True),
    ("body", "aGVsbG8=", True), ("body", "not base64!", False), ("truncated", "true", True),
    ("truncated", "yes", False), ("headers", {"a": {"b": [1, "x"]}}, True), ("url", 42, True),
    ("url", {"nested": "object"}, False), ("links", 3, False), ("links", {"count": "7"}, True),
    ("links", {"count": "seven"}, False), ("title", ["a", "b"], True), ("status", None, True),
])
def test_field_types(es: Elasticsearch, field: str, value: Any, ok: bool) -> None:
    make_pages(es)
    results = list(helpers.streaming_bulk(es, [page(1, **{field: value})], raise_on_error=False))
    (success, info), = results
    assert success is ok, info
    if not ok:
        assert item_of(info)["error"]["type"] in ("document_parsing_exception", "mapper_parsing_exception")


def test_dynamic_and_strict_mappings(server: ESServer, es: Elasticsearch) -> None:
    es.index(index="auto", id="1", document={"n": 5, "when": "2024-01-02T03:04:05Z", "name": "Ann", "o": {"x": 1.5}})
    props = server.mapping("auto")["properties"]
    assert props["n"] == {"type": "long"} and props["when"] == {"type": "date"}
    assert props["name"]["fields"]["keyword"]["type"] == "keyword" and props["o"]["properties"]["x"]["type"] == "float"
    with pytest.raises(elasticsearch.BadRequestError) as err:
        es.index(index="auto", id="2", document={"n": "five"})
    assert err.value.message == "document_parsing_exception"
    assert es.count(index="auto", query={"term": {"name.keyword": "Ann"}})["count"] == 1

    es.indices.create(index="strict", mappings={"dynamic": "strict", "properties": {"a": {"type": "keyword"}}})
    with pytest.raises(elasticsearch.BadRequestError) as err:
        es.index(index="strict", id="1", document={"a": "x", "b": 1})
    assert err.value.message == "strict_dynamic_mapping_exception"
    assert "dynamic introduction of [b] within [_doc] is not allowed" in err.value.body["error"]["reason"]


# --------------------------------------------------------------------------- retries and faults

def test_429_items_are_retryable_and_streaming_bulk_recovers(server: ESServer, es: Elasticsearch) -> None:
    make_pages(es)
    server.fail_next(3, 429)
    results = list(helpers.streaming_bulk(es, [page(i) for i in range(10)], raise_on_error=False))
    rejected = [item_of(info) for ok, info in results if not ok]
    assert [r["_id"] for r in rejected] == ["fp0000", "fp0001", "fp0002"]
    assert {r["status"] for r in rejected} == {429}
    assert rejected[0]["error"]["type"] == "es_rejected_execution_exception"
    assert es.count(index="pages")["count"] == 7  # a rejected item is not applied

    # elasticsearch-py#864: with raise_on_error=True (the default) a 429 item raises, max_retries or not
    server.fail_next(1, 429)
    with pytest.raises(helpers.BulkIndexError):
        helpers.bulk(es, [page(99)], max_retries=3, initial_backoff=0.01)

    server.clear_requests()
    server.fail_next(5, 429)
    results = list(helpers.streaming_bulk(es, [page(i) for i in range(10, 30)], max_retries=3,
                                          initial_backoff=0.01, chunk_size=10, raise_on_error=False))
    assert len(results) == 20 and all(ok for ok, _ in results)
    assert es.count(index="pages")["count"] == 27
    bulks = [r for r in server.received if r.path == "/_bulk"]
    assert len(bulks) == 3  # chunk 1, its 5 rejected items again, chunk 2
    assert [a["index"]["_id"] for a in bulks[1].ndjson()[::2]] == [f"fp{i:04d}" for i in range(10, 15)]


def test_503_items_and_whole_request_faults(server: ESServer) -> None:
    es = Elasticsearch(server.url, max_retries=0)
    make_pages(es)
    server.fail_next(1, 503)
    (ok, info), = helpers.streaming_bulk(es, [page(1)], raise_on_error=False)
    assert not ok and item_of(info)["error"]["type"] == "unavailable_shards_exception"

    server.fail_next(1, 429, whole=True)
    with pytest.raises(elasticsearch.ApiError) as err:
        helpers.bulk(es, [page(2)])
    assert err.value.status_code == 429 and err.value.message == "es_rejected_execution_exception"

    retrying = Elasticsearch(server.url)  # the transport retries 429/502/503/504 itself (3 times)
    server.clear_requests()
    server.fail_next(2, 503, whole=True)
    assert helpers.bulk(retrying, [page(3)]) == (1, [])
    assert server.requests == [("PUT", "/_bulk")] * 3
    server.fail_next(1, 503, whole=True, match="")
    with pytest.raises(elasticsearch.ApiError) as err:
        es.count(index="pages")
    assert err.value.status_code == 503 and err.value.message == "cluster_block_exception"
    assert es.count(index="pages")["count"] == 1


def test_down_refuses_connections_and_up_restores_same_port_and_data(server: ESServer) -> None:
    es = Elasticsearch(server.url, max_retries=0, request_timeout=2)
    es.index(index="pages", id="a", document={"x": 1})
    port = server.port
    server.down()
    assert not server.is_up
    with pytest.raises(elasticsearch.ConnectionError):
        es.get(index="pages", id="a")
    server.up()
    assert server.port == port
    assert es.get(index="pages", id="a")["_source"] == {"x": 1}


# --------------------------------------------------------------------------- documents

def test_get_index_update_delete(server: ESServer, es: Elasticsearch) -> None:
    make_pages(es)
    doc = {k: v for k, v in page(1).items() if not k.startswith("_")}
    created = es.index(index="pages", id="fp1", document=doc)
    assert created.meta.status == 201 and created["result"] == "created" and created["_version"] == 1
    assert es.index(index="pages", id="fp1", document=doc)["result"] == "updated"  # redelivery overwrites
    got = es.get(index="pages", id="fp1")
    assert got["found"] and got["_version"] == 2 and got["_source"] == doc
    assert es.get(index="pages", id="fp1", source_includes=["url"])["_source"] == {"url": doc["url"]}

    updated = es.update(index="pages", id="fp1", doc={"status": 304, "headers": {"ETag": "x"}})
    assert updated["result"] == "updated" and updated["_version"] == 3
    source = es.get(index="pages", id="fp1")["_source"]
    assert source["status"] == 304 and source["headers"] == {"Content-Type": "text/html", "X-Seq": "1", "ETag": "x"}
    assert es.update(index="pages", id="fp1", doc={"status": 304})["result"] == "noop"

    upserted = es.update(index="pages", id="stats-1", doc={"status": 200}, doc_as_upsert=True)
    assert upserted.meta.status == 201 and upserted["result"] == "created"
    with pytest.raises(elasticsearch.NotFoundError) as err:
        es.update(index="pages", id="nope", doc={"status": 1})
    assert err.value.message == "document_missing_exception"
    with pytest.raises(elasticsearch.ConflictError) as err:
        es.create(index="pages", id="fp1", document=doc)
    assert "version conflict, document already exists (current version [3])" in err.value.body["error"]["reason"]
    with pytest.raises(elasticsearch.ConflictError):
        es.index(index="pages", id="fp1", document=doc, if_seq_no=0, if_primary_term=1)

    assert es.delete(index="pages", id="fp1")["result"] == "deleted"
    with pytest.raises(elasticsearch.NotFoundError) as err:
        es.get(index="pages", id="fp1")
    assert err.value.body == {"_index": "pages", "_id": "fp1", "found": False}
    with pytest.raises(elasticsearch.NotFoundError) as err:
        es.delete(index="pages", id="fp1")
    assert err.value.body["result"] == "not_found"
    with pytest.raises(elasticsearch.NotFoundError) as err:
        es.get(index="missing", id="1")
    assert err.value.message == "index_not_found_exception"


def test_bulk_update_delete_and_create_items(server: ESServer, es: Elasticsearch) -> None:
    make_pages(es, 3)
    actions = [
        {"_op_type": "update", "_index": "pages", "_id": "fp0000", "doc": {"status": 500}},
        {"_op_type": "update", "_index": "pages", "_id": "new", "doc": {"status": 201}, "doc_as_upsert": True},
        {"_op_type": "update", "_index": "pages", "_id": "ghost", "doc": {"status": 1}},
        {"_op_type": "delete", "_index": "pages", "_id": "fp0001"},
        {"_op_type": "delete", "_index": "pages", "_id": "never"},
        {"_op_type": "create", "_index": "pages", "_id": "fp0002", "status": 1},
        {"_op_type": "create", "_index": "pages", "status": 1},
    ]
    results = [item_of(info) | {"ok": ok} for ok, info in helpers.streaming_bulk(es, actions, raise_on_error=False)]
    assert [(r["status"], r.get("result"), r["ok"]) for r in results] == [
        (200, "updated", True), (201, "created", True), (404, None, False), (200, "deleted", True),
        (404, "not_found", False), (409, None, False), (201, "created", True)]
    assert results[2]["error"]["type"] == "document_missing_exception"
    assert results[5]["error"]["type"] == "version_conflict_engine_exception"
    assert len(results[6]["_id"]) == 20  # an auto-generated id
    assert "error" not in results[4]  # a delete of a missing document is a result, not an error
    assert server.documents("pages")["fp0000"]["status"] == 500


# --------------------------------------------------------------------------- security

def test_basic_auth_accepted_and_refused() -> None:
    with ESServer(username="elastic", password="s3cret") as srv:
        assert Elasticsearch(srv.url, basic_auth=("elastic", "s3cret")).info()["tagline"]
        for auth, reason in [(("elastic", "wrong"), "unable to authenticate user [elastic] for REST request [/]"),
                             (None, "missing authentication credentials for REST request [/]")]:
            client = Elasticsearch(srv.url, basic_auth=auth, max_retries=0)
            with pytest.raises(elasticsearch.AuthenticationException) as err:
                client.info()
            assert err.value.status_code == 401 and err.value.message == "security_exception"
            assert err.value.body["error"]["reason"] == reason
            assert err.value.meta.headers["www-authenticate"].startswith('Basic realm="security"')
            assert "x-elastic-product" not in err.value.meta.headers  # as from a real security layer


def test_api_key_accepted_and_refused() -> None:
    with ESServer(api_key=("key-id", "key-secret")) as srv:
        encoded = base64.b64encode(b"key-id:key-secret").decode()
        assert Elasticsearch(srv.url, api_key=("key-id", "key-secret")).info()["tagline"]
        assert Elasticsearch(srv.url, api_key=encoded).count(index="_all")["count"] == 0
        assert srv.received[0].headers["authorization"] == f"ApiKey {encoded}"
        with pytest.raises(elasticsearch.AuthenticationException) as err:
            Elasticsearch(srv.url, api_key=("key-id", "nope"), max_retries=0).info()
        assert "unable to find apikey with id key-id" in err.value.body["error"]["additional_unsuccessful_credentials"]
        with pytest.raises(elasticsearch.AuthenticationException):
            Elasticsearch(srv.url, basic_auth=("elastic", "x"), max_retries=0).info()


def test_tls_with_the_test_ca(tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    with ESServer(tls=(pki.cert_file, pki.key_file), username="elastic", password="pw") as srv:
        assert srv.url.startswith("https://127.0.0.1:")
        es = Elasticsearch(srv.url, ca_certs=pki.ca_file, basic_auth=("elastic", "pw"))
        make_pages(es, 20)
        assert es.count(index="pages")["count"] == 20
        untrusted = Elasticsearch(srv.url, basic_auth=("elastic", "pw"), max_retries=0)
        with pytest.raises(elasticsearch.SSLError) as err:
            untrusted.info()
        assert "CERTIFICATE_VERIFY_FAILED" in repr(err.value)
        plain = Elasticsearch(srv.url.replace("https", "http"), max_retries=0, request_timeout=2)
        with pytest.raises(elasticsearch.ConnectionError):
            plain.info()
        assert es.info()["tagline"]  # the server survives refused handshakes
