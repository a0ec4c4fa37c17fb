"""The HBase Thrift test server, driven by the real happybase client.

Every test runs in each of happybase's four wire modes (buffered or framed
transport, binary or compact protocol). No Redis, no RabbitMQ.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator

import happybase
import Hbase_thrift  # happybase loads its Hbase.thrift under this name
import pytest
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TTransportException

from tests.fakes.hbase_server import DEFAULT_MAX_CELL_BYTES, HBaseServer, keyvalue_size

MODES = [("buffered", "binary"), ("buffered", "compact"), ("framed", "binary"), ("framed", "compact")]
FAMILIES = {"meta": {}, "content": {"max_versions": 1}, "links": {"max_versions": 5}}
#: What happybase raises when the gateway is unreachable or drops the connection.
TRANSPORT_ERRORS = (TTransportException, OSError)
MIB = 1024 * 1024


@pytest.fixture(params=MODES, ids=["-".join(m) for m in MODES])
def mode(request: pytest.FixtureRequest) -> tuple[str, str]:
    """One (transport, protocol) pair."""
    return request.param


@pytest.fixture
def hbase(mode: tuple[str, str]) -> Iterator[HBaseServer]:
    """A running test gateway in the given mode."""
    with HBaseServer(*mode) as server:
        yield server


def connect(server: HBaseServer, **kwargs: object) -> happybase.Connection:
    """A happybase connection speaking the server's transport and protocol."""
    return happybase.Connection(server.host, server.port, transport=server.transport,
                                protocol=server.protocol, timeout=5000, **kwargs)


@pytest.fixture
def conn(hbase: HBaseServer) -> Iterator[happybase.Connection]:
    """A connection with a ``pages`` table of three families."""
    connection = connect(hbase)
    connection.create_table("pages", FAMILIES)
    yield connection
    connection.close()


def test_create_table_with_three_families(hbase: HBaseServer, conn: happybase.Connection) -> None:
    families = conn.table("pages").families()
    assert conn.tables() == [b"pages"]
    assert sorted(families) == [b"content", b"links", b"meta"]
    assert families[b"links"]["max_versions"] == 5
    assert conn.is_table_enabled("pages")
    with pytest.raises(Hbase_thrift.AlreadyExists):
        conn.create_table("pages", {"meta": {}})
    assert [r["start_key"] for r in conn.table("pages").regions()] == [b""]
    with pytest.raises(Hbase_thrift.IOError, match="TableNotDisabledException"):
        conn.delete_table("pages")
    conn.delete_table("pages", disable=True)
    assert conn.tables() == []
    assert hbase.calls[:1] == ["createTable"]


def test_put_and_read_back(hbase: HBaseServer, conn: happybase.Connection) -> None:
    table = conn.table("pages")
    table.put(b"com.example/a", {b"meta:status": b"200", b"content:body": b"<html>a</html>"})
    table.put(b"com.example/b", {b"meta:status": b"404", b"links:0": b"http://example.com/a"})
    assert table.row(b"com.example/a") == {b"meta:status": b"200", b"content:body": b"<html>a</html>"}
    assert table.row(b"com.example/a", columns=[b"meta"]) == {b"meta:status": b"200"}
    assert table.row(b"com.example/b", columns=[b"links:0"]) == {b"links:0": b"http://example.com/a"}
    assert table.row(b"missing") == {}
    rows = table.rows([b"com.example/b", b"missing", b"com.example/a"])
    assert [key for key, _ in rows] == [b"com.example/b", b"com.example/a"]  # missing rows are left out
    value, ts = table.row(b"com.example/a", include_timestamp=True)[b"meta:status"]
    assert value == b"200" and ts > 1_500_000_000_000
    table.delete(b"com.example/a", columns=[b"content:body"])
    assert table.row(b"com.example/a") == {b"meta:status": b"200"}
    table.delete(b"com.example/b")
    assert table.row(b"com.example/b") == {}
    assert table.counter_inc(b"stats", b"meta:pages", 3) == 3
    assert table.counter_inc(b"stats", b"meta:pages") == 4
    assert table.row(b"stats") == {b"meta:pages": struct.pack(">q", 4)}
    assert hbase.dump("pages") == {b"com.example/a": {b"meta:status": b"200"},
                                   b"stats": {b"meta:pages": struct.pack(">q", 4)}}
    assert "getRowWithColumns" in hbase.calls and "getRowsWithColumns" in hbase.calls


