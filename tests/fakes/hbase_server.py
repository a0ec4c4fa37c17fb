"""A protocol-level HBase Thrift (v1) gateway for tests, served on 127.0.0.1.

It speaks the ``Hbase`` service of HBase's Thrift gateway, loaded with thriftpy2
from the very ``Hbase.thrift`` that happybase ships, so the real happybase client
talks to it as to ``hbase thrift start``. Behind it is an in-memory HBase:
tables with column families, sorted rows, versioned cells and scanners.

Where the real gateway's behaviour is surprising, this one copies it (see the
HBase 2.x ``ThriftHBaseServiceHandler`` and ``ThriftServer``):

* a put is refused when a cell's *KeyValue* is larger than
  ``hbase.client.keyvalue.maxsize`` (10 MiB): the KeyValue is the value plus the
  row, family and qualifier plus 20 bytes, so a value of exactly 10 MiB is
  refused (``IllegalArgument: java.lang.IllegalArgumentException: KeyValue size
  too large``); use :func:`keyvalue_size` to find what fits;
* the framed transport refuses a frame over
  ``hbase.regionserver.thrift.framed.max_frame_size_in_mb`` (2 MiB by default)
  by dropping the connection, so a client sees a transport error, not an IOError;
* ``mutateRows`` (what every happybase put, delete and ``batch()`` sends) writes
  all puts, then all deletes, row by row: a row naming an unknown family fails on
  its own (``IOError: ...RetriesExhaustedWithDetailsException...``) while the
  other rows are written;
* errors carry the Java exception text the gateway sends, as ``message``.

Not modelled: filters (``filterString``), TTLs, delete markers that hide later
puts with older timestamps, ``append``, ``checkAndPut``, ``getRowOrBefore``,
``getRegionInfo``, security, the HTTP transport, and any message-size cap of
newer libthrift versions.

Usage::

    with HBaseServer(transport="framed", protocol="compact") as hbase:
        conn = happybase.Connection(hbase.host, hbase.port, transport="framed", protocol="compact")
        ...
        hbase.calls        # ["createTable", "mutateRows", ...]
        hbase.requests     # the same, with arguments (rowBatches, rows, scans)
        hbase.dump("t")    # {row: {b"cf:q": latest value}}
        hbase.fail_next(2) # the next two mutate calls raise IOError
        hbase.down(); hbase.up()

happybase traps these tests pin (tests/fakes/test_hbase_server.py): errors are
thriftpy2 objects whose ``message`` is bytes (``str()`` of a
TApplicationException raises TypeError); a dropped connection raises
TTransportException or a bare BrokenPipeError and is never reconnected; and
``close()`` then ``open()`` on it resends the call whose write failed and
leaves every later reply one call late: build a new Connection instead (as
ConnectionPool does).
"""

from __future__ import annotations

import bisect
import hashlib
import importlib.util
import itertools
import logging
import re
import socket
import struct
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from io import BytesIO
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple, Self

import thriftpy2
from thriftpy2.protocol import TCompactProtocolFactory, TCyBinaryProtocolFactory
from thriftpy2.protocol.binary import TBinaryProtocolFactory
from thriftpy2.thrift import TApplicationException, TProcessor, TType
from thriftpy2.transport import TCyBufferedTransportFactory, TSocket, TTransportException
from thriftpy2.transport.base import TTransportBase

log = logging.getLogger(__name__)

#: ``hbase.client.keyvalue.maxsize``'s default.
DEFAULT_MAX_CELL_BYTES = 10 * 1024 * 1024
#: ``hbase.regionserver.thrift.framed.max_frame_size_in_mb``'s default (2 MB).
DEFAULT_MAX_FRAME_BYTES = 2 * 1024 * 1024
#: A KeyValue's bytes beyond row, family, qualifier and value (8 + 12).
KEYVALUE_OVERHEAD = 20
#: ``HConstants.LATEST_TIMESTAMP``: "now", as happybase sends no timestamp.
LATEST_TIMESTAMP = 2**63 - 1
#: The Thrift methods ``fail_next`` makes fail.
MUTATE_METHODS = frozenset({"mutateRow", "mutateRowTs", "mutateRows", "mutateRowsTs"})
MAX_ROW_LENGTH = 32767
TABLE_NAME = re.compile(rb"(?:[A-Za-z0-9_]+:)?[A-Za-z0-9_][A-Za-z0-9_.-]*")
REGION_SERVER = "127.0.0.1,16020,1"
ACCEPT_POLL_S = 0.05

Versions = list[tuple[int, bytes]]  # (timestamp, value), newest first
Cells = dict[bytes, Versions]  # b"family:qualifier" -> versions
Found = list[tuple[bytes, list[tuple[bytes, int, bytes]]]]  # [(row, [(column, timestamp, value)])]


def keyvalue_size(row: bytes, column: bytes, value: bytes) -> int:
    """Bytes a cell takes as a KeyValue: what ``hbase.client.keyvalue.maxsize`` limits."""
    family, qualifier = parse_column(column)
    return KEYVALUE_OVERHEAD + len(row) + len(family) + len(qualifier or b"") + len(value)


def parse_column(column: bytes) -> tuple[bytes, bytes | None]:
    """Split ``family:qualifier`` at the first colon (``CellUtil.parseColumn``)."""
    family, colon, qualifier = column.partition(b":")
    return family, (qualifier if colon else None)


