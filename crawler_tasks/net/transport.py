"""The HTTP transport under requests: one deadline per download, strict headers, an address guard.

requests and urllib3 bound each socket read, not a download: a server that
drips a byte every half second, in its headers or its body, holds a worker
for as long as it likes. Here every response is armed with a deadline on a
single per-process watchdog thread, which shuts the socket down when the
deadline passes, whatever phase the download is in. A response whose headers
are cut off by the server closing the connection is an error (http.client
would take it for a complete response with no body).

The address guard (:mod:`crawler_tasks.core.addresses` has its rules) runs before
any packet leaves: the host is resolved here, each address judged, and the
socket connects only to an address that passed, the very one judged, so a
name that resolves to a public address once and to a private one the next
time (DNS rebinding) gains nothing. Requests through a proxy take the same
connections (deadline and strict headers included); the connection to the
proxy is not judged (the operator configured it), the target is: its name is
resolved here and every address it has must pass before the request is sent.
"""

from __future__ import annotations

import functools
import heapq
import http.client
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from requests.utils import select_proxy
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import parse_url
from urllib3.util.connection import allowed_gai_family

from ..core.addresses import AddressPolicy, literal_addresses


class HeadersCutOff(http.client.HTTPException):
    """The connection closed before the response's headers ended."""


class BlockedAddress(OSError):
    """A host resolved to an address the guard refuses (nothing was sent to it)."""


