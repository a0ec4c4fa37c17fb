"""The HBase store: page records written in batches to one table, read back by crawl, site or fingerprint.

Row keys come from :mod:`~crawler_tasks.backends.hbase.keys`, cells from
:mod:`~crawler_tasks.backends.hbase.cells`, connections and the table from
:mod:`~crawler_tasks.backends.hbase.gateway`; this module puts them together.

**Writes.** An upsert encodes its records (one refused before anything is sent
comes back as a :class:`RecordFailure`) and sends their pieces in as few
``mutateRows`` calls as the wire allows, creating the table on the first write.
An ``IllegalArgument`` (a cell over the gateway's KeyValue limit) refuses one
record for good: the batch is halved until the record is alone, and it comes
back as a :class:`RecordFailure` while the rest are written.

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
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterator, Sequence

import happybase
from Hbase_thrift import IllegalArgument  # happybase's own IDL module

from ...core.errors import StoreUnavailable, UnknownStore
from ...core.models import PageRecord
from ...core.settings import Settings
from ...core.store_uris import mask
from ..base import RecordFailure
from .cells import (
    BODY,
    CALL_BYTES,
    CELL_BYTES,
    CRAWL_ID,
    FRAMED_CALL_BYTES,
    FRAMED_CELL_BYTES,
    INDEX,
    LOAD_COLUMNS,
    Encoded,
    Piece,
    Refused,
    body_part,
    body_parts,
    decode,
    encode,
    inflate,
    json_cell,
    pack,
)
from .gateway import Gateway, describe_error
from .keys import PAGES_STOP, after, index_key, site_prefix
from .uri import DEFAULT_POOL, DEFAULT_PORT, check_arguments, parse_uri

log = logging.getLogger(__package__)  # the store's one logger: crawler_tasks.backends.hbase

SCAN_PAGE = 1000  # row keys per scan call
GET_ROWS = 20  # records per getRows call


class HBaseStore:
    """Page records in an HBase table, through a Thrift gateway; shared by a process's threads."""

    def __init__(self, host: str, port: int = DEFAULT_PORT, table: str = "pages", *,
                 transport: str = "buffered", protocol: str = "binary", prefix: str | None = None,
                 pool_size: int = DEFAULT_POOL) -> None:
        check_arguments(host, port, table, transport, protocol, prefix, pool_size)
        self.host, self.port, self.table = host, port, table
        self.transport, self.protocol, self.prefix, self.pool_size = transport, protocol, prefix, pool_size
        framed = transport == "framed"
        self._cell_bytes = FRAMED_CELL_BYTES if framed else CELL_BYTES
        self._call_bytes = FRAMED_CALL_BYTES if framed else CALL_BYTES
        self.label = f"{host}:{port}/{prefix + '_' if prefix else ''}{table}"
        self._gateway = Gateway(host, port, table, transport=transport, protocol=protocol, prefix=prefix,
                                pool_size=pool_size, label=self.label)

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
        encoded: list[Encoded] = []
        for record in {r.fingerprint: r for r in records}.values():
            try:
                encoded.append(encode(record, self._cell_bytes, self._call_bytes))
            except Refused as exc:
                failures.append(RecordFailure(str(record.fingerprint), str(exc)))
        if encoded:
            self._gateway.prepare(create=True)
            with self._gateway.unavailable():
                failures += self._write(encoded)
        return failures

    def records(self, crawl_id: str | None = None) -> Iterator[PageRecord]:
        """Every stored record (of one crawl), in row-key order (by site)."""
        if not self._gateway.prepare(create=False):
            return
        wanted = None if crawl_id is None else json_cell(crawl_id, "crawl_id")
        for page in self._key_pages(b"", PAGES_STOP):
            yield from self._load([key for key, crawl in page if wanted is None or crawl == wanted])

    def scan_site(self, host: str, *, subdomains: bool = False) -> Iterator[PageRecord]:
        """The records of one host (every scheme and port), in key order; ``subdomains`` adds theirs."""
        prefixes = [site_prefix(host)]
        if subdomains:
            prefixes.insert(0, site_prefix(host, subdomains=True))  # '.' sorts before ':'
        if not self._gateway.prepare(create=False):
            return
        for prefix in prefixes:
            for page in self._key_pages(prefix, after(prefix)):
                yield from self._load([key for key, _ in page])

    def get(self, fingerprint: str, crawl_id: str | None = None) -> PageRecord | None:
        """The stored record of ``fingerprint`` in ``crawl_id`` (without one: the one written
        last, of any crawl), or None (index row, then page row)."""
        if not self._gateway.prepare(create=False):
            return None
        index = index_key(fingerprint, crawl_id or "")
        found = self._gateway.call(lambda table: table.row(index, columns=[INDEX]))
        row = found.get(INDEX)
        if not row:
            return None
        data = self._gateway.call(lambda table: table.row(row, columns=LOAD_COLUMNS))
        record = self._record(row, data)
        if record is None or record.fingerprint != fingerprint or crawl_id not in (None, record.crawl_id):
            return None
        return record

    def count(self, crawl_id: str | None = None) -> int:
        """How many records are stored (for one crawl): a scan of ``f:crawl_id``."""
        if not self._gateway.prepare(create=False):
            return 0
        wanted = None if crawl_id is None else json_cell(crawl_id, "crawl_id")
        return sum(1 for page in self._key_pages(b"", PAGES_STOP)
                   for _, crawl in page if wanted is None or crawl == wanted)

    def close(self) -> None:
        """Close the connections this process opened; a later call opens new ones."""
        self._gateway.close()

    # -- writing -----------------------------------------------------------

    def _write(self, encoded: list[Encoded]) -> list[RecordFailure]:
        """Send ``encoded``; halve the batch on IllegalArgument until the refused records are alone."""
        try:
            for call in pack(encoded, self._call_bytes):
                self._gateway.call(lambda table, call=call: _mutate(table, call), guard=False)  # type: ignore[misc]  # mypy cannot type a lambda with a default (python/mypy#15459)
        except IllegalArgument as exc:
            if len(encoded) == 1:
                return [RecordFailure(encoded[0].fingerprint, describe_error(exc))]
            half = len(encoded) // 2
            return self._write(encoded[:half]) + self._write(encoded[half:])
        return []

    # -- reading -----------------------------------------------------------

    def _key_pages(self, start: bytes, stop: bytes) -> Iterator[list[tuple[bytes, bytes]]]:
        """(row key, ``f:crawl_id``) of the page rows in [start, stop), one short call per page."""
        while True:
            page = self._gateway.call(lambda table, start=start: list(table.scan(  # type: ignore[misc]  # mypy cannot type a lambda with a default (python/mypy#15459)
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
            rows = self._gateway.call(lambda table, chunk=chunk: table.rows(chunk, columns=LOAD_COLUMNS))  # type: ignore[misc]  # mypy cannot type a lambda with a default (python/mypy#15459)
            for key, data in rows:
                record = self._record(key, data)
                if record is not None:
                    yield record

    def _record(self, key: bytes, data: dict[bytes, bytes]) -> PageRecord | None:
        """The record a page row holds, body included; None if it holds none."""
        fields = decode(data)
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
        parts = body_parts(data)
        if parts == 0:
            return None
        stream = data.get(BODY, b"")
        if parts > 1:
            columns = [body_part(n) for n in range(parts)]
            found = self._gateway.call(lambda table: table.row(key, columns=columns))
            stream = b"".join(found.get(column, b"") for column in columns)
        try:
            return inflate(stream)
        except (zlib.error, UnicodeDecodeError):
            raise StoreUnavailable(f"hbase store {self.label}: the body of row {key[:200]!r} is not whole "
                                   "(a rewrite under way?); read it again") from None


def _mutate(table: happybase.Table, call: list[Piece]) -> None:
    """One ``mutateRows`` call through ``Table.batch()``."""
    with table.batch() as batch:
        for piece in call:
            batch.put(piece.row, piece.cells)
