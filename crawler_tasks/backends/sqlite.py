"""Embedded default store: one SQLite file, WAL mode, a record per crawl and URL, and the items feed.

Safe with several worker processes on one node and with the threads pool: each
thread of each process opens its own connection (SQLite connections must not
cross threads), WAL lets readers run beside the single writer, and a busy
timeout makes writers wait their turn. A batch is one transaction (a commit per
batch, not per record: five times less time per record).

A crawl's records are its own: the ``pages`` table is keyed by crawl and
fingerprint, so a later crawl of the same URL adds its record beside the earlier
one (:meth:`SQLiteStore.get` without a crawl gives the latest). A file written by
an earlier version (keyed by fingerprint alone) is moved to that key the first time
it is opened, in one transaction.

The ``items`` table is the items feed (:mod:`crawler_tasks.core.items`): a row per
item, keyed by crawl, fingerprint and position, written with its page's record;
a page stored again replaces its items. A write
still locked out after ``BUSY_TIMEOUT`` counts as a store that is down
(:class:`StoreUnavailable`): the batch goes back to the store queue and is
retried with backoff.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..core import codec
from ..core.errors import StoreUnavailable, UnknownStore
from ..core.items import ItemRow, item_rows
from ..core.models import PageRecord, json_bytes
from .base import RecordFailure

BUSY_TIMEOUT = 5.0  # seconds a writer waits for the lock

_PAGES = """
CREATE TABLE IF NOT EXISTS {name} (
    crawl_id    TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    url         TEXT NOT NULL,
    status      INTEGER,
    fetched_at  TEXT NOT NULL,
    description TEXT,
    record      TEXT NOT NULL,
    PRIMARY KEY (crawl_id, fingerprint)
)"""
_PAGES_INDEX = "CREATE INDEX IF NOT EXISTS pages_fingerprint ON pages (fingerprint, fetched_at)"
_SCHEMA = _PAGES.format(name="pages") + ";\n" + _PAGES_INDEX + """;
CREATE TABLE IF NOT EXISTS items (
    crawl_id    TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    position    INTEGER NOT NULL,
    type        TEXT NOT NULL,
    url         TEXT NOT NULL,
    fetched_at  TEXT NOT NULL,
    item        TEXT NOT NULL,
    PRIMARY KEY (crawl_id, fingerprint, position)
);
"""
_ITEM = """
INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (crawl_id, fingerprint, position) DO UPDATE SET
    type = excluded.type, url = excluded.url, fetched_at = excluded.fetched_at, item = excluded.item
"""
#: A page's items past its new count (a page stored again with fewer items).
_STALE_ITEMS = "DELETE FROM items WHERE crawl_id = ? AND fingerprint = ? AND position >= ?"

_UPSERT = """
INSERT INTO pages (fingerprint, url, crawl_id, status, fetched_at, description, record)
VALUES (?, ?, ?, ?, ?, ?, CAST(? AS TEXT))
ON CONFLICT (crawl_id, fingerprint) DO UPDATE SET
    url = excluded.url, status = excluded.status,
    fetched_at = excluded.fetched_at, description = excluded.description,
    record = excluded.record
