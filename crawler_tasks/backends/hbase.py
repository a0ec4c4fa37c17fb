"""HBase store: page records in one HBase table, through the Thrift (v1) gateway and happybase.

``hbase://host[:port]/table[?transport=framed][&protocol=compact][&prefix=p][&pool=8]``:
port 9090, the buffered transport, the binary protocol, no table prefix and 8
pooled connections unless the URI says otherwise. Transport and protocol must
be the gateway's (``hbase thrift start -f -c`` serves framed + compact);
``prefix`` is happybase's ``table_prefix`` (the table is ``<prefix>_<table>``).

Design, and why
---------------

**Row key: the site first.** ``<reversed host>:<scheme>[:<port>]<path>[?<query>] <fingerprint>``,
e.g. ``com.example.www:https:8443/a/b?q=1 3f78…``, built from the canonical URL
(:func:`~crawler_tasks.core.urls.canonicalize_url`: lower-case host, no default port,
sorted query), Apache Nutch's layout with the fingerprint appended. HBase keeps
rows sorted by key, so one site's pages are one contiguous range:
:meth:`HBaseStore.scan_site` reads a host (all its schemes and ports) with the
prefix ``com.example.www:`` and its subdomains with ``com.example.www.``; a salted
fingerprint spreads writes better but cannot do that, and the issue asks for
scans by site. The scheme is in the key because http and https pages are
different fingerprints; IP addresses are kept as written (an IPv6 one in
brackets), and no credentials ever go in a key. The fingerprint suffix (after a
space, which sorts below every character a URL may hold, so rows still sort by
URL) makes the key unique per fingerprint whatever the URL text: a GET and a
HEAD of one URL, or URLs differing only in user info, never share a row, and
the URL part can be cut at ``KEY_URL_BYTES`` to keep keys short (HBase repeats
the key in every cell). A redelivered record builds the same key, so its write
overwrites the same row.

**``get(fingerprint)``: an index row in the same table.** A fingerprint alone
does not give the key, so every record also writes the row
``~fp:<fingerprint>`` with one cell ``i:row`` (family ``i``) naming its page row.
Index rows sort after every page row (``~`` cannot start a host name), so scans
of pages stop at ``~`` and never meet them. Keeping them in the same table (not
a second ``<table>_fp`` table) means one table to create and one ``mutateRows``
per batch for pages and index alike; the index row goes in the same call as
its page row's metadata, or a later one.

**Column families.** ``f``: fetch metadata, one cell per :class:`PageRecord`
field (url, fingerprint, crawl_id, status, fetched_at, headers, meta, …; a field
added to the model later lands here too), each the field's JSON (``200``,
``"text/html"``, ``null``), so types and ``None`` survive the round trip. ``c``:
content, ``c:text`` (JSON) and the body. ``l``: ``l:links``, a JSON list. ``i``:
the index. Every family keeps one version: a rewrite replaces. Every fixed cell
is written on every write (``null`` included), never deleted: HBase applies a
batch's deletes after its puts, and a delete marker hides a later put stamped
with the same millisecond, so a delete-then-put rewrite could lose the write.

**Bodies: zlib, then split.** HBase refuses a cell whose KeyValue (value + row
+ family + qualifier + 20 bytes) is over ``hbase.client.keyvalue.maxsize``, 10 MiB
by default, and the crawler keeps bodies up to 10 MiB, whose decoded text can be
larger still in UTF-8. The body is stored as the zlib stream of its UTF-8
(``surrogatepass``, so any str comes back equal) in ``c:body`` when that cell
fits ``CELL_BYTES`` (8 MiB as a KeyValue, headroom below the 10 MiB default),
else cut over ``c:body.0``, ``c:body.1``, … with ``c:body`` left empty.
``c:body.parts`` says which: ``0`` no body (``None``), ``1`` in ``c:body``, ``n``
in n parts. Parts past ``n`` that a larger earlier body left are ignored by
readers and overwritten by the next body that needs them (see deletes above).
zlib's checksum catches a reader that races a rewrite of a split body: it gets
:class:`StoreUnavailable` and reads again.

**Batches: one ``mutateRows`` per upsert, cut where the wire needs it.** An
upsert sends its records through ``Table.batch()``: one ``mutateRows`` call as
long as it stays under ``CALL_BYTES`` (64 MiB: libthrift 0.14+ gateways refuse
messages over 100 MB). With ``transport=framed`` the gateway drops any frame
over 2 MiB (``hbase.regionserver.thrift.framed.max_frame_size_in_mb``), so
calls are cut at ``FRAMED_CALL_BYTES`` (1.5 MiB) and body parts at
``FRAMED_CELL_BYTES`` (1 MiB); a record's body parts go before its metadata, so
its metadata (and index row) are written only once the parts are. Within a
call, one row's cells are one HBase Put, atomic; records repeated within a
batch are written once (the last one wins).

**Idempotence.** Same record → same row key, same cells: a redelivered write
overwrites, and a store holds it once. A batch cut short (gateway down
mid-way) is retried whole by the store queue; rows already written are written
again, unchanged.

**Reads.** Page rows are read in pages of ``SCAN_PAGE`` keys, each page its own
short pooled call (a scan left half-read holds no connection), selecting only
``f:crawl_id``; matching rows are then fetched ``GET_ROWS`` at a time
(``getRows``), and split bodies one record at a time. ``records(crawl_id)`` and
``count(crawl_id)`` filter on the client: HBase has no index on crawl id and
the test gateway has no filters. That reads every key of the table, which is
fine for tests and export; a dashboard over billions of rows wants a crawl id
prefix table or Phoenix. Records come in row-key order (by site), not oldest
first as the SQLite store gives them. Reads never create the table: an absent
table holds no records.

**Errors.** A gateway that cannot be reached or drops the connection, a Thrift
transport or protocol error, and the gateway's ``IOError`` (region busy, table
gone) raise :class:`StoreUnavailable` with one line (the store queue retries the batch).
An ``IllegalArgument`` (a cell over the gateway's KeyValue limit) refuses one
record for good: the batch is halved until the record is alone, and it comes
back as a :class:`RecordFailure` while the rest are written. A record that
cannot be encoded (a URL with no host, a field JSON cannot hold, metadata too
big for a framed call) is refused before anything is sent. A table that lacks
our families (``NoSuchColumnFamilyException``) is the table's problem, not one
record's (every record writes the same families): :class:`StoreUnavailable`,
so nothing is dropped while an operator adds them. Thrift's exception messages
are bytes: they are decoded, never ``str()``-ed (that raises TypeError).

**Connections.** A ``happybase.ConnectionPool`` of ``pool`` connections is
shared by the process's threads, built on first use (building the store needs
no gateway; a gateway down at start is a retryable StoreUnavailable). The pool
replaces a connection after any Thrift or socket error (its socket is closed
at once, not left to the garbage collector); a happybase Connection must be
rebuilt, never reopened, after one (reopening replays the failed call and
leaves replies one call late). A call that meets a connection the gateway
closed since it was last used (a gateway restart) is tried once more on a fresh
connection: every call here is idempotent. Other errors inside a call are
turned into transport errors, so the pool replaces that connection too. A
process forked after the pool was built builds its own (the inherited sockets
are the parent's and are left alone). ``close()`` closes the connections this
process opened; the next call opens new ones.

**Table creation.** On the first write (one thread per process does it), when
``getTableNames`` does not list the table, the store creates it with families
``f``, ``c``, ``l``, ``i``; a worker that loses the race to another gets
``AlreadyExists`` and goes on. Either way it then checks the table has all four
families. On a real cluster a table just created may not serve for a moment:
those first writes fail as :class:`StoreUnavailable` and are retried.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import logging
import os
import re
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

import happybase
from happybase.pool import NoConnectionsAvailable
from Hbase_thrift import AlreadyExists, IllegalArgument  # happybase's own IDL module
from Hbase_thrift import IOError as GatewayIOError
from thriftpy2.thrift import TException
from thriftpy2.transport import TTransportException

from ..core.errors import BadInput, InvalidURL, StoreUnavailable, UnknownStore
from ..core.models import PageRecord
from ..core.settings import Settings
from ..core.store_uris import mask
from ..core.urls import canonicalize_url
from .base import RecordFailure, split_uri

__all__ = ["HBaseStore", "describe_error", "parse_uri", "row_key", "site_prefix"]

log = logging.getLogger(__name__)

MIB = 1024 * 1024
DEFAULT_PORT = 9090
DEFAULT_POOL = 8  # connections per process, shared by its threads
MAX_POOL = 1024
TRANSPORTS = ("buffered", "framed")
PROTOCOLS = ("binary", "compact")
OPTIONS = ("transport", "protocol", "prefix", "pool")
SOCKET_TIMEOUT_S = 30.0  # seconds one Thrift call may wait for the gateway
POOL_WAIT_S = 30.0  # seconds a thread waits for a free pooled connection
CELL_BYTES = 8 * MIB  # KeyValue bytes of a cell (HBase refuses over 10 MiB by default)
FRAMED_CELL_BYTES = 1 * MIB  # the same with transport=framed (a call must fit a 2 MiB frame)
CALL_BYTES = 64 * MIB  # bytes of one mutateRows call (libthrift 0.14+ caps messages at 100 MB)
FRAMED_CALL_BYTES = 3 * MIB // 2  # the same with transport=framed (frames over 2 MiB are dropped)
KEY_URL_BYTES = 1024  # bytes of URL kept in a row key (the fingerprint keeps keys unique)
MAX_FINGERPRINT_BYTES = 512  # a longer one is refused (the crawler's are 40 hex digits)
SCAN_PAGE = 1000  # row keys per scan call
GET_ROWS = 20  # records per getRows call
ZLIB_LEVEL = 6
KEYVALUE_OVERHEAD = 20  # a KeyValue's bytes beyond row, family, qualifier and value
MUTATION_WIRE = 32  # Thrift bytes around one Mutation's column and value (upper bound)
ROW_WIRE = 32  # Thrift bytes around one BatchMutation's row key
CALL_WIRE = 256  # Thrift bytes of a mutateRows call besides its rows

#: Families, each keeping one version: a rewrite replaces.
FAMILIES: dict[str, dict[str, Any]] = {family: {"max_versions": 1} for family in ("f", "c", "l", "i")}
CRAWL_ID = b"f:crawl_id"
TEXT = b"c:text"
LINKS = b"l:links"
BODY = b"c:body"
BODY_PARTS = b"c:body.parts"
INDEX = b"i:row"
INDEX_PREFIX = b"~fp:"
PAGES_STOP = b"~"  # page rows sort below it, index rows above
#: PageRecord fields kept in ``f``, one cell each.
META_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(PageRecord) if f.name not in ("text", "links", "body"))
#: What a record read fetches (split body parts are fetched apart).
LOAD_COLUMNS = [b"f", TEXT, LINKS, BODY, BODY_PARTS]

_TABLE_NAME = re.compile(r"(?:[A-Za-z0-9_]+:)?[A-Za-z0-9_][A-Za-z0-9_.-]*")
_PREFIX = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")

T = TypeVar("T")


class _Refused(Exception):
    """A record this backend cannot hold, whatever the gateway's state."""