def now_ms() -> int:
    """The server's clock, in milliseconds, as HBase stamps cells."""
    return time.time_ns() // 1_000_000


@lru_cache(maxsize=1)
def hbase_thrift() -> ModuleType:
    """happybase's own ``Hbase.thrift``, loaded with thriftpy2."""
    spec = importlib.util.find_spec("happybase")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("happybase is not installed")
    idl = Path(next(iter(spec.submodule_search_locations))) / "Hbase.thrift"
    return thriftpy2.load(str(idl), module_name="hbase_test_server_thrift")


class HBaseError(Exception):
    """An error the gateway reports; ``kind`` picks the Thrift exception."""

    def __init__(self, kind: str, text: str) -> None:
        super().__init__(text)
        self.kind = kind  # "io", "illegal", "exists" or "internal"
        self.text = text


def io_error(java_class: str, message: str) -> HBaseError:
    """An ``IOError`` whose message is the Java exception's text."""
    return HBaseError("io", f"{java_class}: {message}")


def illegal(message: str) -> HBaseError:
    """An ``IllegalArgument`` from a ``java.lang.IllegalArgumentException``."""
    return HBaseError("illegal", f"java.lang.IllegalArgumentException: {message}")


def internal(reason: str) -> HBaseError:
    """An exception the gateway does not catch: Thrift sends INTERNAL_ERROR."""
    return HBaseError("internal", reason)


def no_such_family(table: _Table, family: bytes) -> HBaseError:
    """``NoSuchColumnFamilyException`` as the region server words it."""
    return io_error("org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException",
                    f"Column family {family.decode(errors='replace')} does not exist in region "
                    f"{table.region_name()} in table '{table.display}'")


def retries_exhausted(failures: list[tuple[bytes, HBaseError]]) -> HBaseError:
    """A batch whose actions failed: ``RetriesExhaustedWithDetailsException``."""
    n = len(failures)
    first = failures[0][1].text
    return io_error("org.apache.hadoop.hbase.client.RetriesExhaustedWithDetailsException",
                    f"Failed {n} action{'s' if n > 1 else ''}: {first}: {n} time{'s' if n > 1 else ''}, "
                    f"servers with issues: {REGION_SERVER}")


def row_error(row: bytes) -> HBaseError | None:
    """What ``new Put(row)`` throws for an unusable row key, if anything."""
    if not row:
        return illegal("Row length is 0")
    if len(row) > MAX_ROW_LENGTH:
        return illegal(f"Row length {len(row)} is > {MAX_ROW_LENGTH}")
    return None


class Selector:
    """Which columns a Get or Scan asked for (``None``: all of them)."""

    def __init__(self, table: _Table, columns: Iterable[bytes] | None) -> None:
        self.families: set[bytes] = set()
        self.columns: set[bytes] = set()
        self.everything = not columns
        for column in columns or ():
            family, qualifier = parse_column(column)
            if family not in table.families:
                raise no_such_family(table, family)
            if qualifier is None:
                self.families.add(family)
            else:
                self.columns.add(column)

    def wants(self, column: bytes) -> bool:
        """Whether a stored column is selected."""
        return self.everything or column in self.columns or parse_column(column)[0] in self.families


@dataclass
class _Table:
    """One table: its families, enabled flag and rows."""

    name: bytes
    descriptors: dict[bytes, Any]  # family -> ColumnDescriptor, named b"family:"
    created_ms: int = field(default_factory=now_ms)
    enabled: bool = True
    rows: dict[bytes, Cells] = field(default_factory=dict)
    _sorted: list[bytes] | None = None

    @property
    def display(self) -> str:
        """The table name as Java prints it."""
        return self.name.decode(errors="replace")

    @property
    def families(self) -> dict[bytes, Any]:
        """Family name (no colon) -> descriptor."""
        return self.descriptors

    def region_name(self) -> str:
        """The one region's name, ``table,,createdms.encoded.``."""
        encoded = hashlib.md5(b"%s,,%d" % (self.name, self.created_ms)).hexdigest()
        return f"{self.display},,{self.created_ms}.{encoded}."

    def max_versions(self, family: bytes) -> int:
        """Versions kept per cell in a family."""
        return max(1, int(self.descriptors[family].maxVersions or 1))

    def sorted_keys(self) -> list[bytes]:
        """Row keys in byte order (cached until a row appears or goes)."""
        if self._sorted is None:
            self._sorted = sorted(self.rows)
        return self._sorted

    def row_for_write(self, row: bytes) -> Cells:
        """A row's cells, creating the row if needed."""
        cells = self.rows.get(row)
        if cells is None:
            cells = self.rows[row] = {}
            self._sorted = None
        return cells

    def drop_if_empty(self, row: bytes) -> None:
        """Forget a row whose last cell went."""
        if row in self.rows and not self.rows[row]:
            del self.rows[row]
            self._sorted = None


@dataclass
class _Scanner:
    """An open scanner: a snapshot of its results and a cursor."""

    results: Found
    sort_columns: bool
    position: int = 0

    def take(self, n: int) -> Found:
        """The next ``n`` results."""
        chunk = self.results[self.position:self.position + max(n, 0)]
        self.position += len(chunk)
        return chunk


class RowPut(NamedTuple):
    """The puts and deletes one row of a mutation carries."""

    row: bytes
    puts: list[tuple[bytes, bytes]]  # (column, value)
    deletes: list[bytes]  # column, or bare family