"""


def _record_json(record: PageRecord) -> str | bytes:
    """The ``record`` column: JSON text; a record with a large body as UTF-8 bytes (made
    TEXT by the statement), never whole as a Python string."""
    if record.large:
        return json_bytes(record.to_dict())
    return record.kept_json() or codec.dumps(record.to_dict())


class SQLiteStore:
    """Page records in a SQLite file; one connection per thread of each process."""

    def __init__(self, path: str) -> None:
        if not path:
            raise UnknownStore("sqlite store: empty path")
        try:
            mode: int | None = os.stat(path).st_mode
        except OSError:
            mode = None  # not there yet (the first write creates it), or the write will say why
        except ValueError as exc:  # a NUL byte, a character the file system cannot encode
            raise UnknownStore(f"sqlite store {path!r}: {exc}") from None
        if mode is not None and not stat.S_ISREG(mode):
            raise UnknownStore(f"sqlite store {path!r}: not a file (a directory?)")
        self.path = Path(path)
        self._local = threading.local()
        self._conns: list[tuple[int, sqlite3.Connection]] = []
        self._lock = threading.Lock()

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection (a forked child opens its own)."""
        pid = os.getpid()
        held = getattr(self._local, "conn", None)
        if held is None or held[0] != pid:
            held = self._local.conn = (pid, self._connect())
            with self._lock:
                self._conns.append(held)
        return held[1]

    def _connect(self) -> sqlite3.Connection:
        """A connection in WAL mode with the schema in place.

        Switching to WAL and creating the schema can meet "database is locked"
        without SQLite calling its busy handler (several processes opening the
        file at once), so that step is tried again until ``BUSY_TIMEOUT``.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT
        while True:
            try:
                return self._open()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                    raise StoreUnavailable(f"sqlite store {str(self.path)!r}: {exc}") from None
                time.sleep(0.05)
            except (OSError, sqlite3.Error) as exc:
                raise StoreUnavailable(f"sqlite store {str(self.path)!r}: {exc}") from None

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None,
                               check_same_thread=False)  # closed by close() from any thread
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            _key_by_crawl(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _exists(self) -> bool:
        """Whether the file is there yet; :class:`StoreUnavailable` when that cannot be told."""
        try:
            return self.path.exists()
        except OSError as exc:  # name too long, permission denied
            raise StoreUnavailable(f"sqlite store {str(self.path)!r}: {exc}") from None

    def upsert(self, records: Sequence[PageRecord]) -> list[RecordFailure]:
        """Write ``records`` and their items in one transaction."""
        rows = [(r.fingerprint, r.url, r.crawl_id, r.status, r.fetched_at, r.description,
                 _record_json(r)) for r in records]
        items = [(i.crawl_id, i.fingerprint, i.position, i.type, i.url, i.fetched_at, codec.dumps(i.item))
                 for r in records for i in item_rows(r)]
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            with conn:  # commits, or rolls back on an error
                conn.executemany(_UPSERT, rows)
                if items or conn.execute("SELECT EXISTS (SELECT 1 FROM items)").fetchone()[0]:
                    conn.executemany(_STALE_ITEMS, [(r.crawl_id, r.fingerprint, len(r.items)) for r in records])
                    conn.executemany(_ITEM, items)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"sqlite store {str(self.path)!r}: {exc}") from None
        return []

    def item_rows(self, crawl_id: str | None = None, kind: str | None = None) -> Iterator[ItemRow]:
        """The items feed (of one crawl, of one type), in the order the pages were first stored."""
        if not self._exists():
            return
        where = [(c, v) for c, v in (("crawl_id = ?", crawl_id), ("type = ?", kind)) if v is not None]
        sql = "SELECT crawl_id, fingerprint, position, type, url, fetched_at, item FROM items"
        if where:
            sql += " WHERE " + " AND ".join(c for c, _ in where)
        for crawl, fingerprint, position, kind_, url, fetched_at, item in self.conn.execute(
                sql + " ORDER BY rowid", tuple(v for _, v in where)):
            yield ItemRow(crawl, fingerprint, position, kind_, url, fetched_at, codec.loads(item))

    def item_counts(self, crawl_id: str | None = None) -> dict[tuple[str, str], int]:
        """Items per (crawl, type), in order of crawl and type."""
        if not self._exists():
            return {}
        args: tuple[str, ...] = ()
        sql = "SELECT crawl_id, type, count(*) FROM items"
        if crawl_id is not None:
            sql, args = sql + " WHERE crawl_id = ?", (crawl_id,)
        return {(c, t): n for c, t, n in self.conn.execute(sql + " GROUP BY crawl_id, type ORDER BY 1, 2", args)}

    def records(self, crawl_id: str | None = None) -> Iterator[PageRecord]:
        if not self._exists():
            return
        args: tuple[str, ...]
        sql, args = "SELECT record FROM pages ORDER BY rowid", ()
        if crawl_id is not None:
            sql, args = "SELECT record FROM pages WHERE crawl_id = ? ORDER BY rowid", (crawl_id,)
        for (raw,) in self.conn.execute(sql, args):
            yield PageRecord.from_dict(codec.loads(raw))

    def get(self, fingerprint: str, crawl_id: str | None = None) -> PageRecord | None:
        if not self._exists():
            return None
        try:
            if crawl_id is None:  # the latest of any crawl
                row = self.conn.execute("SELECT record FROM pages WHERE fingerprint = ? "
                                        "ORDER BY fetched_at DESC LIMIT 1", (fingerprint,)).fetchone()
            else:
                row = self.conn.execute("SELECT record FROM pages WHERE crawl_id = ? AND fingerprint = ?",
                                        (crawl_id, fingerprint)).fetchone()
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"sqlite store {str(self.path)!r}: {exc}") from None
        return PageRecord.from_dict(codec.loads(row[0])) if row else None

    def count(self, crawl_id: str | None = None) -> int:
        if not self._exists():
            return 0
        if crawl_id is None:
            return self.conn.execute("SELECT count(*) FROM pages").fetchone()[0]
        return self.conn.execute("SELECT count(*) FROM pages WHERE crawl_id = ?",
                                 (crawl_id,)).fetchone()[0]

    def close(self) -> None:
        """Close the connections this process opened (from any of its threads)."""
        with self._lock:
            conns, self._conns = self._conns, []
        for pid, conn in conns:
            if pid == os.getpid():
                conn.close()
        self._local = threading.local()


def _key_by_crawl(conn: sqlite3.Connection) -> None:
    """Move a ``pages`` table keyed by fingerprint alone (an earlier version's) to the key
    (crawl, fingerprint), in one transaction; nothing when it has that key already."""
    def keyed_alone() -> bool:
        return [row[1] for row in conn.execute("PRAGMA table_info(pages)") if row[5]] == ["fingerprint"]

    if not keyed_alone():
        return
    conn.execute("BEGIN IMMEDIATE")
    with conn:
        if not keyed_alone():  # another process moved it first
            return
        conn.execute(_PAGES.format(name="pages_by_crawl"))
        conn.execute("INSERT INTO pages_by_crawl (crawl_id, fingerprint, url, status, fetched_at, description, "
                     "record) SELECT crawl_id, fingerprint, url, status, fetched_at, description, record "
                     "FROM pages ORDER BY rowid")
        conn.execute("DROP TABLE pages")
        conn.execute("ALTER TABLE pages_by_crawl RENAME TO pages")
        conn.execute(_PAGES_INDEX)