@dataclass
class _Piece:
    """Cells of one row that go in one call, and their bytes on the wire."""

    row: bytes
    cells: dict[bytes, bytes]

    @property
    def wire_bytes(self) -> int:
        return ROW_WIRE + len(self.row) + sum(MUTATION_WIRE + len(c) + len(v) for c, v in self.cells.items())


@dataclass
class _Encoded:
    """A record as the pieces to write, in order: body parts, then metadata, then index."""

    fingerprint: str
    pieces: list[_Piece]


# -- row keys ---------------------------------------------------------------


def _site(host: str) -> str:
    """A host as it leads a row key: labels reversed, IP addresses as written."""
    host = host.rstrip(".")
    if ":" in host:
        return f"[{host}]"
    if _IPV4.fullmatch(host):
        return host
    return ".".join(reversed(host.split(".")))


def row_key(url: str, fingerprint: str) -> bytes:
    """The row key of a record: ``<reversed host>:<scheme>[:<port>]<path>[?<query>] <fingerprint>``.

    Raises :class:`InvalidURL` for a URL with no host.
    """
    canonical = canonicalize_url(url)
    try:
        parts = urlsplit(canonical)
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(f"invalid URL {url!r:.200}: {exc}") from None
    if not parts.hostname:
        raise InvalidURL(f"invalid URL {url!r:.200}: no host")
    where = f"{_site(parts.hostname)}:{parts.scheme}" + (f":{port}" if port is not None else "")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    head = (where + path).encode("utf-8", "surrogatepass")[:KEY_URL_BYTES]
    return head + b" " + fingerprint.encode("utf-8", "surrogatepass")


