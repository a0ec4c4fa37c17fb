"""The hostile web site the robustness tests crawl, served on 127.0.0.1 from threads.

``HostileSite().start()`` runs two servers on raw sockets, one daemon thread per
connection: plain HTTP at ``.url`` (every path in ``HOSTILE_PATHS``, all linked
from ``/``) and HTTPS at ``.tls_url``, whose certificate comes from a trustme CA
the client is never given. Responses are written by hand so that each one can
break HTTP in exactly one way. Every response says ``Connection: close`` and the
connection is closed after it; HEAD drops the body of well-formed responses only.
``.stop()`` returns within about a second, dripping and stalled connections
included. Nothing is logged.
"""

from __future__ import annotations

import functools
import socket
import ssl
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from html import escape
from urllib.parse import urlsplit

import trustme

HOSTILE_PATHS: dict[str, str] = {
    "/drip": "200 text/html, no Content-Length, then a few bytes every 0.5 s forever",
    "/stall-headers": "a status line and one header, then silence with the socket open",
    "/cut-headers": "a status line and one header, then close before the blank line",
    "/gzip-bomb": "Content-Encoding: gzip, 1 GiB of zeros in about 1 MB",
    "/deflate-bomb": "Content-Encoding: deflate (zlib), 1 GiB of zeros in about 1 MB",
    "/redirects/10000": "302 chain of 10,000 hops, alternating 127.0.0.1 and localhost",
    "/links/1000000": "one page of 1,000,000 distinct links /l/<i> (about 25 MB)",
    "/long-links/0": "1,000 distinct links of 10 KiB each, /l/long-<n>-<i>/xxx… (another set per <n>)",
    "/deep": "100,000 nested <div> levels around one link to /deep-end",
    "/bad-utf8": "charset=utf-8 with invalid UTF-8 in the title and body",
    "/mixed-encoding": "header utf-8, <meta> windows-1252, body mixes UTF-8 and latin-1",
    "/many-headers": "200 with 10,000 distinct response headers X-H-<i>",
    "/cl-short": "Content-Length: 100000, 100 bytes of body, then close",
    "/cl-long": "Content-Length: 10, 5,000 bytes of body, then close",
}

BOMB_SIZE = 1 << 30  # zeros inside each bomb
DRIP_EVERY = 0.5  # seconds between /drip writes
DEEP_LEVELS = 100_000
MANY_HEADERS = 10_000
REDIRECT_HOSTS = ("localhost", "127.0.0.1")  # /redirects/<k> is sent to localhost iff k is odd
POLL = 0.25  # longest wait before a thread looks at the stop flag
REQUEST_TIMEOUT = 10.0  # for the request head
HANDSHAKE_TIMEOUT = 5.0
SEND_TIMEOUT = 30.0  # per 64 KiB slice; a client that stops reading is dropped
SLICE = 64 * 1024
PARTIAL_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03"  # as zlib writes it at level 9
ZLIB_HEADER = b"\x78\xda"  # as zlib writes it at level 9
LINK = '<a href="/l/{}">x</a>\n'
LINKS_BATCH = 10_000
LONG_LINKS = 1000
LONG_LINK_BYTES = 10 * 1024

Handler = Callable[["Conn", str], None]


class Gone(Exception):
    """The client hung up, or the server is stopping."""


# -- bodies ---------------------------------------------------------------
def page(title: str, body: str = "", head: str = "") -> bytes:
    return f"<html><head><title>{title}</title>{head}</head><body>{body}</body></html>".encode()


def filler(size: int) -> bytes:
    """Exactly ``size`` bytes of HTML-ish text."""
    return (b"<html><body><p>" + b"x" * size)[:size]


_BOMBS: dict[str, bytes] = {}
_BOMBS_LOCK = threading.Lock()