class HBaseModel:
    """In-memory HBase: tables, rows, versioned cells; thread-safe."""

    def __init__(self, max_cell_bytes: int = DEFAULT_MAX_CELL_BYTES) -> None:
        self.max_cell_bytes = max_cell_bytes
        self._tables: dict[bytes, _Table] = {}
        self._lock = threading.RLock()

    # -- tables ---------------------------------------------------------

    def table(self, name: bytes, *, enabled: bool = True) -> _Table:
        """A table by name; ``enabled`` requires it to be enabled."""
        table = self._tables.get(name)
        if table is None:
            raise io_error("org.apache.hadoop.hbase.TableNotFoundException", name.decode(errors="replace"))
        if enabled and not table.enabled:
            raise io_error("org.apache.hadoop.hbase.TableNotEnabledException", f"{table.display} is disabled.")
        return table

    def create_table(self, name: bytes, descriptors: list[Any]) -> None:
        """Create a table from ColumnDescriptors (names ``family`` or ``family:``)."""
        if not TABLE_NAME.fullmatch(name):
            raise internal(f"Illegal table name {name!r}")
        families: dict[bytes, Any] = {}
        for descriptor in descriptors:
            family = parse_column(descriptor.name or b"")[0]
            if not family:
                raise illegal("Column Family name can not be empty")
            if family.startswith(b"."):
                raise illegal(f"Column Family names cannot start with a period: {family.decode(errors='replace')}")
            descriptor.name = family + b":"
            families[family] = descriptor
        with self._lock:
            if name in self._tables:
                raise HBaseError("exists", "table name already in use")
            if not families:
                raise io_error("org.apache.hadoop.hbase.DoNotRetryIOException",
                               "Table should have at least one column family.")
            self._tables[name] = _Table(name, families)

    def delete_table(self, name: bytes) -> None:
        """Delete a disabled table."""
        with self._lock:
            if name not in self._tables:
                raise io_error("java.io.IOException", "table does not exist")
            if self._tables[name].enabled:
                raise io_error("org.apache.hadoop.hbase.TableNotDisabledException", name.decode(errors="replace"))
            del self._tables[name]

    def set_enabled(self, name: bytes, enabled: bool) -> None:
        """Enable or disable a table; doing it twice is an error, as in HBase."""
        with self._lock:
            table = self.table(name, enabled=False)
            if table.enabled == enabled:
                java = "TableNotDisabledException" if enabled else "TableNotEnabledException"
                raise io_error(f"org.apache.hadoop.hbase.{java}", table.display)
            table.enabled = enabled

    def is_enabled(self, name: bytes) -> bool:
        """Whether a table is enabled."""
        with self._lock:
            return self.table(name, enabled=False).enabled

    def table_names(self) -> list[bytes]:
        """All table names, sorted."""
        with self._lock:
            return sorted(self._tables)

    def descriptors(self, name: bytes) -> dict[bytes, Any]:
        """ColumnDescriptors by ``family:`` name."""
        with self._lock:
            table = self.table(name, enabled=False)
            return {d.name: d for _, d in sorted(table.descriptors.items())}

    def region(self, name: bytes) -> tuple[int, str] | None:
        """(region id, region name) of a table's single region, if it exists."""
        with self._lock:
            table = self._tables.get(name)
            return None if table is None else (table.created_ms, table.region_name())

    # -- writes ---------------------------------------------------------

    def mutate_rows(self, name: bytes, rows: list[RowPut], timestamp: int) -> None:
        """``mutateRowsTs``: validate every put, write the puts, then the deletes."""
        with self._lock:
            table = self.table(name)
            puts = [r for r in rows if r.puts]
            self._check_sizes(puts)
            failures = [(r.row, e) for r in puts if (e := self._apply_puts(table, r, timestamp))]
            if failures:
                raise retries_exhausted(failures)
            failures = [(r.row, e) for r in rows if r.deletes and (e := self._apply_deletes(table, r, timestamp))]
            if failures:
                raise retries_exhausted(failures)

    def mutate_row(self, name: bytes, change: RowPut, timestamp: int) -> None:
        """``mutateRowTs``: the row's deletes, then its puts."""
        with self._lock:
            table = self.table(name)
            if change.deletes and (error := self._apply_deletes(table, change, timestamp)):
                raise error
            if change.puts:
                self._check_sizes([change])
                if error := self._apply_puts(table, change, timestamp):
                    raise error

    def delete_row(self, name: bytes, row: bytes, column: bytes | None, timestamp: int) -> None:
        """``deleteAll``/``deleteAllRow`` (``column=None``): drop versions up to ``timestamp``."""
        with self._lock:
            table = self.table(name)
            change = RowPut(row, [], [column] if column is not None else list(table.families))
            if error := self._apply_deletes(table, change, timestamp):
                raise error

    def increment(self, name: bytes, row: bytes, column: bytes, amount: int) -> int:
        """``atomicIncrement``: add to a big-endian 8-byte counter, creating it at 0."""
        family, qualifier = parse_column(column)
        column = family + b":" + (qualifier or b"")
        with self._lock:
            table = self.table(name)
            if family not in table.families:
                raise no_such_family(table, family)
            versions = table.rows.get(row, {}).get(column) or [(0, struct.pack(">q", 0))]
            old_ts, old = versions[0]
            if len(old) != 8:
                raise io_error("org.apache.hadoop.hbase.DoNotRetryIOException",
                               f"Field is not a long, it's {len(old)} bytes wide")
            value = struct.unpack(">q", old)[0] + amount
            value = (value + 2**63) % 2**64 - 2**63  # Java long overflow
            self._store(table, row, column, max(now_ms(), old_ts + 1), struct.pack(">q", value))
            return value

    def _check_sizes(self, puts: list[RowPut]) -> None:
        """``validatePut``: refuse the lot if one cell's KeyValue is too large."""
        if self.max_cell_bytes <= 0:
            return
        for change in puts:
            for column, value in change.puts:
                size = keyvalue_size(change.row, column, value)
                if size > self.max_cell_bytes:
                    raise illegal(f"KeyValue size too large\n\tat org.apache.hadoop.hbase.client."
                                  f"ConnectionUtils.validatePut(ConnectionUtils.java)\n\t(test server: "
                                  f"cell {change.row[:64]!r}/{column!r} is {size} bytes as a KeyValue, "
                                  f"hbase.client.keyvalue.maxsize={self.max_cell_bytes})")

    def _apply_puts(self, table: _Table, change: RowPut, timestamp: int) -> HBaseError | None:
        """Write one row's puts atomically, or say why not."""
        for column, _ in change.puts:
            family = parse_column(column)[0]
            if family not in table.families:
                return no_such_family(table, family)
        ts = now_ms() if timestamp == LATEST_TIMESTAMP else timestamp
        for column, value in change.puts:
            self._store(table, change.row, column, ts, value)
        return None

    def _apply_deletes(self, table: _Table, change: RowPut, timestamp: int) -> HBaseError | None:
        """Delete one row's columns or families up to ``timestamp``, or say why not."""
        for column in change.deletes:
            family = parse_column(column)[0]
            if family not in table.families:
                return no_such_family(table, family)
        cells = table.rows.get(change.row)
        if cells is None:
            return None
        bound = now_ms() if timestamp == LATEST_TIMESTAMP else timestamp
        for column in change.deletes:
            family, qualifier = parse_column(column)
            targets = [column] if qualifier is not None else [c for c in cells if parse_column(c)[0] == family]
            for target in targets:
                kept = [v for v in cells.get(target, []) if v[0] > bound]
                if kept:
                    cells[target] = kept
                else:
                    cells.pop(target, None)
        table.drop_if_empty(change.row)
        return None

    def _store(self, table: _Table, row: bytes, column: bytes, ts: int, value: bytes) -> None:
        """Add a version; one with the same timestamp is replaced."""
        versions = table.row_for_write(row).setdefault(column, [])
        versions[:] = [v for v in versions if v[0] != ts]
        at = bisect.bisect_left([-v[0] for v in versions], -ts)
        versions.insert(at, (ts, value))
        del versions[table.max_versions(parse_column(column)[0]):]

    # -- reads ----------------------------------------------------------

    def get_rows(self, name: bytes, rows: list[bytes], columns: list[bytes] | None,
                 before: int = LATEST_TIMESTAMP, versions: int = 1) -> Found:
        """Each existing row's selected cells as (column, timestamp, value), columns sorted."""
        with self._lock:
            table = self.table(name)
            selector = Selector(table, columns)
            found = ((row, self._cells(table, row, selector, before, versions)) for row in rows)
            return [(row, cells) for row, cells in found if cells]

    def scan(self, name: bytes, start: bytes, stop: bytes | None, columns: list[bytes] | None,
             before: int = LATEST_TIMESTAMP, reverse: bool = False,
             prefix: bytes | None = None) -> Found:
        """Rows from ``start`` (inclusive) to ``stop`` (exclusive), in key order."""
        with self._lock:
            table = self.table(name)
            selector = Selector(table, columns)
            keys = self._key_range(table.sorted_keys(), start, stop, reverse)
            if prefix is not None:
                keys = itertools.takewhile(lambda k: k.startswith(prefix), keys)
            found = ((row, self._cells(table, row, selector, before, 1)) for row in keys)
            return [(row, cells) for row, cells in found if cells]

    @staticmethod
    def _key_range(keys: list[bytes], start: bytes, stop: bytes | None, reverse: bool) -> Iterator[bytes]:
        """Keys of a forward or reversed scan's range."""
        if not reverse:
            lo = bisect.bisect_left(keys, start)
            hi = bisect.bisect_left(keys, stop) if stop else len(keys)
            return iter(keys[lo:hi])
        hi = bisect.bisect_right(keys, start) if start else len(keys)
        lo = bisect.bisect_right(keys, stop) if stop else 0
        return reversed(keys[lo:hi])

    @staticmethod
    def _cells(table: _Table, row: bytes, selector: Selector, before: int,
               versions: int) -> list[tuple[bytes, int, bytes]]:
        """A row's selected cells, newest ``versions`` older than ``before``."""
        out: list[tuple[bytes, int, bytes]] = []
        for column, stored in sorted(table.rows.get(row, {}).items()):
            if selector.wants(column):
                visible = [(ts, value) for ts, value in stored if ts < before][:versions]
                out.extend((column, ts, value) for ts, value in visible)
        return out

    def dump(self, name: bytes) -> dict[bytes, dict[bytes, bytes]]:
        """Every row's latest values, for tests to inspect."""
        with self._lock:
            table = self.table(name, enabled=False)
            return {row: {c: v[0][1] for c, v in sorted(table.rows[row].items())} for row in table.sorted_keys()}