def test_versions_and_timestamps(conn: happybase.Connection) -> None:
    table = conn.table("pages")
    for ts in (10, 20, 30):
        table.put(b"r", {b"links:0": b"v%d" % ts, b"content:body": b"b%d" % ts}, timestamp=ts)
    assert table.cells(b"r", b"links:0", include_timestamp=True) == [(b"v30", 30), (b"v20", 20), (b"v10", 10)]
    assert table.cells(b"r", b"content:body") == [b"b30"]  # max_versions=1
    assert table.row(b"r", timestamp=25) == {b"links:0": b"v20"}
    table.delete(b"r", columns=[b"links:0"])
    assert table.cells(b"r", b"links:0") == []


def test_batch_of_1000_puts_is_one_mutate_rows(hbase: HBaseServer, conn: happybase.Connection) -> None:
    table = conn.table("pages")
    hbase.clear_calls()
    with table.batch() as batch:
        for i in range(1000):
            batch.put(b"row-%04d" % (999 - i), {b"meta:n": b"%d" % i, b"content:body": b"x" * 100})
    assert hbase.calls == ["mutateRows"]
    sent = hbase.requests[0].args["rowBatches"]
    assert len(sent) == 1000 and {len(b.mutations) for b in sent} == {2}
    keys = [key for key, _ in table.scan()]
    assert keys == [b"row-%04d" % i for i in range(1000)]
    hbase.clear_calls()
    with table.batch(batch_size=400) as batch:  # batch_size counts mutations, not rows
        for i in range(300):
            batch.delete(b"row-%04d" % i, columns=[b"meta:n", b"content:body"])
    assert hbase.calls == ["mutateRows", "mutateRows"]
    assert len(list(table.scan())) == 700


def test_scans_by_prefix_and_range_in_key_order(hbase: HBaseServer, conn: happybase.Connection) -> None:
    table = conn.table("pages")
    keys = [b"com.example.www/b", b"com.example/a", b"com.example/c", b"org.example/a", b"com.examplf/z",
            b"com.example/b", b"net.example/"]
    with table.batch() as batch:
        for key in keys:
            batch.put(key, {b"meta:url": key, b"links:0": b"l"})
    assert [k for k, _ in table.scan()] == sorted(keys)
    assert [k for k, _ in table.scan(row_prefix=b"com.example/")] == [
        b"com.example/a", b"com.example/b", b"com.example/c"]
    assert [k for k, _ in table.scan(row_start=b"com.example/b", row_stop=b"net")] == [
        b"com.example/b", b"com.example/c", b"com.examplf/z"]
    assert [k for k, _ in table.scan(row_start=b"net.example/")] == [b"net.example/", b"org.example/a"]
    assert [k for k, _ in table.scan(row_prefix=b"com.", limit=2)] == [b"com.example.www/b", b"com.example/a"]
    assert [k for k, _ in table.scan(row_stop=b"com.example/b", reverse=True)] == [
        b"org.example/a", b"net.example/", b"com.examplf/z", b"com.example/c"]
    assert [r for _, r in table.scan(row_prefix=b"org.", columns=[b"meta"])] == [{b"meta:url": b"org.example/a"}]
    hbase.clear_calls()
    assert len(list(table.scan(batch_size=3))) == 7
    # 3 + 3 + 1 rows, then an empty batch: happybase stops only on an empty one
    assert hbase.calls == ["scannerOpenWithScan"] + ["scannerGetList"] * 4 + ["scannerClose"]
    assert [len(r) for _, r in table.scan(row_prefix=b"com.example/a", scan_batching=1)] == [1, 1]
    assert hbase.handler.open_scanners() == 0


def test_put_to_unknown_family_fails(hbase: HBaseServer, conn: happybase.Connection) -> None:
    table = conn.table("pages")
    with pytest.raises(Hbase_thrift.IOError) as failed:
        table.put(b"r1", {b"nope:x": b"1"})
    assert b"NoSuchColumnFamilyException: Column family nope does not exist" in failed.value.message
    with pytest.raises(Hbase_thrift.IOError), table.batch() as batch:
        batch.put(b"good", {b"meta:x": b"1"})  # the batch's other rows are written, as in HBase
        batch.put(b"bad", {b"meta:x": b"1", b"nope:x": b"1"})
    assert hbase.dump("pages") == {b"good": {b"meta:x": b"1"}}
    with pytest.raises(Hbase_thrift.IOError, match="TableNotFoundException"):
        conn.table("nosuch").put(b"r", {b"meta:x": b"1"})
    with pytest.raises(TApplicationException) as internal:  # a put without a qualifier
        table.put(b"r", {b"meta": b"1"})
    assert internal.value.message == b"Internal error processing mutateRows"
    with pytest.raises(TypeError):  # happybase leaves the message as bytes, and __str__ returns it
        str(internal.value)
    assert table.row(b"good") == {b"meta:x": b"1"}  # the connection is still usable


