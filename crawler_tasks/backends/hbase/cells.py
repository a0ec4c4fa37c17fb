"""HBase cells: a page record as the cells of its rows, packed into calls, and read back.

Pure encoding and decoding: no gateway, no connection (the store sends and reads them).

**Column families.** ``f``: fetch metadata, one cell per :class:`PageRecord`
field (url, fingerprint, crawl_id, status, fetched_at, headers, meta, …; a field
added to the model later lands here too), each the field's JSON (``200``,
``"text/html"``, ``null``), so types and ``None`` survive the round trip. ``c``:
content, ``c:text`` (JSON) and the body. ``l``: ``l:links``, a JSON list. ``i``:
the index (:mod:`~crawler_tasks.backends.hbase.keys`). Every family keeps one
version: a rewrite replaces. Every fixed cell is written on every write
(``null`` included), never deleted: HBase applies a batch's deletes after its
puts, and a delete marker hides a later put stamped with the same millisecond,
so a delete-then-put rewrite could lose the write.

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

A record that cannot be encoded (a URL with no host, a field JSON cannot hold,
metadata too big for a framed call) is :class:`Refused` before anything is sent.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...core.errors import InvalidURL
from ...core.models import PageRecord
from .keys import index_key, row_key

MIB = 1024 * 1024
CELL_BYTES = 8 * MIB  # KeyValue bytes of a cell (HBase refuses over 10 MiB by default)
FRAMED_CELL_BYTES = 1 * MIB  # the same with transport=framed (a call must fit a 2 MiB frame)
CALL_BYTES = 64 * MIB  # bytes of one mutateRows call (libthrift 0.14+ caps messages at 100 MB)
FRAMED_CALL_BYTES = 3 * MIB // 2  # the same with transport=framed (frames over 2 MiB are dropped)
MAX_FINGERPRINT_BYTES = 512  # a longer one is refused (the crawler's are 40 hex digits)
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
#: A rendered page's DOM, as the zlib stream of its UTF-8 (empty: none). A DOM over one
#: cell is left out of the row: the page's text, links and items came from it already.
DOM = b"c:dom"
#: PageRecord fields kept in ``f``, one cell each.
META_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(PageRecord) if f.name not in ("text", "links", "body", "dom"))
#: What a record read fetches (split body parts are fetched apart).
LOAD_COLUMNS = [b"f", TEXT, LINKS, BODY, BODY_PARTS, DOM]


class Refused(Exception):
    """A record this backend cannot hold, whatever the gateway's state."""


@dataclass
class Piece:
    """Cells of one row that go in one call, and their bytes on the wire."""

    row: bytes
    cells: dict[bytes, bytes]

    @property
    def wire_bytes(self) -> int:
        return ROW_WIRE + len(self.row) + sum(MUTATION_WIRE + len(c) + len(v) for c, v in self.cells.items())


@dataclass
class Encoded:
    """A record as the pieces to write, in order: body parts, then metadata, then index."""

    fingerprint: str
    pieces: list[Piece]


def json_cell(value: Any, name: str) -> bytes:
    """A field as its cell: JSON in UTF-8."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise Refused(f"{name}: {exc}") from None
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


def encode(record: PageRecord, cell_bytes: int, call_bytes: int) -> Encoded:
    """The pieces that write ``record``; :class:`Refused` when it cannot be held."""
    fingerprint = record.fingerprint
    if not isinstance(fingerprint, str) or not fingerprint:
        raise Refused("fingerprint: must be a non-empty string")
    if len(fingerprint.encode("utf-8", "surrogatepass")) > MAX_FINGERPRINT_BYTES:
        raise Refused(f"fingerprint: longer than {MAX_FINGERPRINT_BYTES} bytes")
    try:
        row = row_key(record.url, fingerprint, record.crawl_id)
    except InvalidURL as exc:
        raise Refused(f"url: {exc}") from None
    cells = {b"f:" + name.encode(): json_cell(getattr(record, name), name) for name in META_FIELDS}
    cells[TEXT] = json_cell(record.text, "text")
    cells[LINKS] = json_cell(record.links, "links")
    body, parts = _body_cells(record.body, row, cell_bytes)
    cells.update(body)
    dom = b"" if record.dom is None else zlib.compress(record.dom.encode("utf-8", "surrogatepass"), ZLIB_LEVEL)
    cells[DOM] = dom if _keyvalue_bytes(row, DOM, dom) <= cell_bytes else b""
    for column, value in cells.items():
        if _keyvalue_bytes(row, column, value) > cell_bytes:
            raise Refused(f"{column.decode()}: {len(value)} bytes, over the {cell_bytes} "
                          "an HBase cell may take here")
    pieces = [Piece(row, {body_part(n): part}) for n, part in enumerate(parts)]
    pieces += [Piece(row, cells), Piece(index_key(fingerprint), {INDEX: row}),
               Piece(index_key(fingerprint, record.crawl_id), {INDEX: row})]
    biggest = max(piece.wire_bytes for piece in pieces)
    if biggest + CALL_WIRE > call_bytes:
        raise Refused(f"record: {biggest} bytes of metadata and text, over the {call_bytes} "
                      "one call may carry")
    return Encoded(fingerprint, pieces)


def pack(encoded: Sequence[Encoded], call_bytes: int) -> list[list[Piece]]:
    """Pieces grouped into calls of at most ``call_bytes`` on the wire, in order."""
    calls: list[list[Piece]] = []
    current: list[Piece] = []
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


def decode(data: dict[bytes, bytes]) -> dict[str, Any] | None:
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
        if data.get(DOM):
            fields["dom"] = _dom(data[DOM])
    except ValueError:  # not JSON: a cell some other program wrote
        return None
    return fields if "url" in fields and "fingerprint" in fields else None


def _dom(stream: bytes) -> str | None:
    try:
        return inflate(stream)
    except zlib.error:  # not whole: read as none (the next write of the page rewrites it)
        return None


def body_parts(data: dict[bytes, bytes]) -> int:
    """How many parts the body of a page row has (``c:body.parts``): 0 for none."""
    try:
        return int(data.get(BODY_PARTS) or b"0")
    except ValueError:
        return 0


def inflate(stream: bytes) -> str:
    """A body from its zlib stream; ValueError (zlib.error) when the stream is not whole."""
    return zlib.decompress(stream).decode("utf-8", "surrogatepass")