class HBaseHandler:
    """The ``Hbase`` service's methods (IDL names and arguments), over an :class:`HBaseModel`."""

    def __init__(self, model: HBaseModel) -> None:
        self.model = model
        self.thrift = hbase_thrift()
        self._scanners: dict[int, _Scanner] = {}
        self._scanner_ids = itertools.count()
        self._lock = threading.Lock()

    # -- admin ----------------------------------------------------------

    def enableTable(self, tableName: bytes) -> None:
        self.model.set_enabled(tableName, True)

    def disableTable(self, tableName: bytes) -> None:
        self.model.set_enabled(tableName, False)

    def isTableEnabled(self, tableName: bytes) -> bool:
        return self.model.is_enabled(tableName)

    def compact(self, tableNameOrRegionName: bytes) -> None:
        self.model.table(tableNameOrRegionName.split(b",")[0], enabled=False)

    def majorCompact(self, tableNameOrRegionName: bytes) -> None:
        self.compact(tableNameOrRegionName)

    def getTableNames(self) -> list[bytes]:
        return self.model.table_names()

    def getColumnDescriptors(self, tableName: bytes) -> dict[bytes, Any]:
        return self.model.descriptors(tableName)

    def getTableRegions(self, tableName: bytes) -> list[Any]:
        region = self.model.region(tableName)
        if region is None:
            return []
        region_id, name = region
        return [self.thrift.TRegionInfo(startKey=b"", endKey=b"", id=region_id, name=name.encode(),
                                   version=1, serverName=b"127.0.0.1", port=16020)]

    def createTable(self, tableName: bytes, columnFamilies: list[Any]) -> None:
        self.model.create_table(tableName, list(columnFamilies or []))

    def deleteTable(self, tableName: bytes) -> None:
        self.model.delete_table(tableName)

    # -- reads ----------------------------------------------------------

    def get(self, tableName: bytes, row: bytes, column: bytes, attributes: dict) -> list[Any]:
        return self.getVerTs(tableName, row, column, LATEST_TIMESTAMP, 1, attributes)

    def getVer(self, tableName: bytes, row: bytes, column: bytes, numVersions: int, attributes: dict) -> list[Any]:
        return self.getVerTs(tableName, row, column, LATEST_TIMESTAMP, numVersions, attributes)

    def getVerTs(self, tableName: bytes, row: bytes, column: bytes, timestamp: int, numVersions: int,
                 attributes: dict) -> list[Any]:
        found = self.model.get_rows(tableName, [row], [column], timestamp, max(numVersions, 1))
        return [self.thrift.TCell(value=v, timestamp=ts) for _, cells in found for _, ts, v in cells]

    def getRow(self, tableName: bytes, row: bytes, attributes: dict) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, [row], None, LATEST_TIMESTAMP, attributes)

    def getRowWithColumns(self, tableName: bytes, row: bytes, columns: list[bytes] | None,
                          attributes: dict) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, [row], columns, LATEST_TIMESTAMP, attributes)

    def getRowTs(self, tableName: bytes, row: bytes, timestamp: int, attributes: dict) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, [row], None, timestamp, attributes)

    def getRowWithColumnsTs(self, tableName: bytes, row: bytes, columns: list[bytes] | None, timestamp: int,
                            attributes: dict) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, [row], columns, timestamp, attributes)

    def getRows(self, tableName: bytes, rows: list[bytes], attributes: dict) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, rows, None, LATEST_TIMESTAMP, attributes)

    def getRowsWithColumns(self, tableName: bytes, rows: list[bytes], columns: list[bytes] | None,
                           attributes: dict) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, rows, columns, LATEST_TIMESTAMP, attributes)

    def getRowsTs(self, tableName: bytes, rows: list[bytes], timestamp: int, attributes: dict) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, rows, None, timestamp, attributes)

    def getRowsWithColumnsTs(self, tableName: bytes, rows: list[bytes], columns: list[bytes] | None,
                             timestamp: int, attributes: dict) -> list[Any]:
        found = self.model.get_rows(tableName, list(rows or []), columns, timestamp)
        return [self._row_result(row, cells, False) for row, cells in found]

    def _row_result(self, row: bytes, cells: list[tuple[bytes, int, bytes]], sort_columns: bool) -> Any:
        """A TRowResult: a column map, or a sorted column list for ``sortColumns``."""
        t = self.thrift
        if sort_columns:
            return t.TRowResult(row=row, sortedColumns=[
                t.TColumn(columnName=c, cell=t.TCell(value=v, timestamp=ts)) for c, ts, v in cells])
        return t.TRowResult(row=row, columns={c: t.TCell(value=v, timestamp=ts) for c, ts, v in cells})

    # -- writes ---------------------------------------------------------

    def mutateRow(self, tableName: bytes, row: bytes, mutations: list[Any], attributes: dict) -> None:
        self.mutateRowTs(tableName, row, mutations, LATEST_TIMESTAMP, attributes)

    def mutateRowTs(self, tableName: bytes, row: bytes, mutations: list[Any], timestamp: int,
                    attributes: dict) -> None:
        if error := row_error(row):
            raise error
        self.model.mutate_row(tableName, self._row_put(row, mutations or [], strict=False), timestamp)

    def mutateRows(self, tableName: bytes, rowBatches: list[Any], attributes: dict) -> None:
        self.mutateRowsTs(tableName, rowBatches, LATEST_TIMESTAMP, attributes)

    def mutateRowsTs(self, tableName: bytes, rowBatches: list[Any], timestamp: int, attributes: dict) -> None:
        changes = []
        for batch in rowBatches or []:
            if error := row_error(batch.row or b""):
                raise internal(error.text)  # thrown before the handler's try block
            changes.append(self._row_put(batch.row, batch.mutations or [], strict=True))
        self.model.mutate_rows(tableName, changes, timestamp)

    @staticmethod
    def _row_put(row: bytes, mutations: list[Any], strict: bool) -> RowPut:
        """Sort a row's Mutations into puts and deletes, as the gateway does."""
        change = RowPut(row, [], [])
        for m in mutations:
            column = m.column or b""
            if m.isDelete:
                change.deletes.append(column)
            elif parse_column(column)[1] is not None:
                change.puts.append((column, m.value if m.value is not None else b""))
            elif strict:  # mutateRowsTs throws outside its try; mutateRowTs only logs
                raise internal("Invalid famAndQf provided.")
        return change

    def atomicIncrement(self, tableName: bytes, row: bytes, column: bytes, value: int) -> int:
        return self.model.increment(tableName, row, column, value)

    def increment(self, increment: Any) -> None:
        if not increment.row or not increment.table:
            raise internal("Must supply a table and a row key; can't increment")
        self.model.increment(increment.table, increment.row, increment.column or b"", increment.ammount or 0)

    def incrementRows(self, increments: list[Any]) -> None:
        for one in increments or []:
            self.increment(one)

    def deleteAll(self, tableName: bytes, row: bytes, column: bytes, attributes: dict) -> None:
        self.model.delete_row(tableName, row, column, LATEST_TIMESTAMP)

    def deleteAllTs(self, tableName: bytes, row: bytes, column: bytes, timestamp: int, attributes: dict) -> None:
        self.model.delete_row(tableName, row, column, timestamp)

    def deleteAllRow(self, tableName: bytes, row: bytes, attributes: dict) -> None:
        self.model.delete_row(tableName, row, None, LATEST_TIMESTAMP)

    def deleteAllRowTs(self, tableName: bytes, row: bytes, timestamp: int, attributes: dict) -> None:
        self.model.delete_row(tableName, row, None, timestamp)

    # -- scanners -------------------------------------------------------

    def scannerOpenWithScan(self, tableName: bytes, scan: Any, attributes: dict) -> int:
        if scan.filterString is not None:
            raise io_error("org.apache.hadoop.hbase.DoNotRetryIOException",
                           "filterString is not supported by the HBase test server")
        results = self.model.scan(tableName, scan.startRow or b"", scan.stopRow or None, scan.columns,
                                  scan.timestamp if scan.timestamp is not None else LATEST_TIMESTAMP,
                                  reverse=bool(scan.reversed))
        if scan.batchSize:
            results = [(row, cells[i:i + scan.batchSize])
                       for row, cells in results for i in range(0, len(cells), scan.batchSize)]
        return self._add_scanner(_Scanner(results, bool(scan.sortColumns)))

    def scannerOpen(self, tableName: bytes, startRow: bytes, columns: list[bytes] | None, attributes: dict) -> int:
        return self._add_scanner(_Scanner(self.model.scan(tableName, startRow or b"", None, columns), False))

    def scannerOpenWithStop(self, tableName: bytes, startRow: bytes, stopRow: bytes, columns: list[bytes] | None,
                            attributes: dict) -> int:
        results = self.model.scan(tableName, startRow or b"", stopRow or None, columns)
        return self._add_scanner(_Scanner(results, False))

    def scannerOpenWithPrefix(self, tableName: bytes, startAndPrefix: bytes, columns: list[bytes] | None,
                              attributes: dict) -> int:
        prefix = startAndPrefix or b""
        results = self.model.scan(tableName, prefix, None, columns, prefix=prefix)
        return self._add_scanner(_Scanner(results, False))

    def scannerOpenTs(self, tableName: bytes, startRow: bytes, columns: list[bytes] | None, timestamp: int,
                      attributes: dict) -> int:
        results = self.model.scan(tableName, startRow or b"", None, columns, timestamp)
        return self._add_scanner(_Scanner(results, False))

    def scannerOpenWithStopTs(self, tableName: bytes, startRow: bytes, stopRow: bytes,
                              columns: list[bytes] | None, timestamp: int, attributes: dict) -> int:
        results = self.model.scan(tableName, startRow or b"", stopRow or None, columns, timestamp)
        return self._add_scanner(_Scanner(results, False))

    def scannerGet(self, id: int) -> list[Any]:
        return self.scannerGetList(id, 1)

    def scannerGetList(self, id: int, nbRows: int) -> list[Any]:
        with self._lock:
            scanner = self._scanners.get(id)
            if scanner is None:
                raise HBaseError("illegal", "scanner ID is invalid")
            chunk = scanner.take(nbRows)
        return [self._row_result(row, cells, scanner.sort_columns) for row, cells in chunk]

    def scannerClose(self, id: int) -> None:
        with self._lock:
            if self._scanners.pop(id, None) is None:
                raise HBaseError("illegal", "scanner ID is invalid")

    def _add_scanner(self, scanner: _Scanner) -> int:
        """Register a scanner; ids count from 0, shared by all connections."""
        with self._lock:
            scanner_id = next(self._scanner_ids)
            self._scanners[scanner_id] = scanner
            return scanner_id

    def drop_scanners(self) -> None:
        """Forget every open scanner, as a restarted gateway does."""
        with self._lock:
            self._scanners.clear()

    def open_scanners(self) -> int:
        """How many scanners are open."""
        with self._lock:
            return len(self._scanners)


