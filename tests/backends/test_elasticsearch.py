"""The Elasticsearch store through the real elasticsearch-py client, against :class:`ESServer`.

Every test starts its own in-process server on 127.0.0.1 (no Redis, no mocks);
the real client talks to it over real sockets.
"""

from __future__ import annotations

import base64
import multiprocessing
import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import elasticsearch
import pytest

from crawler_tasks.backends import RecordFailure
from crawler_tasks.backends.elasticsearch import PAGES_MAPPING, STATS_MAPPING, ElasticsearchStore, parse_uri
from crawler_tasks.backends.elasticsearch.bulk import item_failure
from crawler_tasks.core.errors import BadInput, StoreUnavailable, UnknownStore
from crawler_tasks.core.models import PageRecord
from crawler_tasks.core.settings import Settings
from tests.fakes.es_server import ESServer
from tests.fakes.tls import Pki

FAST = {"retry_backoff": 0.01, "request_timeout": 5.0}


def page(i: int, crawl_id: str = "c1", **fields: Any) -> PageRecord:
    """A record as the crawler builds one, with a body."""
    values: dict[str, Any] = {
        "url": f"http://site.test/p/{i}", "fingerprint": f"fp{i:04d}", "crawl_id": crawl_id,
        "depth": i % 3, "fetched_at": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}+00:00",
        "status": 200, "headers": {"Content-Type": "text/html; charset=utf-8", "ETag": f'"{i}"'},
        "content_type": "text/html", "title": f"Page {i}", "text": f"words of page {i}",
        "links": [f"http://site.test/p/{i + 1}", "http://other.test/"], "size": 40 + i,
        "encoding": "utf-8", "meta": {"seed": "http://site.test/", "nested": {"n": i}},
        "body": f"<html><title>Page {i}</title>é ✓ {'x' * (i % 50)}</html>",
    }
    values.update(fields)
    return PageRecord(**values)


def make(server: ESServer, index: str = "pages", settings: Settings | None = None, scheme: str = "elasticsearch",
         userinfo: str = "", query: str = "", **options: Any) -> ElasticsearchStore:
    uri = f"{scheme}://{userinfo}127.0.0.1:{server.port}/{index}{query}"
    return ElasticsearchStore.from_uri(uri, settings or Settings(), **{**FAST, **options})


@pytest.fixture
def server() -> Iterator[ESServer]:
    with ESServer() as srv:
        yield srv


@pytest.fixture
def store(server: ESServer) -> Iterator[ElasticsearchStore]:
    s = make(server)
    yield s
    s.close()


def bulk_requests(server: ESServer) -> list:
    return [r for r in server.received if r.path == "/_bulk"]


# --------------------------------------------------------------------------- index and round trip

def test_first_upsert_creates_the_index_with_the_explicit_mapping(server: ESServer, store: ElasticsearchStore) -> None:
    assert store.count() == 0 and store.get("fp0000") is None and list(store.records()) == []
    assert server.index_names() == []  # reads never create the index
    server.clear_requests()
    assert store.upsert([page(0)]) == []
    # The items feed is looked for once (a minute): with no items index, no page had items.
    assert server.requests == [("HEAD", "/pages"), ("PUT", "/pages"), ("HEAD", "/pages-items-*"),
                               ("PUT", "/_bulk")]
    assert server.mapping("pages") == PAGES_MAPPING
    props = server.mapping("pages")["properties"]
    assert props["body"] == {"type": "text", "index": False}
    assert props["headers"]["type"] == props["meta"]["type"] == "flattened"
    assert props["links"]["type"] == "keyword" and props["links"]["doc_values"] is False
    assert {props[f]["type"] for f in ("status", "depth")} == {"integer"}
    assert props["fetched_at"] == {"type": "date"} and props["truncated"] == {"type": "boolean"}
    server.clear_requests()
    store.upsert([page(1)])
    assert server.requests == [("PUT", "/_bulk")]  # the index is checked once per store