def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, in the resolver's order (``socket.gaierror`` if none)."""
    infos = socket.getaddrinfo(host.strip("[]"), port, allowed_gai_family(), socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def allowed_addresses(policy: AddressPolicy, host: str, addresses: list[str]) -> list[str]:
    """The addresses of ``host`` the policy lets a connection go to; :class:`BlockedAddress`
    (naming the first refused one) when there is none."""
    if policy.allows_host(host):
        return addresses
    allowed: list[str] = []
    refused: list[str] = []
    for address in addresses:
        reason = policy.refusal(host, address)
        (refused if reason else allowed).append(reason or address)
    if not allowed:
        raise BlockedAddress(refused[0] if refused else f"{host} has no address")
    return allowed


def judge_target(policy: AddressPolicy, url: str) -> None:
    """Before a request goes through a proxy: every address of its host must be allowed.

    The proxy connects, not us, to whichever address it picks. With the private
    networks allowed, only a literal address is judged (a name may be one only
    the proxy can resolve). Raises :class:`BlockedAddress` or ``socket.gaierror``.
    """
    parts = parse_url(url)
    host = parts.host or ""
    if policy.allows_host(host):
        return
    if policy.deny_private:
        addresses = resolve(host, parts.port or (443 if parts.scheme == "https" else 80))
    else:
        addresses = literal_addresses(host)
    for address in addresses:
        reason = policy.refusal(host, address)
        if reason:
            raise BlockedAddress(reason)


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


@contextmanager
def paused() -> Iterator[None]:
    """The current thread's download deadline stops in this block and moves on by the
    time spent in it (the download waits on this worker, not on the server)."""
    state = getattr(_local, "deadline", None)
    if state is None:
        yield
        return
    started = time.monotonic()
    socks = state.pause()
    try:
        yield
    finally:
        state.resume(socks, time.monotonic() - started)


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

    def pause(self) -> list[socket.socket]:
        """Disarm the live entries; their sockets, to arm again on :meth:`resume`."""
        socks = [e.sock for e in self.entries if e.armed and not e.fired and e.sock is not None]
        self.disarm()
        return socks

    def resume(self, socks: list[socket.socket], waited: float) -> None:
        self.at += waited
        for sock in socks:
            self.arm(sock)


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
    """Arms the thread's deadline on each response; connects only to addresses the policy allows."""

    response_class = _StrictResponse
    policy = AddressPolicy()

    def _new_conn(self) -> socket.socket:
        if self.proxy is not None:  # type: ignore[attr-defined]
            # To the proxy the operator configured; GuardedAdapter.send judged the target.
            return super()._new_conn()  # type: ignore[misc]
        name = self._dns_host  # type: ignore[has-type]
        try:
            addresses = resolve(name, self.port)  # type: ignore[attr-defined]
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc  # type: ignore[attr-defined, arg-type]
        allowed = allowed_addresses(self.policy, self.host, addresses)  # type: ignore[attr-defined]
        # urllib3 connects to ``_dns_host``: point it at each judged address in turn, so
        # no second resolution can hand the socket another one. TLS still verifies
        # ``host`` as it was once this returns.
        try:
            for i, address in enumerate(allowed):
                self._dns_host = address
                try:
                    return super()._new_conn()  # type: ignore[misc]
                except (NewConnectionError, ConnectTimeoutError):
                    if i == len(allowed) - 1:
                        raise
        finally:
            self._dns_host = name
        raise AssertionError("unreachable")

    def endheaders(self, *args: Any, **kwargs: Any) -> None:
        # http.client's buffer holds the request line and headers as they go on
        # the wire (Host and urllib3's defaults included).
        self._sent_head = b"\r\n".join(getattr(self, "_buffer", ())) + b"\r\n\r\n"
        super().endheaders(*args, **kwargs)  # type: ignore[misc]
        self._sent_at = time.monotonic()  # the head is on the wire: the host's pace counts from here

    def getresponse(self) -> Any:
        state = getattr(_local, "deadline", None)
        if state is not None and self.sock is not None:  # type: ignore[attr-defined]
            state.arm(self.sock)  # type: ignore[attr-defined]
        response = super().getresponse()  # type: ignore[misc]
        original = getattr(response, "_original_response", None)
        response.wire = Wire(getattr(self, "_sent_head", b""), getattr(original, "head", b""),
                             getattr(self, "_sent_at", 0.0))
        return response


@dataclass(frozen=True)
class Wire:
    """The heads of one exchange as they crossed the wire: the request line and headers
    sent, the status line and headers received (each ending with its blank line)."""

    request_head: bytes
    response_head: bytes
    #: ``time.monotonic()`` when the request head was sent (0.0: not known).
    sent_at: float = 0.0


@functools.cache
def _pool_classes(policy: AddressPolicy) -> dict[str, type]:
    """urllib3 pool classes on the guarded connections (built once per policy)."""
    http_conn = type("GuardedHTTPConnection", (_GuardedMixin, HTTPConnection), {"policy": policy})
    https_conn = type("GuardedHTTPSConnection", (_GuardedMixin, HTTPSConnection), {"policy": policy})
    return {
        "http": type("GuardedHTTPConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn}),
        "https": type("GuardedHTTPSConnectionPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn}),
    }


class GuardedAdapter(HTTPAdapter):
    """requests' adapter on the guarded connections, direct or through a proxy (no retries:
    the crawler decides).

    One worker thread uses its session for one request at a time, so each host's pool
    keeps one idle connection, and ``pool_hosts`` pools at most are kept (urllib3 closes
    the least recently used): the thread holds at most ``pool_hosts`` idle sockets.
    """

    def __init__(self, *, policy: AddressPolicy | None = None, pool_hosts: int = 8) -> None:
        self.policy = policy if policy is not None else AddressPolicy()
        super().__init__(pool_connections=pool_hosts, pool_maxsize=1, max_retries=0)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _pool_classes(self.policy)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        # requests builds a proxy's pools from urllib3's own classes: without this, a
        # proxied request would have no deadline, no strict headers and no guard.
        if proxy.lower().startswith("socks"):
            raise requests.exceptions.InvalidProxyURL("SOCKS proxies are not supported: use http:// or https://")
        new = proxy not in self.proxy_manager
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if new:
            manager.pool_classes_by_scheme = _pool_classes(self.policy)
        return manager

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             verify: Any = True, cert: Any = None, proxies: Any = None) -> requests.Response:
        if proxies and select_proxy(request.url or "", proxies):
            try:
                judge_target(self.policy, request.url or "")
            except (BlockedAddress, socket.gaierror) as exc:
                raise requests.exceptions.ConnectionError(exc, request=request) from None
        return super().send(request, stream=stream, timeout=timeout, verify=verify, cert=cert,
                            proxies=proxies)