class ThriftCall(NamedTuple):
    """One call the server received: method name and arguments by IDL name."""

    method: str
    args: dict[str, Any]


class _Processor(TProcessor):
    """Dispatches calls, records them, and maps :class:`HBaseError` to Thrift."""

    def __init__(self, server: HBaseServer) -> None:
        super().__init__(hbase_thrift().Hbase, server.handler)
        self._server = server

    def process(self, iprot: Any, oprot: Any) -> None:
        """Read one call, run it, write its reply."""
        api, _, seqid = iprot.read_message_begin()
        if api not in self._service.thrift_services:
            iprot.skip(TType.STRUCT)
            iprot.read_message_end()
            self._server.record(ThriftCall(api, {}))
            return self.send_exception(oprot, api, TApplicationException(TApplicationException.UNKNOWN_METHOD), seqid)
        args = getattr(self._service, api + "_args")()
        args.read(iprot)
        iprot.read_message_end()
        names = [spec[1] for spec in args.thrift_spec.values()]
        values = [getattr(args, n) for n in names]
        self._server.record(ThriftCall(api, dict(zip(names, values))))
        result = getattr(self._service, api + "_result")()
        try:
            result.success = self._call(api, values)
        except TApplicationException as exc:
            return self.send_exception(oprot, api, exc, seqid)
        except HBaseError as exc:
            if not self._declared(exc, result):
                log.warning("HBase test server: %s raised %s", api, exc.text)
                return self.send_exception(oprot, api, TApplicationException(
                    TApplicationException.INTERNAL_ERROR, f"Internal error processing {api}"), seqid)
        except Exception:
            log.exception("HBase test server: %s failed", api)
            return self.send_exception(oprot, api, TApplicationException(
                TApplicationException.INTERNAL_ERROR, f"Internal error processing {api}"), seqid)
        self.send_result(oprot, api, result, seqid)

    def _call(self, api: str, values: list[Any]) -> Any:
        """Run the handler's method (after any injected failure)."""
        method = getattr(self._handler, api, None)
        if method is None:
            raise TApplicationException(TApplicationException.UNKNOWN_METHOD,
                                        f"{api} is not implemented by the HBase test server")
        self._server.inject_failure(api)
        return method(*values)

    def _declared(self, exc: HBaseError, result: Any) -> bool:
        """Put the Thrift exception for ``exc`` in ``result`` if the method declares it."""
        t = hbase_thrift()
        classes = {"io": t.IOError, "illegal": t.IllegalArgument, "exists": t.AlreadyExists}
        if exc.kind not in classes:
            return False
        return self.handle_exception(classes[exc.kind](message=exc.text), result)