def site_prefix(host: str, *, subdomains: bool = False) -> bytes:
    """The key prefix of one host's rows (every scheme and port), or of its subdomains' rows."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address
    try:
        name = urlsplit(canonicalize_url(f"http://{host}/")).hostname
    except (InvalidURL, ValueError):
        name = None
    if not name:
        raise BadInput(f"host: {host!r:.200} is not a host name")
    return (_site(name) + ("." if subdomains else ":")).encode()


def _after(prefix: bytes) -> bytes:
    """The first key past every key starting with ``prefix`` (which ends in '.' or ':')."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


# -- cells ------------------------------------------------------------------


def _json(value: Any, name: str) -> bytes:
    """A field as its cell: JSON in UTF-8."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise _Refused(f"{name}: {exc}") from None
    return text.encode("utf-8", "surrogatepass")


def _unjson(raw: bytes) -> Any:
    return json.loads(raw.decode("utf-8", "surrogatepass"))


def _keyvalue_bytes(row: bytes, column: bytes, value: bytes) -> int:
    """What ``hbase.client.keyvalue.maxsize`` counts for a cell."""
    return KEYVALUE_OVERHEAD + len(row) + len(column) - 1 + len(value)  # the colon is not stored


def body_part(n: int) -> bytes:
    """The column of part ``n`` of a split body."""
    return b"c:body.%d" % n


def _body_cells(body: str | None, row: bytes, cell_bytes: int) -> tuple[dict[bytes, bytes], list[bytes]]:
    """The body's cells for the metadata piece, and its split parts (if any)."""
    if body is None:
        return {BODY_PARTS: b"0", BODY: b""}, []
    stream = zlib.compress(body.encode("utf-8", "surrogatepass"), ZLIB_LEVEL)
    if _keyvalue_bytes(row, BODY, stream) <= cell_bytes:
        return {BODY_PARTS: b"1", BODY: stream}, []
    size = cell_bytes - _keyvalue_bytes(row, body_part(999_999), b"")
    parts = [stream[i:i + size] for i in range(0, len(stream), size)]
    return {BODY_PARTS: b"%d" % len(parts), BODY: b""}, parts


