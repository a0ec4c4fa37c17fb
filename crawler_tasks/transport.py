"""The HTTP transport under requests: one deadline per download, strict headers, an address guard.

requests and urllib3 bound each socket read, not a download: a server that
drips a byte every half second, in its headers or its body, holds a worker
for as long as it likes. Here every response is armed with a deadline on a
single per-process watchdog thread, which shuts the socket down when the
deadline passes, whatever phase the download is in. A response whose headers
are cut off by the server closing the connection is an error (http.client
would take it for a complete response with no body). With
``CRAWLER_DENY_PRIVATE_NETWORKS`` on, the address a connection actually
reached (not what a resolver said earlier) must be a public one, so DNS
rebinding cannot get a URL through to loopback, private, link-local or
cloud-metadata addresses.
"""

from __future__ import annotations

import functools
import heapq
import http.client
import ipaddress
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool


class HeadersCutOff(http.client.HTTPException):
    """The connection closed before the response's headers ended."""


class BlockedAddress(OSError):
    """A connection reached an address that ``CRAWLER_DENY_PRIVATE_NETWORKS`` refuses."""


def is_public(address: str) -> bool:
    """True for a globally routable address (IPv4-mapped IPv6 judged as its IPv4)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


class _Entry:
    __slots__ = ("sock", "armed", "fired")

    def __init__(self, sock: socket.socket) -> None:
        self.sock: socket.socket | None = sock
        self.armed, self.fired = True, False


class Watchdog:
    """One thread that shuts down sockets whose download ran past its deadline."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Entry]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, sock: socket.socket, deadline: float) -> _Entry:
        entry = _Entry(sock)
        with self._cond:
            if self._thread is None or not self._thread.is_alive():  # first use, or after fork
                self._thread = threading.Thread(target=self._run, name="download-deadlines", daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (deadline, next(self._seq), entry))
            if self._heap[0][2] is entry:
                self._cond.notify()
        return entry

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._cond.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                _, _, entry = heapq.heappop(self._heap)
            sock = entry.sock
            if entry.armed and sock is not None:
                entry.fired = True
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


_WATCHDOG = Watchdog()
_local = threading.local()


@contextmanager
def deadline(at: float) -> Iterator[Any]:
    """Downloads in this block, on this thread, end at monotonic time ``at``.

    Yields an object whose ``expired`` says whether the watchdog cut the download.
    """
    state = _Deadline(at)
    _local.deadline = state
    try:
        yield state
    finally:
        _local.deadline = None
        state.disarm()


class _Deadline:
    def __init__(self, at: float) -> None:
        self.at = at
        self.entries: list[_Entry] = []

    @property
    def expired(self) -> bool:
        """True when the watchdog cut a socket of this download."""
        return any(e.fired for e in self.entries)

    def arm(self, sock: socket.socket) -> None:
        self.entries.append(_WATCHDOG.arm(sock, self.at))

    def disarm(self) -> None:
        for entry in self.entries:
            entry.armed = False
            entry.sock = None  # the heap keeps the entry until its deadline: not the socket


class _StrictResponse(http.client.HTTPResponse):
    """http.client's response, but headers cut off by EOF raise :class:`HeadersCutOff`.

    ``head`` is the status line and header lines exactly as received (the final
    response's, after any 1xx), for archives and exact byte counts.
    """

    head: bytes = b""

    def begin(self) -> None:
        watch = _LastLine(self.fp)
        self.fp = watch  # type: ignore[assignment]
        try:
            super().begin()
        finally:
            if self.fp is watch:
                self.fp = watch.raw
        if watch.last == b"":
            self.close()
            raise HeadersCutOff("the connection closed inside the response headers")
        self.head = b"".join(watch.lines[watch.start:])


class _LastLine:
    """A file wrapper that remembers the lines read (the last: b'' = end of stream)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.last: bytes | None = None
        self.lines: list[bytes] = []
        self.start = 0  # where the last response head (after any 1xx) begins

    def readline(self, limit: int = -1) -> bytes:
        self.last = self.raw.readline(limit)
        if self.lines and self.lines[-1] in (b"\r\n", b"\n"):
            self.start = len(self.lines)
        self.lines.append(self.last)
        return self.last

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class _GuardedMixin:
    """Arms the thread's deadline on each response; checks the peer address on connect."""

    response_class = _StrictResponse
    deny_private = False

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()  # type: ignore[misc]
        if self.deny_private:
            peer = sock.getpeername()[0]
            if not is_public(peer):
                sock.close()
                raise BlockedAddress(f"{self.host} is at {peer}, a private or reserved address")  # type: ignore[attr-defined]
        return sock

    def endheaders(self, *args: Any, **kwargs: Any) -> None:
        # http.client's buffer holds the request line and headers as they go on
        # the wire (Host and urllib3's defaults included).
        self._sent_head = b"\r\n".join(getattr(self, "_buffer", ())) + b"\r\n\r\n"
        super().endheaders(*args, **kwargs)  # type: ignore[misc]

    def getresponse(self) -> Any:
        state = getattr(_local, "deadline", None)
        if state is not None and self.sock is not None:  # type: ignore[attr-defined]
            state.arm(self.sock)  # type: ignore[attr-defined]
        response = super().getresponse()  # type: ignore[misc]
        original = getattr(response, "_original_response", None)
        response.wire = Wire(getattr(self, "_sent_head", b""), getattr(original, "head", b""))
        return response


@dataclass(frozen=True)
class Wire:
    """The heads of one exchange as they crossed the wire: the request line and headers
    sent, the status line and headers received (each ending with its blank line)."""

    request_head: bytes
    response_head: bytes


@functools.cache
def _pool_classes(deny_private: bool) -> dict[str, type]:
    """urllib3 pool classes on the guarded connections (built once per flag)."""
    http_conn = type("GuardedHTTPConnection", (_GuardedMixin, HTTPConnection), {"deny_private": deny_private})
    https_conn = type("GuardedHTTPSConnection", (_GuardedMixin, HTTPSConnection), {"deny_private": deny_private})
    return {
        "http": type("GuardedHTTPConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn}),
        "https": type("GuardedHTTPSConnectionPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn}),
    }


class GuardedAdapter(HTTPAdapter):
    """requests' adapter on the guarded connections (no retries: the crawler decides).

    One worker thread uses its session for one request at a time, so each host's pool
    keeps one idle connection, and ``pool_hosts`` pools at most are kept (urllib3 closes
    the least recently used): the thread holds at most ``pool_hosts`` idle sockets.
    """

    def __init__(self, *, deny_private: bool = False, pool_hosts: int = 8) -> None:
        self.deny_private = deny_private
        super().__init__(pool_connections=pool_hosts, pool_maxsize=1, max_retries=0)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _pool_classes(self.deny_private)