class _FramedTransport(TTransportBase):
    """Thrift's framed transport, refusing frames over ``max_frame`` like Java's."""

    def __init__(self, trans: TSocket, max_frame: int | None) -> None:
        self._trans = trans
        self._max_frame = max_frame
        self._rbuf = BytesIO()
        self._wbuf = BytesIO()

    def is_open(self) -> bool:
        return self._trans.is_open()

    def open(self) -> None:
        self._trans.open()

    def close(self) -> None:
        self._trans.close()

    def read(self, sz: int) -> bytes:
        data = self._rbuf.read(sz)
        while len(data) < sz:
            self._read_frame()
            data += self._rbuf.read(sz - len(data))
        return data

    def _read_frame(self) -> None:
        """Read the next frame into the read buffer."""
        size = struct.unpack("!i", self._read_exactly(4))[0]
        if size < 0 or (self._max_frame and size > self._max_frame):
            raise TTransportException(TTransportException.UNKNOWN,
                                      f"Frame size ({size}) larger than max length ({self._max_frame})!")
        self._rbuf = BytesIO(self._read_exactly(size))

    def _read_exactly(self, n: int) -> bytes:
        """Exactly ``n`` bytes from the socket."""
        buf = bytearray()
        while len(buf) < n:
            buf += self._trans.read(n - len(buf))
        return bytes(buf)

    def write(self, buf: bytes) -> None:
        self._wbuf.write(buf)

    def flush(self) -> None:
        out, self._wbuf = self._wbuf.getvalue(), BytesIO()
        self._trans.write(struct.pack("!i", len(out)) + out)