def _encode(record: PageRecord, cell_bytes: int, call_bytes: int) -> _Encoded:
    """The pieces that write ``record``; :class:`_Refused` when it cannot be held."""
    fingerprint = record.fingerprint
    if not isinstance(fingerprint, str) or not fingerprint:
        raise _Refused("fingerprint: must be a non-empty string")
    if len(fingerprint.encode("utf-8", "surrogatepass")) > MAX_FINGERPRINT_BYTES:
        raise _Refused(f"fingerprint: longer than {MAX_FINGERPRINT_BYTES} bytes")
    try:
        row = row_key(record.url, fingerprint)
    except InvalidURL as exc:
        raise _Refused(f"url: {exc}") from None
    cells = {b"f:" + name.encode(): _json(getattr(record, name), name) for name in META_FIELDS}
    cells[TEXT] = _json(record.text, "text")
    cells[LINKS] = _json(record.links, "links")
    body, parts = _body_cells(record.body, row, cell_bytes)
    cells.update(body)
    for column, value in cells.items():
        if _keyvalue_bytes(row, column, value) > cell_bytes:
            raise _Refused(f"{column.decode()}: {len(value)} bytes, over the {cell_bytes} "
                           "an HBase cell may take here")
    index = INDEX_PREFIX + fingerprint.encode("utf-8", "surrogatepass")
    pieces = [_Piece(row, {body_part(n): part}) for n, part in enumerate(parts)]
    pieces += [_Piece(row, cells), _Piece(index, {INDEX: row})]
    biggest = max(piece.wire_bytes for piece in pieces)
    if biggest + CALL_WIRE > call_bytes:
        raise _Refused(f"record: {biggest} bytes of metadata and text, over the {call_bytes} "
                       "one call may carry")
    return _Encoded(fingerprint, pieces)


def _pack(encoded: Sequence[_Encoded], call_bytes: int) -> list[list[_Piece]]:
    """Pieces grouped into calls of at most ``call_bytes`` on the wire, in order."""
    calls: list[list[_Piece]] = []
    current: list[_Piece] = []
    used = CALL_WIRE
    for piece in (p for record in encoded for p in record.pieces):
        if current and used + piece.wire_bytes > call_bytes:
            calls.append(current)
            current, used = [], CALL_WIRE
        current.append(piece)
        used += piece.wire_bytes
    if current:
        calls.append(current)
    return calls