def test_cell_size_limit_is_hbase_keyvalue_maxsize(mode: tuple[str, str]) -> None:
    with HBaseServer(*mode, max_frame_bytes=32 * MIB) as hbase:  # a gateway run with a 32 MB frame size
        conn = connect(hbase)
        conn.create_table("pages", FAMILIES)
        table = conn.table("pages")
        row, column = b"r", b"content:body"
        fits = DEFAULT_MAX_CELL_BYTES - keyvalue_size(row, column, b"")
        table.put(row, {column: b"a" * fits})
        assert keyvalue_size(row, column, b"a" * fits) == 10 * MIB
        for size in (fits + 1, 10 * MIB, 10 * MIB + 1):  # a value of exactly 10 MiB does not fit either
            with pytest.raises(Hbase_thrift.IllegalArgument) as refused:
                table.put(row, {column: b"b" * size})
            assert b"java.lang.IllegalArgumentException: KeyValue size too large" in refused.value.message
        assert table.row(row) == {column: b"a" * fits}
        conn.close()


@pytest.mark.parametrize("protocol", ["binary", "compact"])
def test_framed_gateway_drops_frames_over_2_mb(protocol: str) -> None:
    with HBaseServer("framed", protocol) as hbase:
        conn = connect(hbase)
        conn.create_table("pages", FAMILIES)
        with pytest.raises(TRANSPORT_ERRORS):
            conn.table("pages").put(b"r", {b"content:body": b"x" * (3 * MIB)})
        conn = connect(hbase)  # a fresh connection works; the dropped one stays broken
        conn.table("pages").put(b"r", {b"content:body": b"x" * MIB})
        assert len(conn.table("pages").row(b"r")[b"content:body"]) == MIB


def test_connection_pool_from_8_threads(hbase: HBaseServer, conn: happybase.Connection) -> None:
    pool = happybase.ConnectionPool(4, host=hbase.host, port=hbase.port, transport=hbase.transport,
                                    protocol=hbase.protocol, timeout=5000)
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(n: int) -> None:
        try:
            start.wait()
            for i in range(50):
                with pool.connection() as c:
                    table = c.table("pages")
                    table.put(b"t%d-%02d" % (n, i), {b"meta:n": b"%d" % n})
                    assert table.row(b"t%d-%02d" % (n, i)) == {b"meta:n": b"%d" % n}
                    assert hbase.connections() <= 5  # the pool's four and the fixture's one
        except BaseException as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert len(list(conn.table("pages").scan())) == 400


def test_down_and_up(hbase: HBaseServer, conn: happybase.Connection) -> None:
    table = conn.table("pages")
    table.put(b"r", {b"meta:x": b"1"})
    hbase.down()
    with pytest.raises(TTransportException, match="read 0 bytes"):  # the open connection was closed
        table.put(b"r", {b"meta:x": b"2"})
    with pytest.raises(BrokenPipeError):  # happybase raises the socket's own error too
        table.put(b"r", {b"meta:x": b"3"})
    with pytest.raises(TTransportException, match="Could not connect"):
        connect(hbase)
    hbase.up()
    with pytest.raises(BrokenPipeError):  # happybase never reconnects a dropped connection
        table.row(b"r")
    assert connect(hbase).table("pages").row(b"r") == {b"meta:x": b"1"}  # a new one sees the data


