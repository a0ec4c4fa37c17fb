"""The HBase table through its Thrift gateway: pooled connections, gateway errors, table creation.

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

**Errors.** A gateway that cannot be reached or drops the connection, a Thrift
transport or protocol error, and the gateway's ``IOError`` (region busy, table
gone) raise :class:`StoreUnavailable` with one line (the store queue retries the
batch). A table that lacks our families (``NoSuchColumnFamilyException``) is the
table's problem, not one record's (every record writes the same families):
:class:`StoreUnavailable`, so nothing is dropped while an operator adds them.
Thrift's exception messages are bytes: they are decoded, never ``str()``-ed
(that raises TypeError).

**Table creation.** On the first write (one thread per process does it), when
``getTableNames`` does not list the table, the store creates it with families
``f``, ``c``, ``l``, ``i``; a worker that loses the race to another gets
``AlreadyExists`` and goes on. Either way it then checks the table has all four
families. On a real cluster a table just created may not serve for a moment:
those first writes fail as :class:`StoreUnavailable` and are retried. Reads
never create the table: an absent table holds no records.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import happybase
from happybase.pool import NoConnectionsAvailable
from Hbase_thrift import AlreadyExists  # happybase's own IDL module
from Hbase_thrift import IOError as GatewayIOError
from thriftpy2.thrift import TException
from thriftpy2.transport import TTransportException

from ...core.errors import StoreUnavailable
from .cells import FAMILIES

log = logging.getLogger(__package__)  # the store's one logger: crawler_tasks.backends.hbase

SOCKET_TIMEOUT_S = 30.0  # seconds one Thrift call may wait for the gateway
POOL_WAIT_S = 30.0  # seconds a thread waits for a free pooled connection

T = TypeVar("T")


class Gateway:
    """One HBase table through a Thrift gateway, for every thread of a process (see the module doc)."""

    def __init__(self, host: str, port: int, table: str, *, transport: str, protocol: str,
                 prefix: str | None, pool_size: int, label: str) -> None:
        self.host, self.port, self.table = host, port, table
        self.transport, self.protocol, self.prefix, self.pool_size = transport, protocol, prefix, pool_size
        self.label = label
        self._lock = threading.Lock()
        self._prepare_lock = threading.Lock()
        self._pool: happybase.ConnectionPool | None = None
        self._pool_pid = 0
        self._opened: set[happybase.Connection] = set()
        self._inherited: list[happybase.ConnectionPool] = []
        self._ready = False

    def close(self) -> None:
        """Close the connections this process opened; a later call opens new ones."""
        with self._lock:
            pool, opened, pid = self._pool, self._opened, self._pool_pid
            self._pool, self._opened = None, set()
        if pool is None or pid != os.getpid():
            return
        for conn in opened:
            _close_quietly(conn)

    # -- the table ---------------------------------------------------------

    def prepare(self, *, create: bool) -> bool:
        """Whether the table is there with our families; creates it first when ``create``."""
        if self._ready:
            return True
        with self._prepare_lock:  # one thread of the process checks (and creates) the table
            return self._ready or self._check_table(create)

    def _check_table(self, create: bool) -> bool:
        with self.unavailable():
            names = self.run(lambda conn: conn.tables())
            if self.table.encode() not in names:
                if not create:
                    return False
                try:
                    self.run(lambda conn: conn.create_table(self.table, FAMILIES))
                except AlreadyExists:
                    pass  # another worker created it first: go on
            families = self.call(lambda table: table.families(), guard=False)
        missing = sorted(set(FAMILIES) - {name.decode(errors="replace") for name in families})
        if missing:
            raise StoreUnavailable(f"hbase store {self.label}: the table lacks column families "
                                   f"{', '.join(missing)} (made by another program?); add them "
                                   "or name another table")
        self._ready = True
        return True

    # -- calls -------------------------------------------------------------

    def call(self, action: Callable[[happybase.Table], T], *, guard: bool = True) -> T:
        """Run ``action`` on the table; errors as :class:`StoreUnavailable` when ``guard``."""
        if not guard:
            return self.run(lambda conn: action(conn.table(self.table)))
        with self.unavailable():
            return self.run(lambda conn: action(conn.table(self.table)))

    def run(self, action: Callable[[happybase.Connection], T]) -> T:
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
    def unavailable(self) -> Iterator[None]:
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


def _close_quietly(conn: happybase.Connection) -> None:
    """Close a connection's socket, whatever state it is in."""
    try:
        conn.close()
    except (TException, OSError):
        pass