def _decode(data: dict[bytes, bytes]) -> dict[str, Any] | None:
    """A page row's fields but the body; None for a row that holds no record."""
    fields: dict[str, Any] = {}
    try:
        for name in META_FIELDS:
            raw = data.get(b"f:" + name.encode())
            if raw is not None:
                fields[name] = _unjson(raw)
        for name, column in (("text", TEXT), ("links", LINKS)):
            if column in data:
                fields[name] = _unjson(data[column])
    except ValueError:  # not JSON: a cell some other program wrote
        return None
    return fields if "url" in fields and "fingerprint" in fields else None


def _inflate(stream: bytes) -> str:
    """A body from its zlib stream; ValueError (zlib.error) when the stream is not whole."""
    return zlib.decompress(stream).decode("utf-8", "surrogatepass")


# -- errors -----------------------------------------------------------------


def describe_error(exc: BaseException) -> str:
    """One line naming an error from happybase, thriftpy2 or a socket.

    Thrift exceptions keep their message as bytes, where ``str()`` raises
    TypeError: the message is decoded, and only its first line kept (the
    gateway sends Java stack traces).
    """
    message: Any = getattr(exc, "message", None)
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    if not isinstance(message, str) or not message.strip():
        try:
            message = str(exc)
        except Exception:  # noqa: BLE001  (a bytes message behind __str__)
            message = ""
    lines = message.strip().splitlines()
    first = lines[0].strip()[:300] if lines else ""
    name = type(exc).__name__
    if not first and hasattr(exc, "type"):
        first = f"type {exc.type}"
    return f"{name}: {first}" if first else name


def _stale(exc: BaseException) -> bool:
    """Whether ``exc`` says the gateway closed the connection (worth one try on a new one)."""
    if isinstance(exc, TTransportException):
        return exc.type == TTransportException.END_OF_FILE
    return isinstance(exc, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError))


def _table_gone(exc: BaseException) -> bool:
    """Whether ``exc`` says the table or one of its families is missing."""
    message = getattr(exc, "message", None)
    return (isinstance(exc, GatewayIOError) and isinstance(message, bytes)
            and (b"TableNotFoundException" in message or b"NoSuchColumnFamilyException" in message))


# -- URIs -------------------------------------------------------------------


def parse_uri(uri: str) -> dict[str, Any]:
    """The constructor arguments an ``hbase://`` URI names; :class:`UnknownStore` if malformed."""

    def bad(why: str) -> UnknownStore:
        return UnknownStore(f"hbase store {mask(uri)!r}: {why}")

    parts, port = split_uri(uri, bad)
    if parts.scheme.lower() != "hbase":
        raise bad("expected hbase://host:port/table")
    if not parts.hostname:
        raise bad("no host (expected hbase://host:port/table)")
    if parts.username is not None or parts.password is not None:
        raise bad("credentials are not supported (the Thrift gateway takes none)")
    if parts.fragment:
        raise bad(f"unexpected fragment #{parts.fragment}")
    table = parts.path.strip("/")
    if not table:
        raise bad("no table (expected hbase://host:port/table)")
    return {"host": parts.hostname, "port": DEFAULT_PORT if port is None else port, "table": table,
            **_parse_options(parts.query, bad)}