def test_round_trip_keeps_every_field_and_the_body(server: ESServer, store: ElasticsearchStore) -> None:
    records = [page(i) for i in range(20)] + [page(100 + i, crawl_id="c2") for i in range(5)]
    records.append(page(200, body="<p>" + "grand texte é ✓ " * 70_000 + "</p>"))  # ~1.1 MB body
    shuffled = records[:]
    random.Random(7).shuffle(shuffled)
    assert store.upsert(shuffled) == []

    sent = bulk_requests(server)[0].ndjson()
    assert sent[0]["index"]["_id"] == f'{sent[1]["crawl_id"]}:{sent[1]["fingerprint"]}'  # crawl:fingerprint
    assert set(server.documents("pages")) == {f"{r.crawl_id}:{r.fingerprint}" for r in records}

    c1 = [r for r in records if r.crawl_id == "c1"]
    assert list(store.records("c1")) == sorted(c1, key=lambda r: (r.fetched_at, r.fingerprint))
    assert len(list(store.records())) == 26
    assert store.count() == 26 and store.count("c1") == 21 and store.count("c2") == 5 and store.count("none") == 0
    assert store.get("fp0200") == records[-1] and store.get("fp0200").body == records[-1].body
    assert store.get("fp0003") == page(3) == store.get("fp0003", "c1")
    assert store.get("nope") is None and store.get("") is None and store.get("", "c1") is None


def test_oversized_keyword_values_are_kept_but_not_indexed(server: ESServer, store: ElasticsearchStore) -> None:
    """A 40 KB Location or Content-Type would be an immense term: ignore_above keeps the record."""
    huge = "http://site.test/" + "a" * 40_000
    record = page(1, redirect_to=huge, content_type="text/" + "x" * 40_000, headers={"Location": huge},
                  links=[f"http://site.test/l/{n}" for n in range(1000)] + [huge])
    assert store.upsert([record, page(2)]) == []
    assert store.get("fp0001") == record
    es = elasticsearch.Elasticsearch(server.url)
    assert es.count(index="pages", query={"term": {"redirect_to": huge}})["count"] == 0  # stored, not indexed
    assert es.count(index="pages", query={"term": {"links": "http://site.test/l/999"}})["count"] == 1


def test_redelivered_batch_overwrites_and_count_stays(server: ESServer, store: ElasticsearchStore) -> None:
    batch = [page(i) for i in range(10)]
    store.upsert(batch)
    store.upsert(batch)  # a redelivered store task
    changed = page(4, title="second delivery")
    store.upsert([changed])
    assert store.count() == 10 and len(server.documents("pages")) == 10
    assert store.get("fp0004").title == "second delivery"


def test_thousand_records_in_one_upsert(server: ESServer, store: ElasticsearchStore) -> None:
    assert store.upsert([page(i) for i in range(1000)]) == []
    assert store.count("c1") == 1000
    assert len(bulk_requests(server)) == 2  # 500 records per _bulk request
    assert [r.fingerprint for r in store.records()] == [f"fp{i:04d}" for i in range(1000)]


def test_threads_share_one_store(server: ESServer, store: ElasticsearchStore) -> None:
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(5):
                store.upsert([page(n * 100 + i * 10 + j) for j in range(10)])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and store.count() == 400