def deflate_zeros() -> tuple[bytes, int, int]:
    """A raw deflate stream of BOMB_SIZE zeros, with their CRC-32 and Adler-32."""
    block = bytes(1 << 20)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts, crc, adler = [], 0, 1
    for _ in range(BOMB_SIZE // len(block)):
        parts.append(comp.compress(block))
        crc, adler = zlib.crc32(block, crc), zlib.adler32(block, adler)
    parts.append(comp.flush())
    return b"".join(parts), crc, adler


def bomb(encoding: str) -> bytes:
    """The ``gzip`` or ``deflate`` bomb body, built once per process (about 4 s).

    One raw deflate stream is wrapped both ways: the bytes are those of
    ``zlib.compressobj(9, zlib.DEFLATED, 31)`` (or ``15``), in half the time.
    """
    with _BOMBS_LOCK:
        if not _BOMBS:
            raw, crc, adler = deflate_zeros()
            _BOMBS["gzip"] = GZIP_HEADER + raw + struct.pack("<II", crc, BOMB_SIZE & 0xFFFFFFFF)
            _BOMBS["deflate"] = ZLIB_HEADER + raw + struct.pack(">I", adler)
        return _BOMBS[encoding]


@functools.cache
def deep_page() -> bytes:
    return (b"<html><head><title>Deep</title></head><body>" + b"<div>" * DEEP_LEVELS
            + b'<p>bottom</p><a href="/deep-end">deep end</a>' + b"</div>" * DEEP_LEVELS
            + b"</body></html>")


BAD_UTF8 = (b"<html><head><title>Bad \xff\xfe title \xc3\x28</title></head><body>"
            b"<p>lone continuation \x80\xbf, overlong \xc0\xaf, surrogate \xed\xa0\x80, "
            b"truncated \xe2\x82 and out of range \xf4\x90\x80\x80</p>"
            b'<a href="/ok">ok</a></body></html>')

MIXED_ENCODING = (b'<html><head><meta charset="windows-1252"><title>Caf\xc3\xa9 or caf\xe9</title>'
                  b"</head><body><p>UTF-8: na\xc3\xafve \xe2\x82\xac 5</p>"
                  b"<p>latin-1: na\xefve \xe9t\xe9</p><p>windows-1252: \x93quoted\x94 \x805</p>"
                  b'<a href="/ok">ok</a></body></html>')


def links_head(n: int) -> bytes:
    return f"<html><head><title>{n} links</title></head><body>\n".encode()


LINKS_TAIL = b"</body></html>"


def digit_count(n: int) -> int:
    """Total decimal digits of 0 .. n-1."""
    total, low, width = 0, 0, 1
    while low < n:
        high = min(n, 10 ** width)
        total += (high - low) * width
        low, width = high, width + 1
    return total


def links_length(n: int) -> int:
    return len(links_head(n)) + n * len(LINK.format("")) + digit_count(n) + len(LINKS_TAIL)


def links_body(n: int) -> Iterator[bytes]:
    yield links_head(n)
    for start in range(0, n, LINKS_BATCH):
        yield "".join(map(LINK.format, range(start, min(n, start + LINKS_BATCH)))).encode()
    yield LINKS_TAIL


@functools.lru_cache(maxsize=4)
def long_links_page(n: int) -> bytes:
    """/long-links/<n>: :data:`LONG_LINKS` links of :data:`LONG_LINK_BYTES` bytes, distinct per ``n``."""
    hrefs = (f"/l/long-{n}-{i}/" for i in range(LONG_LINKS))
    links = "".join(f'<a href="{h}{"x" * (LONG_LINK_BYTES - len(h))}">{i}</a>\n' for i, h in enumerate(hrefs))
    return page(f"{LONG_LINKS} long links", links)


def count(arg: str) -> int | None:
    """The ``<n>`` of ``/redirects/<n>`` and friends, or None if it is not one."""
    return int(arg) if arg.isascii() and arg.isdigit() and len(arg) <= 9 else None


# -- one connection --------------------------------------------------------
class Conn:
    """One client connection: its socket and the server it came to."""

    def __init__(self, sock: socket.socket, server: Server) -> None:
        self.sock = sock
        self.server = server
        self.head = False

    def stopping(self) -> bool:
        return self.server.site.stopping.is_set()

    def run(self) -> None:
        if self.server.tls is not None:
            self.handshake()
        request = self.read_request()
        if request is None:
            return
        method, target = request
        self.head = method == "HEAD"
        handler, arg = route(urlsplit(target).path)
        with suppress(Gone):
            handler(self, arg)

    def handshake(self) -> None:
        assert self.server.tls is not None
        self.sock.settimeout(HANDSHAKE_TIMEOUT)
        self.sock = self.server.tls.wrap_socket(self.sock, server_side=True,
                                                do_handshake_on_connect=False)
        self.sock.do_handshake()

    def recv(self, seconds: float) -> bytes | None:
        """Bytes from the client, b"" once it hangs up, None if nothing came in time."""
        self.sock.settimeout(seconds)
        try:
            return self.sock.recv(4096)
        except TimeoutError:
            return None
        except OSError as e:
            raise Gone from e

    def read_request(self) -> tuple[str, str] | None:
        """(method, target) of the request head, or None if none arrives in time."""
        data, deadline = b"", time.monotonic() + REQUEST_TIMEOUT
        while b"\r\n\r\n" not in data:
            if self.stopping() or time.monotonic() > deadline or len(data) > SLICE:
                return None
            chunk = self.recv(POLL)
            if chunk == b"":
                return None
            data += chunk or b""
        parts = data.split(b"\r\n", 1)[0].decode("latin-1").split()
        return (parts[0], parts[1]) if len(parts) == 3 else None

    def idle(self, seconds: float) -> None:
        """Send nothing for ``seconds``; raise Gone if the client hangs up or the server stops."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self.stopping() or self.recv(min(left, POLL)) == b"":
                raise Gone
        if self.stopping():
            raise Gone

    def send(self, data: bytes) -> None:
        self.sock.settimeout(SEND_TIMEOUT)
        view = memoryview(data)
        for start in range(0, len(view), SLICE):
            if self.stopping():
                raise Gone
            try:
                self.sock.sendall(view[start:start + SLICE])
            except OSError as e:
                raise Gone from e

    def send_head(self, status: str, headers: Iterable[str], ctype: str = "text/html") -> None:
        lines = [f"HTTP/1.1 {status}", f"Content-Type: {ctype}", *headers, "Connection: close"]
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def respond(self, status: str, body: bytes, ctype: str = "text/html",
                headers: Iterable[str] = ()) -> None:
        """A well-formed response: Content-Length, ``Connection: close``, body unless HEAD."""
        self.send_head(status, [f"Content-Length: {len(body)}", *headers], ctype)
        if not self.head:
            self.send(body)

    def abort(self) -> None:
        """Wake a thread blocked on this socket; the thread itself closes it."""
        with suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)
        self.sock.close()


# -- routes: /<name>/<arg> --------------------------------------------------
def r_index(c: Conn, arg: str) -> None:
    items = [f'<li><a href="{p}">{p}</a> {escape(d)}</li>' for p, d in HOSTILE_PATHS.items()]
    items.append('<li><a href="/ok">/ok</a> a normal page</li>')
    tls_ok = f"{c.server.site.tls_url}/ok"
    items.append(f'<li><a href="{tls_ok}">{tls_ok}</a> HTTPS with an untrusted certificate</li>')
    c.respond("200 OK", page("Hostile index", f"<ul>{''.join(items)}</ul>"))


def r_ok(c: Conn, arg: str) -> None:
    c.respond("200 OK", page("OK", "<p>A normal page.</p>"))


def r_missing(c: Conn, arg: str) -> None:
    c.respond("404 Not Found", page("Not found"))


def r_drip(c: Conn, arg: str) -> None:
    c.send_head("200 OK", [])
    c.send(b"<html><body>\n")
    while True:
        c.idle(DRIP_EVERY)
        c.send(b"<p>drip</p>\n")


def r_stall_headers(c: Conn, arg: str) -> None:
    c.send(PARTIAL_HEAD)
    while True:
        c.idle(3600)


def r_cut_headers(c: Conn, arg: str) -> None:
    c.send(PARTIAL_HEAD)


def r_gzip_bomb(c: Conn, arg: str) -> None:
    c.respond("200 OK", bomb("gzip"), headers=["Content-Encoding: gzip"])


def r_deflate_bomb(c: Conn, arg: str) -> None:
    c.respond("200 OK", bomb("deflate"), headers=["Content-Encoding: deflate"])


def r_redirects(c: Conn, arg: str) -> None:
    n = count(arg)
    if n is None:
        return r_missing(c, arg)
    if n == 0:
        return c.respond("200 OK", page("Redirects done", "<p>The end of the chain.</p>"))
    s = c.server
    location = f"{s.scheme}://{REDIRECT_HOSTS[n % 2]}:{s.port}/redirects/{n - 1}"
    c.respond("302 Found", page("Moved"), headers=[f"Location: {location}"])


def r_links(c: Conn, arg: str) -> None:
    n = count(arg)
    if n is None:
        return r_missing(c, arg)
    c.send_head("200 OK", [f"Content-Length: {links_length(n)}"])
    if not c.head:
        for chunk in links_body(n):
            c.send(chunk)


def r_long_links(c: Conn, arg: str) -> None:
    n = count(arg)
    if n is None:
        return r_missing(c, arg)
    c.respond("200 OK", long_links_page(n))


def r_l(c: Conn, arg: str) -> None:
    c.respond("200 OK", page(f"Link {escape(arg)}"))


def r_deep(c: Conn, arg: str) -> None:
    c.respond("200 OK", deep_page())


def r_deep_end(c: Conn, arg: str) -> None:
    c.respond("200 OK", page("Deep end", "<p>Made it.</p>"))


def r_bad_utf8(c: Conn, arg: str) -> None:
    c.respond("200 OK", BAD_UTF8, ctype="text/html; charset=utf-8")


def r_mixed_encoding(c: Conn, arg: str) -> None:
    c.respond("200 OK", MIXED_ENCODING, ctype="text/html; charset=utf-8")


def r_many_headers(c: Conn, arg: str) -> None:
    c.respond("200 OK", page("Many headers"), headers=[f"X-H-{i}: v" for i in range(MANY_HEADERS)])


def r_cl_short(c: Conn, arg: str) -> None:
    c.send_head("200 OK", ["Content-Length: 100000"])
    c.send(filler(100))


def r_cl_long(c: Conn, arg: str) -> None:
    c.send_head("200 OK", ["Content-Length: 10"])
    c.send(filler(5000))


ROUTES: dict[str, Handler] = {
    "": r_index, "ok": r_ok, "drip": r_drip, "stall-headers": r_stall_headers,
    "cut-headers": r_cut_headers, "gzip-bomb": r_gzip_bomb, "deflate-bomb": r_deflate_bomb,
    "redirects": r_redirects, "links": r_links, "long-links": r_long_links, "l": r_l, "deep": r_deep, "deep-end": r_deep_end,
    "bad-utf8": r_bad_utf8, "mixed-encoding": r_mixed_encoding, "many-headers": r_many_headers,
    "cl-short": r_cl_short, "cl-long": r_cl_long,
}


def route(path: str) -> tuple[Handler, str]:
    name, _, arg = path.lstrip("/").partition("/")
    return ROUTES.get(name, r_missing), arg


# -- servers ------------------------------------------------------------------
class Server:
    """One listening socket: an accept loop and a daemon thread per connection."""

    def __init__(self, site: HostileSite, tls: ssl.SSLContext | None = None) -> None:
        self.site, self.tls = site, tls
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.sock.settimeout(POLL)
        self.port: int = self.sock.getsockname()[1]
        self.scheme = "https" if tls else "http"
        self.conns: set[Conn] = set()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.accept_loop, name=f"hostile:{self.port}",
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def accept_loop(self) -> None:
        while not self.site.stopping.is_set():
            try:
                sock, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn = Conn(sock, self)
            with self.lock:
                self.conns.add(conn)
            threading.Thread(target=self.serve, args=(conn,), name=f"hostile:{self.port}:conn",
                             daemon=True).start()

    def serve(self, conn: Conn) -> None:
        try:
            with suppress(Exception):  # whatever a client does, print no traceback
                conn.run()
        finally:
            with self.lock:
                self.conns.discard(conn)
            with suppress(OSError):
                conn.close()

    def stop(self) -> None:
        """Call with the site's stop flag set: end the accept loop, wake every connection."""
        if self.thread.is_alive():
            self.thread.join(timeout=1)
        self.sock.close()
        with self.lock:
            conns = list(self.conns)
        for conn in conns:
            conn.abort()


class HostileSite:
    """The hostile HTTP server (``.url``) and its untrusted HTTPS twin (``.tls_url``).

    ``warm=True`` builds the bombs in ``start()`` (about 4 s, once per process),
    so that the first bomb request is not held up by the build.
    """

    def __init__(self, warm: bool = False) -> None:
        self.warm = warm
        self.stopping = threading.Event()
        self._ca = trustme.CA()  # never handed to a client
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
        self.http = Server(self)
        self.https = Server(self, context)

    @property
    def url(self) -> str:
        return self.http.url

    @property
    def tls_url(self) -> str:
        return self.https.url

    def start(self) -> HostileSite:
        if self.warm:
            bomb("gzip")
        self.http.thread.start()
        self.https.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.http.stop()
        self.https.stop()
