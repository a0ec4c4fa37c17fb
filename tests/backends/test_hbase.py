"""The HBase store through the real happybase, against the HBase Thrift test gateway.

Most tests run in each of the four wire modes (buffered or framed transport,
binary or compact protocol). Real sockets on 127.0.0.1, no mocks, no Redis.
"""

from __future__ import annotations

import dataclasses
import gc
import multiprocessing
import random
import threading
import time
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import happybase
import Hbase_thrift  # happybase loads its Hbase.thrift under this name
import pytest
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TTransportException

from crawler_tasks.backends import RecordFailure
from crawler_tasks.backends.hbase import HBaseStore, describe_error, parse_uri, row_key, site_prefix
from crawler_tasks.backends.hbase import store as hbase_store
from crawler_tasks.backends.hbase.cells import CELL_BYTES, FRAMED_CELL_BYTES
from crawler_tasks.backends.hbase.keys import KEY_URL_BYTES
from crawler_tasks.core.errors import StoreUnavailable, UnknownStore
from crawler_tasks.core.models import PageRecord
from tests.backends.test_hbase_contract import core_round_trip, make_record, random_html
from tests.fakes.hbase_server import DEFAULT_MAX_FRAME_BYTES, HBaseServer, keyvalue_size

MODES = [("buffered", "binary"), ("buffered", "compact"), ("framed", "binary"), ("framed", "compact")]
MIB = 1024 * 1024


@pytest.fixture(params=MODES, ids=["-".join(m) for m in MODES])
def hbase(request: pytest.FixtureRequest) -> Iterator[HBaseServer]:
    """A running test gateway in one wire mode."""
    with HBaseServer(*request.param) as server:
        yield server


@pytest.fixture(params=[MODES[0], MODES[3]], ids=["buffered-binary", "framed-compact"])
def hbase2(request: pytest.FixtureRequest) -> Iterator[HBaseServer]:
    """A test gateway in two of the modes, for the slow tests (one mode per transport)."""
    with HBaseServer(*request.param) as server:
        yield server


@pytest.fixture(params=MODES[2:], ids=["framed-binary", "framed-compact"])
def framed(request: pytest.FixtureRequest) -> Iterator[HBaseServer]:
    """A test gateway speaking the framed transport."""
    with HBaseServer(*request.param) as server:
        yield server


@pytest.fixture
def buffered() -> Iterator[HBaseServer]:
    """A test gateway in the default mode, for tests that do not depend on the wire."""
    with HBaseServer() as server:
        yield server


def open_store(server: HBaseServer, table: str = "pages", **options: object) -> HBaseStore:
    """A store speaking ``server``'s transport and protocol, built from its URI."""
    query = "&".join(f"{k}={v}" for k, v in {"transport": server.transport, "protocol": server.protocol,
                                              **options}.items())
    return HBaseStore.from_uri(f"hbase://{server.host}:{server.port}/{table}?{query}")


@pytest.fixture
def store(hbase: HBaseServer) -> Iterator[HBaseStore]:
    s = open_store(hbase)
    yield s
    s.close()


def record(n: int, crawl_id: str = "c1", host: str = "www.example.com", **fields: Any) -> PageRecord:
    return make_record(f"https://{host}/p/{n:04d}", crawl_id, **fields)