def test_reopening_a_dropped_connection_replays_the_failed_call(hbase: HBaseServer,
                                                                conn: happybase.Connection) -> None:
    """happybase's trap: close()/open() keeps the transport's buffers.

    A call whose write failed stays in the write buffer and goes out with the
    next call after ``open()``; from then on every reply answers the call
    before it. A store must build a new Connection (or let ConnectionPool
    refresh it) after a transport error, never reopen the old one.
    """
    table = conn.table("pages")
    table.put(b"r", {b"meta:x": b"1"})
    hbase.down()
    with pytest.raises(TRANSPORT_ERRORS):
        table.put(b"r", {b"meta:x": b"2"})
    with pytest.raises(BrokenPipeError):
        table.put(b"r", {b"meta:x": b"3"})
    hbase.up()
    conn.close()
    conn.open()
    with pytest.raises(TApplicationException):  # this row() read the replayed put's reply
        table.row(b"r")
    assert hbase.dump("pages") == {b"r": {b"meta:x": b"3"}}  # the put that raised was written after all
    assert table.row(b"no-such-row") == {b"meta:x": b"3"}  # and this is row() of b"r", one call late


def test_pool_recovers_after_down_and_up(hbase: HBaseServer, conn: happybase.Connection) -> None:
    pool = happybase.ConnectionPool(2, host=hbase.host, port=hbase.port, transport=hbase.transport,
                                    protocol=hbase.protocol, timeout=5000)
    hbase.down()
    with pytest.raises(TTransportException, match="Could not connect"), pool.connection() as c:
        c.table("pages").put(b"r", {b"meta:x": b"1"})  # the pool refreshes, fails to reconnect
    hbase.up()
    with pool.connection() as c:
        c.table("pages").put(b"r", {b"meta:x": b"1"})
        assert c.table("pages").row(b"r") == {b"meta:x": b"1"}


def test_fail_next_makes_mutations_raise_ioerror(hbase: HBaseServer, conn: happybase.Connection) -> None:
    table = conn.table("pages")
    hbase.fail_next(2)
    for attempt in range(2):
        with pytest.raises(Hbase_thrift.IOError) as failed, table.batch() as batch:
            batch.put(b"r%d" % attempt, {b"meta:x": b"1"})
        assert b"RegionTooBusyException" in failed.value.message
    assert table.row(b"r0") == {}  # reads are not affected, and nothing was written
    table.put(b"r2", {b"meta:x": b"1"})
    assert hbase.dump("pages") == {b"r2": {b"meta:x": b"1"}}
    assert hbase.calls.count("mutateRows") == 3


def test_raw_thrift_calls(hbase: HBaseServer, conn: happybase.Connection) -> None:
    client = conn.client
    conn.table("pages").put(b"r1", {b"meta:a": b"1", b"links:0": b"x"})
    conn.table("pages").put(b"r2", {b"meta:a": b"2"})
    assert [r.row for r in client.getRow(b"pages", b"r1", {})] == [b"r1"]
    assert [r.row for r in client.getRows(b"pages", [b"r2", b"r9", b"r1"], {})] == [b"r2", b"r1"]
    assert [c.value for c in client.get(b"pages", b"r1", b"meta:a", {})] == [b"1"]
    scanner = client.scannerOpenWithPrefix(b"pages", b"r", [b"meta"], {})
    found = client.scannerGetList(scanner, 10)
    assert [(r.row, {c: cell.value for c, cell in r.columns.items()}) for r in found] == [
        (b"r1", {b"meta:a": b"1"}), (b"r2", {b"meta:a": b"2"})]
    client.scannerClose(scanner)
    with pytest.raises(Hbase_thrift.IllegalArgument, match="scanner ID is invalid"):
        client.scannerGetList(scanner, 1)
    client.deleteAllRow(b"pages", b"r1", {})
    assert client.getRow(b"pages", b"r1", {}) == []
    with pytest.raises(TApplicationException) as unknown:
        client.getRowOrBefore(b"pages", b"r2", b"meta")
    assert unknown.value.message == b"getRowOrBefore is not implemented by the HBase test server"
    assert conn.table("pages").row(b"r2") == {b"meta:a": b"2"}  # still in step after the errors


def test_compat_090_scanners(hbase: HBaseServer, conn: happybase.Connection) -> None:
    old = connect(hbase, compat="0.90")
    table = old.table("pages")
    with table.batch() as batch:
        for key in (b"a", b"b", b"c", b"d"):
            batch.put(key, {b"meta:k": key})
    assert [k for k, _ in table.scan(row_start=b"b")] == [b"b", b"c", b"d"]
    assert [k for k, _ in table.scan(row_start=b"b", row_stop=b"d")] == [b"b", b"c"]
    assert {"scannerOpen", "scannerOpenWithStop"} <= set(hbase.calls)