class HBaseServer:
    """The test gateway: ``with HBaseServer() as hbase: happybase.Connection(hbase.host, hbase.port)``."""

    def __init__(self, transport: str = "buffered", protocol: str = "binary", *,
                 max_cell_bytes: int = DEFAULT_MAX_CELL_BYTES,
                 max_frame_bytes: int | None = DEFAULT_MAX_FRAME_BYTES,
                 record_args: bool = True) -> None:
        if transport not in ("buffered", "framed"):
            raise ValueError("transport must be 'buffered' or 'framed'")
        if protocol not in ("binary", "compact"):
            raise ValueError("protocol must be 'binary' or 'compact'")
        self.transport = transport
        self.protocol = protocol
        self.max_frame_bytes = max_frame_bytes
        self.record_args = record_args  # False keeps method names only (big bodies, benchmarks)
        self.model = HBaseModel(max_cell_bytes)
        self.handler = HBaseHandler(self.model)
        self._processor = _Processor(self)
        self._lock = threading.Lock()
        self._calls: list[ThriftCall] = []
        self._fail_remaining = 0
        self._clients: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._accepting: threading.Event | None = None
        self._acceptor: threading.Thread | None = None
        self._port = 0

    # -- lifecycle ------------------------------------------------------

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        return self._port

    def start(self) -> Self:
        """Listen on an ephemeral port of 127.0.0.1."""
        if self._port:
            raise RuntimeError("HBaseServer already started")
        self._listen(0)
        return self

    def stop(self) -> None:
        """Stop listening and close every connection."""
        self.down()

    def down(self) -> None:
        """Refuse new connections, close open ones, lose open scanners."""
        self._stop_accepting()
        with self._lock:
            clients = list(self._clients)
        for client in clients:
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.handler.drop_scanners()

    def up(self) -> None:
        """Accept connections again, on the same port."""
        if not self._port:
            raise RuntimeError("HBaseServer was never started")
        if self._listener is None:
            self._listen(self._port)

    def __enter__(self) -> Self:
        return self if self._port else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _listen(self, port: int) -> None:
        """Bind, listen and start the accept thread."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, port))
        listener.listen(128)
        listener.settimeout(ACCEPT_POLL_S)
        self._listener, self._port = listener, listener.getsockname()[1]
        self._accepting = threading.Event()
        self._accepting.set()
        self._acceptor = threading.Thread(target=self._accept_loop, args=(listener, self._accepting),
                                          name=f"hbase-test-accept-{self._port}", daemon=True)
        self._acceptor.start()

    def _stop_accepting(self) -> None:
        """Stop the accept thread, then close the listening socket."""
        if self._listener is None or self._accepting is None or self._acceptor is None:
            return
        self._accepting.clear()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept() at once on Linux
        except OSError:
            pass
        self._acceptor.join()
        self._listener.close()
        self._listener = self._accepting = self._acceptor = None

    def _accept_loop(self, listener: socket.socket, accepting: threading.Event) -> None:
        """Accept connections until told to stop; one thread each."""
        while accepting.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._clients.add(client)
            threading.Thread(target=self._serve_client, args=(client,),
                             name=f"hbase-test-conn-{self._port}", daemon=True).start()

    def _serve_client(self, client: socket.socket) -> None:
        """Answer one connection's calls until it closes."""
        trans = self._transport(TSocket(sock=client))
        proto = self._protocol_factory(trans).get_protocol(trans)
        try:
            while True:
                self._processor.process(proto, proto)
        except (TTransportException, OSError, EOFError, struct.error) as exc:
            log.debug("HBase test server: connection closed (%s)", exc)
        except Exception:
            log.exception("HBase test server: connection failed")
        finally:
            with self._lock:
                self._clients.discard(client)
            client.close()

    def _transport(self, sock: TSocket) -> Any:
        """The server side of the configured transport."""
        if self.transport == "framed":
            return _FramedTransport(sock, self.max_frame_bytes)
        return TCyBufferedTransportFactory().get_transport(sock)

    def _protocol_factory(self, trans: Any) -> Any:
        """The configured protocol (Cython binary needs a Cython transport)."""
        if self.protocol == "compact":
            return TCompactProtocolFactory()
        return TBinaryProtocolFactory() if isinstance(trans, _FramedTransport) else TCyBinaryProtocolFactory()

    # -- what tests look at and inject ----------------------------------

    def record(self, call: ThriftCall) -> None:
        """Note a call (the processor calls this)."""
        with self._lock:
            self._calls.append(call if self.record_args else ThriftCall(call.method, {}))

    @property
    def calls(self) -> list[str]:
        """Thrift method names received, in order."""
        with self._lock:
            return [c.method for c in self._calls]

    @property
    def requests(self) -> list[ThriftCall]:
        """Calls received, with their arguments (mutations, row keys...)."""
        with self._lock:
            return list(self._calls)

    def clear_calls(self) -> None:
        """Forget the calls recorded so far."""
        with self._lock:
            self._calls.clear()

    def fail_next(self, n: int = 1) -> None:
        """Make the next ``n`` mutate calls raise IOError before writing anything."""
        with self._lock:
            self._fail_remaining = n

    def inject_failure(self, api: str) -> None:
        """Raise the injected IOError if ``fail_next`` asked for one."""
        if api not in MUTATE_METHODS:
            return
        with self._lock:
            if self._fail_remaining <= 0:
                return
            self._fail_remaining -= 1
        raise io_error("org.apache.hadoop.hbase.RegionTooBusyException",
                       "injected by HBaseServer.fail_next")

    def connections(self) -> int:
        """Connections open now."""
        with self._lock:
            return len(self._clients)

    def dump(self, table: bytes | str) -> dict[bytes, dict[bytes, bytes]]:
        """A table's rows and latest cell values."""
        return self.model.dump(table.encode() if isinstance(table, str) else table)