def test_forked_workers_build_their_own_client(server: ESServer, store: ElasticsearchStore) -> None:
    """Under the prefork pool a store built before the fork must not share the parent's sockets."""
    store.upsert([page(0)])

    def write(n: int) -> None:
        store.upsert([page(100 * n + i) for i in range(1, 51)])
        store.close()

    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=write, args=(n,)) for n in (1, 2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    assert store.count() == 101  # and the parent's client still works


# --------------------------------------------------------------------------- record failures

def test_a_record_breaking_the_mapping_is_reported_and_the_rest_stored(server: ESServer,
                                                                          store: ElasticsearchStore) -> None:
    records = [page(i) for i in range(10)]
    records[3] = page(3, status="abc")
    records[6] = page(6, fetched_at="yesterday")
    failures = store.upsert(records)
    assert [f.fingerprint for f in failures] == ["fp0003", "fp0006"]
    assert all(isinstance(f, RecordFailure) for f in failures)
    assert failures[0].reason.startswith("document_parsing_exception: ")
    assert "failed to parse field [status] of type [integer]" in failures[0].reason
    assert "number_format_exception" in failures[0].reason
    assert "failed to parse field [fetched_at] of type [date]" in failures[1].reason
    assert store.count() == 8 and store.get("fp0003") is None
    assert len(bulk_requests(server)) == 1  # a record failure is not retried


def test_a_stricter_index_refuses_records_one_by_one(server: ESServer, store: ElasticsearchStore) -> None:
    """An index created beforehand is used as it is; what its mapping refuses is a record failure."""
    stricter = {**PAGES_MAPPING, "properties": {**PAGES_MAPPING["properties"], "depth": {"type": "byte"}}}
    elasticsearch.Elasticsearch(server.url).indices.create(index="pages", mappings=stricter)
    failures = store.upsert([page(1, depth=1000), page(2, depth=100)])
    assert [f.fingerprint for f in failures] == ["fp0001"]
    assert failures[0].reason.startswith("document_parsing_exception: [1:")
    assert "failed to parse field [depth] of type [byte]" in failures[0].reason
    assert store.count() == 1 and server.mapping("pages") == stricter


def test_a_record_without_a_usable_id_fails_alone(server: ESServer, store: ElasticsearchStore) -> None:
    failures = store.upsert([page(1, fingerprint=""), page(2, fingerprint="x" * 600), page(3)])
    assert [f.reason.split(":")[0] for f in failures] == ["invalid_id", "invalid_id"]
    assert store.count() == 1


@pytest.mark.parametrize(("item", "record_fault"), [
    ({"status": 400, "error": {"type": "document_parsing_exception", "reason": "r"}}, True),
    ({"status": 400, "error": {"type": "mapper_parsing_exception", "reason": "r"}}, True),  # before 8.8
    ({"status": 400, "error": {"type": "illegal_argument_exception", "reason": "immense term"}}, True),
    ({"status": 400, "error": {"type": "index_closed_exception", "reason": "closed"}}, False),
    ({"status": 404, "error": {"type": "index_not_found_exception", "reason": "gone"}}, False),
    ({"status": 403, "error": {"type": "security_exception", "reason": "unauthorized"}}, False),
    ({"status": 429, "error": {"type": "es_rejected_execution_exception", "reason": "busy"}}, False),
    ({"status": 503, "error": {"type": "unavailable_shards_exception", "reason": "down"}}, False),
])
def test_which_item_errors_are_the_records_fault(item: dict, record_fault: bool) -> None:
    failure = item_failure({"_id": "fp", **item})
    assert (failure is not None) is record_fault
    if failure:
        assert failure.fingerprint == "fp" and failure.reason.startswith(item["error"]["type"] + ": ")


# --------------------------------------------------------------------------- retries and outages

def test_rejected_items_are_retried_and_stored(server: ESServer, store: ElasticsearchStore) -> None:
    store.upsert([page(0)])
    server.clear_requests()
    server.fail_next(5, 429)
    assert store.upsert([page(i) for i in range(1, 11)]) == []
    assert store.count() == 11
    bulks = bulk_requests(server)
    assert len(bulks) == 2 and len(bulks[1].ndjson()) == 10  # the 5 rejected items sent again
    server.fail_next(2, 503)  # a 5xx item is retried too
    assert store.upsert([page(i) for i in range(20, 25)]) == [] and store.count() == 16


def test_items_still_rejected_after_the_retries_fail_the_batch(server: ESServer) -> None:
    store = make(server, item_retries=2)
    server.fail_next(100, 429)
    with pytest.raises(StoreUnavailable) as err:
        store.upsert([page(i) for i in range(4)])
    message = str(err.value)
    assert "4 of 4 record(s) not written after 2 retries: 429 es_rejected_execution_exception" in message
    assert "\n" not in message
    server.clear_faults()
    assert store.upsert([page(i) for i in range(4)]) == [] and store.count() == 4  # the batch again


def test_whole_request_503s_past_the_transport_retries(server: ESServer) -> None:
    store = make(server, item_retries=1)
    store.upsert([page(0)])
    server.clear_requests()
    server.fail_next(50, 503, whole=True)
    with pytest.raises(StoreUnavailable) as err:
        store.upsert([page(1)])
    assert str(err.value) == (f"elasticsearch store elasticsearch://127.0.0.1:{server.port}/pages: 503 "
                              "cluster_block_exception: blocked by: [SERVICE_UNAVAILABLE/1/state not "
                              "recovered / initialized];")
    assert len(bulk_requests(server)) == 8  # (1 + 3 transport retries) x (1 + 1 helper retry)
    server.clear_faults()
    assert store.upsert([page(1)]) == [] and store.count() == 2


def test_server_down_then_up(server: ESServer, store: ElasticsearchStore) -> None:
    store.upsert([page(0)])
    server.down()
    for call in (lambda: store.upsert([page(1)]), store.count, lambda: store.get("fp0000"),
                 lambda: list(store.records()), lambda: store.write_stats("c1", {"total_num": 1})):
        with pytest.raises(StoreUnavailable) as err:
            call()
        assert str(err.value) == (f"elasticsearch store elasticsearch://127.0.0.1:{server.port}/pages: "
                                  "cannot connect: Failed to establish a new connection: [Errno 111] "
                                  "Connection refused")
        assert err.value.__cause__ is None and err.value.__suppress_context__
    server.up()
    assert store.upsert([page(1)]) == [] and store.count() == 2


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        store = ElasticsearchStore.from_uri(f"elasticsearch://127.0.0.1:{port}/pages", Settings(),
                                            request_timeout=0.3, transport_retries=0)
        with pytest.raises(StoreUnavailable, match=r"/pages: no answer within 0.3 s$"):
            store.count()


def test_an_elasticsearch_8_server_is_named_as_the_problem() -> None:
    if not elasticsearch.__versionstr__.startswith("9."):
        pytest.skip("only a 9.x client is refused by an 8.x server")
    with ESServer(version="8.15.0") as srv, pytest.raises(StoreUnavailable,
                                                          match="talks to Elasticsearch 9 servers only"):
        make(srv, transport_retries=0).upsert([page(0)])


# --------------------------------------------------------------------------- security

def test_basic_auth_from_the_uri() -> None:
    with ESServer(username="elastic", password="p@ss:w/rd") as srv:
        store = make(srv, userinfo="elastic:p%40ss%3Aw%2Frd@")
        assert store.upsert([page(0)]) == [] and store.count() == 1
        expected = "Basic " + base64.b64encode(b"elastic:p@ss:w/rd").decode()
        assert {r.headers["authorization"] for r in srv.received} == {expected}
        assert "p@ss" not in repr(store) and repr(store).endswith(f"//elastic:***@127.0.0.1:{srv.port}/pages>")


def test_api_key_from_settings() -> None:
    encoded = base64.b64encode(b"key-id:key-secret").decode()
    with ESServer(api_key=("key-id", "key-secret")) as srv:
        for key in (encoded, "key-id:key-secret"):
            store = make(srv, settings=Settings(es_api_key=key))
            assert store.upsert([page(0)]) == [] and store.count() == 1
        assert {r.headers["authorization"] for r in srv.received} == {f"ApiKey {encoded}"}
        with pytest.raises(StoreUnavailable, match="the API key in CRAWLER_ES_API_KEY"):
            make(srv, settings=Settings(es_api_key="key-id:wrong")).count()


def test_a_wrong_password_says_the_credentials_were_refused(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    with ESServer(username="elastic", password="right") as srv:
        store = make(srv, userinfo="elastic:hunter2@")
        for call in (lambda: store.upsert([page(0)]), store.count):
            with pytest.raises(StoreUnavailable) as err:
                call()
            assert str(err.value) == (
                f"elasticsearch store elasticsearch://elastic:***@127.0.0.1:{srv.port}/pages: the credentials "
                "were refused (401 Unauthorized): the store sent user 'elastic' with the password in the store URI")
        with pytest.raises(StoreUnavailable, match=r"refused .*: the store sent no credentials"):
            make(srv).count()
    assert "hunter2" not in caplog.text
    assert base64.b64encode(b"elastic:hunter2").decode() not in caplog.text


def test_tls_with_the_test_ca(tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    with ESServer(tls=(pki.cert_file, pki.key_file)) as srv:
        store = make(srv, scheme="elasticsearchs", query=f"?ca_certs={pki.ca_file}")
        assert store.upsert([page(0)]) == [] and store.count() == 1
        with pytest.raises(StoreUnavailable, match="TLS failed: .*CERTIFICATE_VERIFY_FAILED.*ca_certs"):
            make(srv, scheme="elasticsearchs", transport_retries=0).count()  # verified against the system CAs
        with pytest.raises(StoreUnavailable, match="cannot connect"):
            make(srv, transport_retries=0, request_timeout=2).count()  # plain HTTP to a TLS port


# --------------------------------------------------------------------------- URIs

@pytest.mark.parametrize(("uri", "problem"), [
    ("elasticsearch://127.0.0.1:9200", "no index: name it as the path"),
    ("elasticsearch://127.0.0.1:9200/", "no index"),
    ("elasticsearch:///pages", "no host"),
    ("elasticsearch://127.0.0.1:99999/pages", "the port must be a number from 1 to 65535"),
    ("elasticsearch://127.0.0.1:http/pages", "the port must be a number"),
    ("elasticsearch://127.0.0.1:0/pages", "the port must be a number"),
    ("elasticsearch://h/Pages", "index name 'Pages' must be lower case"),
    ("elasticsearch://h/_pages", "must not start with '_', '-' or '+'"),
    ("elasticsearch://h/-pages", "must not start with"),
    ("elasticsearch://h/+pages", "must not start with"),
    ("elasticsearch://h/.pages", "must not start with '.'"),
    ("elasticsearch://h/pa*ges", "must not contain '*'"),
    ("elasticsearch://h/pa%20ges", "must not contain ' '"),
    ("elasticsearch://h/pa,ges", "must not contain ','"),
    ("elasticsearch://h/pa:ges", "must not contain ':'"),
    ('elasticsearch://h/pa"ges', "must not contain '\"'"),
    ("elasticsearch://h/pa%5Cges", "must not contain '\\\\'"),
    ("elasticsearch://h/pages#x", "must not contain '#'"),
    ("elasticsearch://h/a/b", "the path must be one index name"),
    ("elasticsearch://h/" + "p" * 250, "longer than 249 bytes"),
    ("elasticsearch://h/pages?shards=2", "unknown option 'shards' (known: ca_certs)"),
    ("elasticsearch://h/pages?ca_certs=/etc/hosts", "ca_certs needs elasticsearchs://"),
    ("elasticsearchs://h/pages?ca_certs=/no/such/ca.pem", "ca_certs: no such file '/no/such/ca.pem'"),
    ("elasticsearch://user@h/pages", "credentials must be given as user:password@"),
    ("elastic://h/pages", "the scheme must be elasticsearch:// or elasticsearchs://"),
])
def test_malformed_uris_are_unknown_stores(uri: str, problem: str) -> None:
    with pytest.raises(UnknownStore) as err:
        ElasticsearchStore.from_uri(uri, Settings())
    assert problem in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("uri", [
    "elasticsearch://elastic:hunter2@h:99999/pages",
    "elasticsearch://elastic:hun/ter2@h/pages",
    "elasticsearch://elastic:hunter2@h/Pages",
    "elasticsearch://elastic:hunter2@h/pages?x=1",
])
def test_a_password_never_reaches_the_message(uri: str) -> None:
    with pytest.raises(UnknownStore) as err:
        ElasticsearchStore.from_uri(uri, Settings())
    assert "hunter2" not in str(err.value) and "ter2" not in str(err.value)
    assert "elastic:***@" in str(err.value)


def test_uri_parts() -> None:
    t = parse_uri("elasticsearchs://u:p%2Fw@[::1]/crawl-pages/?ca_certs=" + __file__, api_key="ignored")
    assert (t.url, t.index, t.username, t.password, t.api_key, t.ca_certs) == (
        "https://[::1]:9200", "crawl-pages", "u", "p/w", None, __file__)
    assert t.display == "elasticsearchs://u:***@[::1]:9200/crawl-pages" and "p/w" not in repr(t)
    assert parse_uri("ELASTICSEARCH://Host.Example:9201/pages", api_key=" k ").api_key == "k"
    assert parse_uri("elasticsearch://h/pages", api_key="id:secret").api_key == ("id", "secret")


# --------------------------------------------------------------------------- statistics

def test_stats_document_is_updated_in_place(server: ESServer, store: ElasticsearchStore) -> None:
    store.write_stats("c1", {"total_num": 3, "total_request_size": 300, "total_response_size": 9000,
                             "status/200": 2, "status/404": 1, "gate/admitted": 5})
    mapping = server.mapping("pages-stats")
    assert mapping["properties"].pop("status")["properties"] == {"200": {"type": "long"}, "404": {"type": "long"}}
    expected = {**STATS_MAPPING, "properties": dict(STATS_MAPPING["properties"])}
    assert expected["properties"].pop("status") == {"type": "object", "dynamic": True}
    assert mapping == expected
    assert "pages" not in server.index_names()  # statistics do not create the page index
    store.write_stats("c1", {"total_num": 4, "total_request_size": 400, "total_response_size": 9500,
                             "status/200": 3, "status/404": 1, "retry/reason_count/timeout": 1})
    store.write_stats("c2", {"total_num": 1, "status/503": 1})
    docs = server.documents("pages-stats")
    assert set(docs) == {"c1", "c2"}
    c1 = docs["c1"]
    assert c1.pop("updated_at").startswith("20")
    assert c1 == {"crawl_id": "c1", "total_num": 4, "total_request_size": 400, "total_response_size": 9500,
                  "status": {"200": 3, "404": 1}, "counters": {"retry/reason_count/timeout": 1}}
    assert store.read_stats("c2")["status"] == {"503": 1} and store.read_stats("c3") is None
    es = elasticsearch.Elasticsearch(server.url)
    assert es.count(index="pages-stats", query={"range": {"status.200": {"gte": 3}}})["count"] == 1
    with pytest.raises(BadInput, match="crawl_id: a document id must be a non-empty string"):
        store.write_stats("", {"total_num": 1})
    writes = [r.path for r in server.received if r.method == "PUT" and r.path.startswith("/pages-stats/")]
    assert writes == ["/pages-stats/_doc/c1", "/pages-stats/_doc/c1", "/pages-stats/_doc/c2"]  # id = crawl id


# --------------------------------------------------------------------------- index creation race

def _write_together(stores: list[ElasticsearchStore]) -> list[BaseException]:
    """Each store writes one record, all released at once; the errors raised."""
    barrier = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def write(n: int, store: ElasticsearchStore) -> None:
        try:
            barrier.wait(5)
            assert store.upsert([page(n)]) == []
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n, s)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return errors


def test_stores_creating_the_index_at_once_all_succeed(server: ESServer) -> None:
    """Several stores (workers) find no index and create it together; the losers go on writing."""
    raced = False
    for round_ in range(20):  # until a round had two creators at once (most do)
        index = f"race-{round_}"
        stores = [make(server, index=index) for _ in range(6)]
        assert _write_together(stores) == [] and stores[0].count() == 6
        assert server.mapping(index) == PAGES_MAPPING
        for s in stores:
            s.close()
        creates = [r for r in server.received if (r.method, r.path) == ("PUT", f"/{index}")]
        if len(creates) > 1:
            raced = True
            break
    assert raced, "no round had two creators at once"


def test_a_crawls_records_are_its_own(server: ESServer, store: ElasticsearchStore) -> None:
    first = page(1, crawl_id="a", fetched_at="2026-11-22T08:00:00+00:00", title="in a")
    second = page(1, crawl_id="b", fetched_at="2026-11-23T08:00:00+00:00", title="in b")
    store.upsert([first])
    store.upsert([second])  # the same URL in a later crawl: beside the first, not over it
    assert [r.title for r in store.records("a")] == ["in a"] and store.count("a") == 1
    assert [r.title for r in store.records("b")] == ["in b"] and store.count() == 2
    assert store.get("fp0001", "a").title == "in a" and store.get("fp0001", "b").title == "in b"
    assert store.get("fp0001").title == "in b"  # without a crawl: the latest
    assert store.get("fp0001", "c") is None and store.get("nothing") is None