def _parse_options(query: str, bad: Callable[[str], UnknownStore]) -> dict[str, Any]:
    """``transport``, ``protocol``, ``prefix`` and ``pool`` from a URI's query."""
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise bad(f"bad query {query!r}: expected name=value pairs") from None
    options: dict[str, Any] = {}
    for name, value in pairs:
        if name not in OPTIONS:
            close = difflib.get_close_matches(name, OPTIONS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise bad(f"unknown option {name!r}{hint}; known: {', '.join(OPTIONS)}")
        if name in options or (name == "pool" and "pool_size" in options):
            raise bad(f"option {name!r} given twice")
        if name == "pool":
            try:
                options["pool_size"] = int(value)
            except ValueError:
                raise bad(f"pool: {value!r} is not a whole number") from None
        else:
            options[name] = value
    return options


# -- the store --------------------------------------------------------------


class HBaseStore:
    """Page records in an HBase table, through a Thrift gateway; shared by a process's threads."""

    def __init__(self, host: str, port: int = DEFAULT_PORT, table: str = "pages", *,
                 transport: str = "buffered", protocol: str = "binary", prefix: str | None = None,
                 pool_size: int = DEFAULT_POOL) -> None:
        _check(host, port, table, transport, protocol, prefix, pool_size)
        self.host, self.port, self.table = host, port, table
        self.transport, self.protocol, self.prefix, self.pool_size = transport, protocol, prefix, pool_size
        framed = transport == "framed"
        self._cell_bytes = FRAMED_CELL_BYTES if framed else CELL_BYTES
        self._call_bytes = FRAMED_CALL_BYTES if framed else CALL_BYTES
        self.label = f"{host}:{port}/{prefix + '_' if prefix else ''}{table}"
        self._lock = threading.Lock()
        self._prepare_lock = threading.Lock()
        self._pool: happybase.ConnectionPool | None = None
        self._pool_pid = 0
        self._opened: set[happybase.Connection] = set()
        self._inherited: list[happybase.ConnectionPool] = []
        self._ready = False

    @classmethod
    def from_uri(cls, uri: str, settings: Settings | None = None) -> HBaseStore:
        """The store ``hbase://host:port/table?…`` names; :class:`UnknownStore` if malformed.

        ``settings`` is taken as every backend's factory takes it; nothing in it
        changes this backend today.
        """
        options = parse_uri(uri)
        try:
            return cls(**options)
        except UnknownStore as exc:
            raise UnknownStore(f"hbase store {mask(uri)!r}: {exc}") from None

    # -- the Store protocol ------------------------------------------------

    def upsert(self, records: Sequence[PageRecord]) -> list[RecordFailure]:
        """Write ``records`` (one ``mutateRows`` call, or a few); the ones refused for good come back.

        Raises :class:`StoreUnavailable` when the gateway cannot take the write now.
        """
        failures: list[RecordFailure] = []
        encoded: list[_Encoded] = []
        for record in {r.fingerprint: r for r in records}.values():
            try:
                encoded.append(_encode(record, self._cell_bytes, self._call_bytes))
            except _Refused as exc:
                failures.append(RecordFailure(str(record.fingerprint), str(exc)))
        if encoded:
            self._prepare(create=True)
            with self._unavailable():
                failures += self._write(encoded)
        return failures

    def records(self, crawl_id: str | None = None) -> Iterator[PageRecord]:
        """Every stored record (of one crawl), in row-key order (by site)."""
        if not self._prepare(create=False):
            return
        wanted = None if crawl_id is None else _json(crawl_id, "crawl_id")
        for page in self._key_pages(b"", PAGES_STOP):
            yield from self._load([key for key, crawl in page if wanted is None or crawl == wanted])

    def scan_site(self, host: str, *, subdomains: bool = False) -> Iterator[PageRecord]:
        """The records of one host (every scheme and port), in key order; ``subdomains`` adds theirs."""
        prefixes = [site_prefix(host)]
        if subdomains:
            prefixes.insert(0, site_prefix(host, subdomains=True))  # '.' sorts before ':'
        if not self._prepare(create=False):
            return
        for prefix in prefixes:
            for page in self._key_pages(prefix, _after(prefix)):
                yield from self._load([key for key, _ in page])

    def get(self, fingerprint: str) -> PageRecord | None:
        """The stored record of ``fingerprint``, or None (index row, then page row)."""
        if not self._prepare(create=False):
            return None
        index = INDEX_PREFIX + fingerprint.encode("utf-8", "surrogatepass")
        found = self._call(lambda table: table.row(index, columns=[INDEX]))
        row = found.get(INDEX)
        if not row:
            return None
        data = self._call(lambda table: table.row(row, columns=LOAD_COLUMNS))
        record = self._record(row, data)
        return record if record is not None and record.fingerprint == fingerprint else None

    def count(self, crawl_id: str | None = None) -> int:
        """How many records are stored (for one crawl): a scan of ``f:crawl_id``."""
        if not self._prepare(create=False):
            return 0
        wanted = None if crawl_id is None else _json(crawl_id, "crawl_id")
        return sum(1 for page in self._key_pages(b"", PAGES_STOP)
                   for _, crawl in page if wanted is None or crawl == wanted)

    def close(self) -> None:
        """Close the connections this process opened; a later call opens new ones."""
        with self._lock:
            pool, opened, pid = self._pool, self._opened, self._pool_pid
            self._pool, self._opened = None, set()
        if pool is None or pid != os.getpid():
            return
        for conn in opened:
            _close_quietly(conn)

    # -- writing -----------------------------------------------------------

    def _write(self, encoded: list[_Encoded]) -> list[RecordFailure]:
        """Send ``encoded``; halve the batch on IllegalArgument until the refused records are alone."""
        try:
            for call in _pack(encoded, self._call_bytes):
                self._call(lambda table, call=call: _mutate(table, call), guard=False)
        except IllegalArgument as exc:
            if len(encoded) == 1:
                return [RecordFailure(encoded[0].fingerprint, describe_error(exc))]
            half = len(encoded) // 2
            return self._write(encoded[:half]) + self._write(encoded[half:])
        return []

    def _prepare(self, *, create: bool) -> bool:
        """Whether the table is there with our families; creates it first when ``create``."""
        if self._ready:
            return True
        with self._prepare_lock:  # one thread of the process checks (and creates) the table
            return self._ready or self._check_table(create)

    def _check_table(self, create: bool) -> bool:
        with self._unavailable():
            names = self._run(lambda conn: conn.tables())
            if self.table.encode() not in names:
                if not create:
                    return False
                try:
                    self._run(lambda conn: conn.create_table(self.table, FAMILIES))
                except AlreadyExists:
                    pass  # another worker created it first: go on
            families = self._call(lambda table: table.families(), guard=False)
        missing = sorted(set(FAMILIES) - {name.decode(errors="replace") for name in families})
        if missing:
            raise StoreUnavailable(f"hbase store {self.label}: the table lacks column families "
                                   f"{', '.join(missing)} (made by another program?); add them "
                                   "or name another table")
        self._ready = True
        return True

    # -- reading -----------------------------------------------------------

    def _key_pages(self, start: bytes, stop: bytes) -> Iterator[list[tuple[bytes, bytes]]]:
        """(row key, ``f:crawl_id``) of the page rows in [start, stop), one short call per page."""
        while True:
            page = self._call(lambda table, start=start: list(table.scan(
                row_start=start, row_stop=stop, columns=[CRAWL_ID], limit=SCAN_PAGE, batch_size=SCAN_PAGE)))
            if page:
                yield [(key, data.get(CRAWL_ID, b"")) for key, data in page]
            if len(page) < SCAN_PAGE:
                return
            start = page[-1][0] + b"\x00"

    def _load(self, keys: list[bytes]) -> Iterator[PageRecord]:
        """The records of ``keys``, ``GET_ROWS`` rows per call."""
        for i in range(0, len(keys), GET_ROWS):
            chunk = keys[i:i + GET_ROWS]
            rows = self._call(lambda table, chunk=chunk: table.rows(chunk, columns=LOAD_COLUMNS))
            for key, data in rows:
                record = self._record(key, data)
                if record is not None:
                    yield record

    def _record(self, key: bytes, data: dict[bytes, bytes]) -> PageRecord | None:
        """The record a page row holds, body included; None if it holds none."""
        fields = _decode(data)
        if fields is None:
            log.warning("hbase store %s: row %r holds no page record; skipped", self.label, key[:200])
            return None
        fields["body"] = self._body(key, data)
        try:
            return PageRecord.from_dict(fields)
        except TypeError:  # a required field missing
            log.warning("hbase store %s: row %r holds no page record; skipped", self.label, key[:200])
            return None

    def _body(self, key: bytes, data: dict[bytes, bytes]) -> str | None:
        """The body a row holds, its parts fetched if it was split."""
        try:
            parts = int(data.get(BODY_PARTS) or b"0")
        except ValueError:
            parts = 0
        if parts == 0:
            return None
        stream = data.get(BODY, b"")
        if parts > 1:
            columns = [body_part(n) for n in range(parts)]
            found = self._call(lambda table: table.row(key, columns=columns))
            stream = b"".join(found.get(column, b"") for column in columns)
        try:
            return _inflate(stream)
        except (zlib.error, UnicodeDecodeError):
            raise StoreUnavailable(f"hbase store {self.label}: the body of row {key[:200]!r} is not whole "
                                   "(a rewrite under way?); read it again") from None

    # -- connections -------------------------------------------------------

    def _call(self, action: Callable[[happybase.Table], T], *, guard: bool = True) -> T:
        """Run ``action`` on the table; errors as :class:`StoreUnavailable` when ``guard``."""
        if not guard:
            return self._run(lambda conn: action(conn.table(self.table)))
        with self._unavailable():
            return self._run(lambda conn: action(conn.table(self.table)))

    def _run(self, action: Callable[[happybase.Connection], T]) -> T:
        """Run ``action`` on a pooled connection, once more on a new one if the gateway had closed it."""
        try:
            return self._run_once(action)
        except (TException, OSError) as exc:
            if not _stale(exc):
                raise
            log.info("hbase store %s: connection closed by the gateway (%s); trying a new one",
                     self.label, describe_error(exc))
        return self._run_once(action)

    def _run_once(self, action: Callable[[happybase.Connection], T]) -> T:
        pool = self._connection_pool()
        with pool.connection(timeout=POOL_WAIT_S) as conn:
            with self._lock:
                self._opened.add(conn)
            try:
                return action(conn)
            except (TException, OSError):
                _close_quietly(conn)  # the pool replaces it; its socket is closed now, not at GC
                raise
            except Exception as exc:
                # A reply read halfway leaves the connection out of step: make
                # it a transport error so that the pool replaces it too.
                _close_quietly(conn)
                raise TTransportException(TTransportException.UNKNOWN, describe_error(exc)) from exc

    def _connection_pool(self) -> happybase.ConnectionPool:
        """This process's pool, built on first use."""
        pid = os.getpid()
        with self._lock:
            if self._pool is not None and self._pool_pid == pid:
                return self._pool
            if self._pool is not None:  # inherited through fork: its sockets are the parent's
                self._inherited.append(self._pool)  # kept, as closing them would cut the parent's
                self._opened = set()
            try:
                pool = happybase.ConnectionPool(
                    self.pool_size, host=self.host, port=self.port, timeout=int(SOCKET_TIMEOUT_S * 1000),
                    transport=self.transport, protocol=self.protocol, table_prefix=self.prefix)
            except (TException, OSError) as exc:
                raise StoreUnavailable(f"hbase store {self.label}: {describe_error(exc)}") from None
            self._pool, self._pool_pid = pool, pid
        # The connection the pool opened while being built (a LIFO queue hands it out first).
        with pool.connection() as conn, self._lock:
            self._opened.add(conn)
        return pool

    @contextlib.contextmanager
    def _unavailable(self) -> Iterator[None]:
        """Turn the gateway's and the network's errors into :class:`StoreUnavailable`."""
        try:
            yield
        except NoConnectionsAvailable:
            raise StoreUnavailable(f"hbase store {self.label}: no pooled connection free within "
                                   f"{POOL_WAIT_S:g} s") from None
        except (TException, OSError) as exc:
            if _table_gone(exc):
                self._ready = False  # created or checked again on the next call
            raise StoreUnavailable(f"hbase store {self.label}: {describe_error(exc)}") from None


def _close_quietly(conn: happybase.Connection) -> None:
    """Close a connection's socket, whatever state it is in."""
    try:
        conn.close()
    except (TException, OSError):
        pass


def _mutate(table: happybase.Table, call: list[_Piece]) -> None:
    """One ``mutateRows`` call through ``Table.batch()``."""
    with table.batch() as batch:
        for piece in call:
            batch.put(piece.row, piece.cells)


def _check(host: str, port: int, table: str, transport: str, protocol: str, prefix: str | None,
           pool_size: int) -> None:
    """Refuse constructor arguments no gateway could use (messages start with the field)."""
    if not host:
        raise UnknownStore("host: empty")
    if not isinstance(port, int) or not 0 < port < 65536:
        raise UnknownStore(f"port: {port!r} is not between 1 and 65535")
    if not _TABLE_NAME.fullmatch(table):
        raise UnknownStore(f"table: {table!r} is not an HBase table name "
                           "(letters, digits, '_', '-', '.'; an optional 'namespace:')")
    if transport not in TRANSPORTS:
        raise UnknownStore(f"transport: {transport!r} is not one of {', '.join(TRANSPORTS)}")
    if protocol not in PROTOCOLS:
        raise UnknownStore(f"protocol: {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    if prefix is not None and not _PREFIX.fullmatch(prefix):
        raise UnknownStore(f"prefix: {prefix!r} is not a table name prefix (letters, digits, '_', '-', '.')")
    if not isinstance(pool_size, int) or not 0 < pool_size <= MAX_POOL:
        raise UnknownStore(f"pool: {pool_size!r} is not between 1 and {MAX_POOL}")