def run_threads(n: int, work: Any) -> list[BaseException]:
    """Run ``work(i)`` in ``n`` threads started together; the errors they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            start.wait()
            work(i)
        except BaseException as exc:  # noqa: BLE001  (reported to the test)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(exc.value)
    assert message and "\n" not in message
    return message


# -- round trips --------------------------------------------------------------


def test_core_round_trip_in_every_wire_mode(hbase: HBaseServer, store: HBaseStore) -> None:
    core_round_trip(store, uuid.uuid4().hex[:12])
    tables = hbase.model.table_names()
    assert tables == [b"pages"]
    families = hbase.model.descriptors(b"pages")
    assert sorted(families) == [b"c:", b"f:", b"i:", b"l:"]
    assert {d.maxVersions for d in families.values()} == {1}


def test_row_layout(buffered: HBaseServer) -> None:
    store = open_store(buffered)
    page = make_record("https://WWW.Example.com:8443/a/b?z=1&a=2#top", "c1", body="<p>x</p>", title="T",
                       links=["https://www.example.com/"], meta={"k": 1})
    assert store.upsert([page]) == []
    key = b"com.example.www:https:8443/a/b?a=2&z=1 " + page.fingerprint.encode() + b" c1"
    rows = buffered.dump("pages")
    assert sorted(rows) == [key, b"~fp:" + page.fingerprint.encode(), b"~fp:" + page.fingerprint.encode() + b" c1"]
    assert rows[b"~fp:" + page.fingerprint.encode()] == rows[b"~fp:" + page.fingerprint.encode() + b" c1"] == {
        b"i:row": key}
    cells = rows[key]
    assert cells[b"f:url"] == b'"https://WWW.Example.com:8443/a/b?z=1&a=2#top"'
    assert cells[b"f:status"] == b"200" and cells[b"f:redirect_to"] == b"null"
    assert cells[b"f:meta"] == b'{"k":1}' and cells[b"l:links"] == b'["https://www.example.com/"]'
    assert cells[b"c:text"] == b"null" and cells[b"c:body.parts"] == b"1"
    assert zlib.decompress(cells[b"c:body"]) == b"<p>x</p>"
    assert {c.split(b":")[0] for c in cells} == {b"f", b"c", b"l"}
    store.close()


def test_row_keys_put_the_site_first() -> None:
    assert row_key("http://Example.COM/", "f") == b"com.example:http/ f"
    assert row_key("https://www.example.com:443/x?b=1&a=2", "f") == b"com.example.www:https/x?a=2&b=1 f"
    assert row_key("http://user:secret@example.com:8080/", "f") == b"com.example:http:8080/ f"
    assert row_key("http://127.0.0.1:5000/a", "f") == b"127.0.0.1:http:5000/a f"
    assert row_key("http://[::1]:8080/a", "f") == b"[::1]:http:8080/a f"
    long = row_key("http://example.com/" + "a" * 5000, "f" * 40)
    assert len(long) == KEY_URL_BYTES + 41 and long.endswith(b" " + b"f" * 40)
    assert site_prefix("WWW.Example.com") == b"com.example.www:"
    assert site_prefix("example.com", subdomains=True) == b"com.example."
    assert site_prefix("::1") == b"[::1]:"
    assert row_key("http://example.com/", "f", "crawl-1") == b"com.example:http/ f crawl-1"


def test_a_crawls_records_are_its_own(store: HBaseStore) -> None:
    store.upsert([record(1, crawl_id="a", title="in a", fetched_at="2026-11-22T08:00:00+00:00")])
    store.upsert([record(1, crawl_id="b", title="in b", fetched_at="2026-11-23T08:00:00+00:00")])
    assert [r.title for r in store.records("a")] == ["in a"] and store.count("a") == 1
    assert [r.title for r in store.records("b")] == ["in b"] and store.count() == 2
    fingerprint = next(store.records("a")).fingerprint
    assert store.get(fingerprint, "a").title == "in a" and store.get(fingerprint, "b").title == "in b"
    assert store.get(fingerprint).title == "in b"  # without a crawl: the one written last
    assert store.get(fingerprint, "c") is None


def test_body_over_one_cell_is_split_and_read_back(hbase2: HBaseServer) -> None:
    hbase, store = hbase2, open_store(hbase2)
    # 10 Mi characters, as a 10 MiB Latin-1 page decodes: 15 MiB of UTF-8 that zlib cannot shrink.
    body = random.Random(1).randbytes(10 * MIB).decode("latin-1")
    page = record(1, body=body)
    assert store.upsert([page]) == []
    key = row_key(page.url, page.fingerprint, page.crawl_id)
    cells = hbase.dump("pages")[key]
    parts = int(cells[b"c:body.parts"])
    limit = FRAMED_CELL_BYTES if hbase.transport == "framed" else CELL_BYTES
    assert parts >= (12 if hbase.transport == "framed" else 2) and cells[b"c:body"] == b""
    for n in range(parts):
        assert keyvalue_size(key, b"c:body.%d" % n, cells[b"c:body.%d" % n]) <= limit
    assert store.get(page.fingerprint) == page
    assert [r.body for r in store.records("c1")] == [body]
    store.close()


def test_rewrite_replaces_every_field_and_leaves_no_stale_body(hbase2: HBaseServer) -> None:
    hbase, store = hbase2, open_store(hbase2)
    split = record(1, body=random_html(12 * MIB, seed=3), title="first", links=["https://a.example/"])
    assert store.upsert([split]) == []
    rows = hbase.dump("pages")
    assert store.upsert([split]) == []  # redelivered: the same row, the same cells
    assert hbase.dump("pages") == rows
    small = dataclasses.replace(split, body="<p>small</p>", title=None, links=[], status=500)
    assert store.upsert([small]) == []
    assert store.get(split.fingerprint) == small
    gone = dataclasses.replace(small, body=None)
    assert store.upsert([gone]) == []
    assert store.get(split.fingerprint) == gone
    assert store.count() == 1 and list(store.records()) == [gone]
    store.close()


def test_a_rendered_pages_dom_is_kept_compressed_and_a_later_plain_fetch_drops_it(hbase2: HBaseServer) -> None:
    hbase, store = hbase2, open_store(hbase2)
    dom = "<html><body>" + "<p>built by a script</p>" * 20_000 + "</body></html>"
    page = record(1, body="<html><body></body></html>", dom=dom,
                  rendered={"wait": "load", "settled": True, "requests": 3})
    assert store.upsert([page]) == []
    cells = hbase.dump("pages")[row_key(page.url, page.fingerprint, page.crawl_id)]
    assert 0 < len(cells[b"c:dom"]) < len(dom) // 50 and b"f:dom" not in cells
    assert store.get(page.fingerprint) == page
    plain = dataclasses.replace(page, dom=None, rendered=None)
    assert store.upsert([plain]) == []
    assert store.get(page.fingerprint) == plain
    store.close()


def test_a_batch_with_one_fingerprint_twice_keeps_the_last(store: HBaseStore) -> None:
    first, last = record(1, title="first"), record(1, title="last")
    assert store.upsert([first, record(2), last]) == []
    assert store.get(first.fingerprint) == last
    assert store.count("c1") == 2


# -- reads --------------------------------------------------------------------


def test_scans_by_site_return_that_sites_rows_in_key_order(hbase: HBaseServer, store: HBaseStore,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hbase_store, "SCAN_PAGE", 7)  # several scan pages
    monkeypatch.setattr(hbase_store, "GET_ROWS", 3)
    urls = [f"https://www.example.com/{p}" for p in ("b", "a/2", "a", "a/10", "z?x=1", "z")]
    urls += ["http://www.example.com/", "https://www.example.com:8443/", "https://example.com/",
             "https://shop.www.example.com/", "https://www.example.org/", "https://www.example.community/"]
    urls += [f"https://www.example.com/many/{i:03d}" for i in range(30)]
    assert store.upsert([make_record(u, "c1") for u in reversed(urls)]) == []
    site = [r.url for r in store.scan_site("www.example.com")]
    # http before https, then the default port ('/' sorts before ':'), then paths in byte order
    expected = ["http://www.example.com/", "https://www.example.com/a", "https://www.example.com/a/10",
                "https://www.example.com/a/2", "https://www.example.com/b",
                *[f"https://www.example.com/many/{i:03d}" for i in range(30)],
                "https://www.example.com/z", "https://www.example.com/z?x=1", "https://www.example.com:8443/"]
    assert site == expected
    assert [r.url for r in store.scan_site("www.example.com", subdomains=True)] == [
        "https://shop.www.example.com/", *expected]
    assert [r.url for r in store.scan_site("example.com")] == ["https://example.com/"]
    assert list(store.scan_site("nothing.example")) == []
    assert store.count() == len(urls)


def test_get_count_and_records_by_crawl(store: HBaseStore) -> None:
    mine = [record(i, "mine") for i in range(5)]
    theirs = [record(i, "theirs", host="other.example") for i in range(3)]
    assert store.upsert(mine + theirs) == []
    assert store.get(mine[2].fingerprint) == mine[2]
    assert store.get("0" * 40) is None
    assert (store.count("mine"), store.count("theirs"), store.count("nobody"), store.count()) == (5, 3, 0, 8)
    assert list(store.records("mine")) == mine  # key order: one host, paths in order
    assert sorted(r.url for r in store.records()) == sorted(r.url for r in mine + theirs)


def test_reads_of_a_missing_table_are_empty_and_create_nothing(buffered: HBaseServer) -> None:
    store = open_store(buffered, table="absent")
    assert (store.count(), list(store.records()), store.get("f"), list(store.scan_site("a.example"))) == (
        0, [], None, [])
    assert buffered.model.table_names() == []
    store.close()


# -- batching -----------------------------------------------------------------


def mutate_rows_bytes(call: Any) -> int:
    """Bytes of rows, columns and values one mutateRows call carried."""
    return sum(len(b.row) + sum(len(m.column or b"") + len(m.value or b"") for m in b.mutations)
               for b in call.args["rowBatches"])


def test_batch_of_500_is_one_mutate_rows_buffered_and_several_framed(hbase: HBaseServer,
                                                                    store: HBaseStore) -> None:
    assert store.upsert([record(9999)]) == []  # the table is created
    hbase.clear_calls()
    batch = [record(i, body=random_html(4096, seed=i)) for i in range(500)]  # ~1.6 MB compressed
    assert store.upsert(batch) == []
    calls = [c for c in hbase.requests if c.method == "mutateRows"]
    assert hbase.calls == ["mutateRows"] * len(calls)
    if hbase.transport == "buffered":
        assert len(calls) == 1
        assert len(calls[0].args["rowBatches"]) == 1500  # 500 pages and their two index rows each
    else:
        assert len(calls) >= 2
        assert all(mutate_rows_bytes(c) < DEFAULT_MAX_FRAME_BYTES * 3 // 4 for c in calls)
    assert store.count("c1") == 501
    assert store.get(batch[499].fingerprint) == batch[499]


def test_framed_calls_stay_under_the_frame_cap_with_a_10_mib_body(framed: HBaseServer) -> None:
    hbase, store = framed, open_store(framed)
    assert store.upsert([record(0)]) == []
    hbase.clear_calls()
    big = record(1, body=random_html(10 * MIB))
    assert store.upsert([big, record(2)]) == []
    calls = hbase.requests
    assert len(calls) >= 8 and all(mutate_rows_bytes(c) < 3 * MIB // 2 for c in calls)
    assert store.get(big.fingerprint) == big
    store.close()


# -- errors -------------------------------------------------------------------


def test_gateway_down_is_store_unavailable_and_the_store_works_once_it_is_back(
        hbase: HBaseServer, store: HBaseStore) -> None:
    assert store.upsert([record(1)]) == []
    hbase.down()
    for call in (lambda: store.upsert([record(2)]), lambda: store.get(record(1).fingerprint),
                 lambda: store.count(), lambda: list(store.records("c1"))):
        with pytest.raises(StoreUnavailable) as down:
            call()
        assert one_line(down).startswith(f"hbase store 127.0.0.1:{hbase.port}/pages: ")
    hbase.up()
    assert store.upsert([record(2)]) == []
    assert store.count("c1") == 2
    assert store.get(record(1).fingerprint) == record(1)


def test_gateway_down_before_first_use(buffered: HBaseServer) -> None:
    store = open_store(buffered)  # building the store needs no gateway
    buffered.down()
    with pytest.raises(StoreUnavailable, match="Could not connect"):
        store.upsert([record(1)])
    buffered.up()
    assert store.upsert([record(1)]) == []
    store.close()


def test_pooled_connections_a_restart_closed_are_replaced(hbase: HBaseServer) -> None:
    store = open_store(hbase, pool=4)
    seen: list[int] = []

    def work(i: int) -> None:
        for j in range(20):
            assert store.upsert([record(i * 100 + j)]) == []
            seen.append(hbase.connections())

    assert run_threads(4, work) == []
    assert max(seen) >= 2  # several pooled connections were open
    hbase.down()
    hbase.up()
    assert run_threads(4, work) == []  # each stale connection is retried on a new one
    assert store.count() == 80
    store.close()


def test_fail_next_is_store_unavailable_then_the_write_goes_through(hbase: HBaseServer,
                                                                    store: HBaseStore) -> None:
    assert store.upsert([record(1)]) == []
    hbase.fail_next(1)
    with pytest.raises(StoreUnavailable) as busy:
        store.upsert([record(2), record(3)])
    assert "IOError: org.apache.hadoop.hbase.RegionTooBusyException: injected" in one_line(busy)
    assert store.count() == 1
    assert store.upsert([record(2), record(3)]) == []
    assert store.count() == 3


@pytest.mark.parametrize("mode", MODES[::3], ids=["-".join(m) for m in MODES[::3]])
def test_a_record_over_the_gateways_cell_limit_is_refused_alone(mode: tuple[str, str]) -> None:
    with HBaseServer(*mode, max_cell_bytes=256 * 1024) as hbase:  # a cluster configured below ours
        store = open_store(hbase)
        too_big = record(5, text=random_html(300 * 1024))
        batch = [record(i) for i in range(5)] + [too_big] + [record(i) for i in range(6, 10)]
        failures = store.upsert(batch)
        assert [f.fingerprint for f in failures] == [too_big.fingerprint]
        assert failures[0].reason.startswith("IllegalArgument: java.lang.IllegalArgumentException: "
                                             "KeyValue size too large")
        assert "\n" not in failures[0].reason
        assert store.count() == 9 and store.get(too_big.fingerprint) is None
        store.close()


def test_records_that_cannot_be_encoded_are_refused_before_sending(buffered: HBaseServer) -> None:
    store = open_store(buffered)
    no_host = PageRecord(url="http:///nohost", fingerprint="f-no-host", crawl_id="c1", depth=0, fetched_at="x")
    not_json = record(2, meta={"when": object()})
    failures = store.upsert([record(1), no_host, not_json, record(3)])
    assert [f.fingerprint for f in failures] == ["f-no-host", not_json.fingerprint]
    assert failures[0].reason.startswith("url: ") and failures[1].reason.startswith("meta: ")
    assert store.count() == 2
    assert store.upsert([no_host]) == [RecordFailure("f-no-host", failures[0].reason)]
    store.close()


def test_a_table_without_our_families_is_store_unavailable(buffered: HBaseServer) -> None:
    conn = happybase.Connection(buffered.host, buffered.port)
    conn.create_table("pages", {"f": {}})
    store = open_store(buffered)
    with pytest.raises(StoreUnavailable, match="lacks column families c, i, l") as refused:
        store.upsert([record(1)])
    one_line(refused)
    conn.close()
    store.close()


def test_a_table_dropped_under_the_store_is_created_again(buffered: HBaseServer) -> None:
    store = open_store(buffered)
    assert store.upsert([record(1)]) == []
    conn = happybase.Connection(buffered.host, buffered.port)
    conn.delete_table("pages", disable=True)
    with pytest.raises(StoreUnavailable, match="TableNotFoundException"):
        store.upsert([record(2)])
    assert store.upsert([record(2)]) == []  # the next call creates it again
    assert store.count() == 1
    conn.close()
    store.close()


def test_describe_error_decodes_thrift_messages_to_one_line() -> None:
    internal = TApplicationException(TApplicationException.INTERNAL_ERROR, b"Internal error processing mutateRows")
    with pytest.raises(TypeError):
        str(internal)  # why describe_error never calls str() first
    assert describe_error(internal) == "TApplicationException: Internal error processing mutateRows"
    io = Hbase_thrift.IOError(message=b"java.io.IOException: boom\n\tat Foo.bar(Foo.java:1)")
    assert describe_error(io) == "IOError: java.io.IOException: boom"
    assert describe_error(TTransportException(TTransportException.END_OF_FILE, "TSocket read 0 bytes")) == (
        "TTransportException: TSocket read 0 bytes")
    assert describe_error(TApplicationException(TApplicationException.UNKNOWN)).startswith("TApplicationException")
    assert describe_error(ConnectionRefusedError(111, "Connection refused")) == (
        "ConnectionRefusedError: [Errno 111] Connection refused")


# -- threads, tables, connections ---------------------------------------------


def test_eight_threads_upsert_through_one_store(hbase: HBaseServer) -> None:
    store = open_store(hbase, pool=4)

    def work(i: int) -> None:
        for j in range(25):
            batch = [record(i * 1000 + j * 2, body=f"<p>{i} {j}</p>"), record(i * 1000 + j * 2 + 1)]
            assert store.upsert(batch) == []
            assert hbase.connections() <= 4

    assert run_threads(8, work) == []
    assert store.count("c1") == 400
    assert store.get(record(7024).fingerprint) == record(7024, body="<p>7 12</p>")
    assert store.get(record(7025).fingerprint) == record(7025)
    store.close()


def test_workers_creating_the_table_at_once_all_go_on(buffered: HBaseServer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    listed = threading.Barrier(6)
    tables = happybase.Connection.tables

    def tables_then_wait(conn: happybase.Connection) -> list[bytes]:
        names = tables(conn)
        listed.wait(10)  # every worker has seen "no table" before any creates it
        return names

    monkeypatch.setattr(happybase.Connection, "tables", tables_then_wait)
    stores = [open_store(buffered) for _ in range(6)]
    assert run_threads(6, lambda i: stores[i].upsert([record(i)])) == []
    assert buffered.model.table_names() == [b"pages"]
    assert buffered.calls.count("createTable") == 6  # five got AlreadyExists and went on
    assert stores[0].count() == 6
    for s in stores:
        s.close()


def test_prefix_option_prefixes_the_table(buffered: HBaseServer) -> None:
    store = open_store(buffered, table="crawl", prefix="tenant1")
    assert store.upsert([record(1)]) == []
    assert buffered.model.table_names() == [b"tenant1_crawl"]
    assert store.get(record(1).fingerprint) == record(1)
    store.close()


def test_a_forked_child_builds_its_own_pool_and_leaves_the_parents_alone(buffered: HBaseServer) -> None:
    store = open_store(buffered)
    assert store.upsert([record(1)]) == []
    assert buffered.connections() == 1

    def child() -> None:
        assert store.upsert([record(2)]) == []  # on a pool of its own
        gc.collect()  # the inherited pool must not be collected: closing it would cut the parent's socket

    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join(30)
    assert process.exitcode == 0
    deadline = time.monotonic() + 5
    while buffered.connections() > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert buffered.connections() == 1  # the child's went with it; the parent's is still open
    assert store.count() == 2
    store.close()


def test_close_releases_the_pool(hbase: HBaseServer) -> None:
    store = open_store(hbase)
    assert store.upsert([record(1)]) == []
    assert hbase.connections() >= 1
    store.close()
    deadline = time.monotonic() + 5
    while hbase.connections() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hbase.connections() == 0
    assert store.count() == 1  # a later call opens a new pool
    store.close()


# -- URIs ---------------------------------------------------------------------


def test_uri_options() -> None:
    assert parse_uri("hbase://hb.example:9091/pages") == {"host": "hb.example", "port": 9091, "table": "pages"}
    assert parse_uri("hbase://hb/ns:pages/?transport=framed&protocol=compact&prefix=t1&pool=3") == {
        "host": "hb", "port": 9090, "table": "ns:pages", "transport": "framed", "protocol": "compact",
        "prefix": "t1", "pool_size": 3}
    store = HBaseStore.from_uri("HBASE://hb/pages?pool=2")
    assert (store.host, store.port, store.table, store.transport, store.protocol, store.pool_size) == (
        "hb", 9090, "pages", "buffered", "binary", 2)


@pytest.mark.parametrize(("uri", "says"), [
    ("hbase://hb:9090", "no table"),
    ("hbase://hb:9090/", "no table"),
    ("hbase://hb:99999/t", "bad port"),
    ("hbase://hb:port/t", "bad port"),
    ("hbase://hb:0/t", "port: 0"),
    ("hbase:///t", "no host"),
    ("hbase://hb/a/b", "table: 'a/b'"),
    ("hbase://hb/bad name", "table: 'bad name'"),
    ("hbase://u:pw@hb/t", "credentials"),
    ("hbase://hb/t#x", "fragment"),
    ("hbase://hb/t?transprot=framed", "unknown option 'transprot' (did you mean transport?)"),
    ("hbase://hb/t?transport=http", "transport: 'http' is not one of buffered, framed"),
    ("hbase://hb/t?protocol=json", "protocol: 'json' is not one of binary, compact"),
    ("hbase://hb/t?pool=0", "pool: 0 is not between 1 and"),
    ("hbase://hb/t?pool=many", "pool: 'many' is not a whole number"),
    ("hbase://hb/t?prefix=", "prefix: ''"),
    ("hbase://hb/t?pool=2&pool=3", "option 'pool' given twice"),
    ("hbase://hb/t?framed", "bad query"),
    ("hbase://hb/t x", "table: 't x'"),
    ("http://hb/t", "expected hbase://"),
])
def test_malformed_uris_are_unknown_store_in_one_line(uri: str, says: str) -> None:
    with pytest.raises(UnknownStore) as refused:
        HBaseStore.from_uri(uri)
    message = one_line(refused)
    assert message.startswith(f"hbase store {uri.replace(':pw@', ':***@')!r}: ")
    assert says in message and ":pw@" not in message

