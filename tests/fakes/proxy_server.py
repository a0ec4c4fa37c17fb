"""A small HTTP forward proxy for the tests: plain ``http://`` URLs only, served on 127.0.0.1.

Clients send absolute-form requests (``GET http://host:port/path HTTP/1.1``);
the proxy forwards them upstream with a fresh connection, adds
``Via: 1.1 test-proxy`` and relays the answer with its own Content-Length so
the client connection stays usable for keep-alive. Optional Basic
authentication (``407`` otherwise), a ``fail`` mode that drops every
connection without answering (a dead proxy), and a ``stream`` mode that relays
the answer as it arrives (close-delimited, for at most ``STREAM_S`` seconds),
as most proxies do, so a slow server behind it is slow through it too.
"""

from __future__ import annotations

import base64
import http.client
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import urlsplit

#: headers that concern one connection only, never forwarded either way
HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Proxy-Authorization",
        "Proxy-Authenticate",
        "Proxy-Connection",
        "Connection",
        "Keep-Alive",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
    )
)


#: Longest a streamed answer is relayed: a server that never ends cannot hold a test forever.
STREAM_S = 10.0


class ForwardProxy:
    """An HTTP forward proxy on 127.0.0.1 for the tests (absolute-form GET/HEAD, http:// only)."""

    def __init__(
        self,
        *,
        username: str | None = None,
        password: str | None = None,
        fail: bool = False,
        stream: bool = False,
    ) -> None:
        self.fail = fail
        self.stream = stream
        self.expected_auth: str | None = None
        if username is not None or password is not None:
            token = f"{username or ''}:{password or ''}".encode()
            self.expected_auth = base64.b64encode(token).decode("ascii")
        #: absolute URLs requested through this proxy, in order
        self.requests: list[str] = []
        #: Proxy-Authorization header values received (None when absent)
        self.auth_headers: list[str | None] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                proxy.handle(self)

            do_HEAD = do_GET

            def do_CONNECT(self) -> None:
                proxy.reply(self, 400, b"CONNECT is not supported\n")

            do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_CONNECT

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port the proxy listens on."""
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, without credentials."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ForwardProxy:
        """Serve from a daemon thread; returns self."""
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self.thread is not None:
            self.server.shutdown()
            self.thread.join(5)
            self.thread = None
        self.server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @staticmethod
    def reply(
        h: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        """Send a small answer of the proxy's own, always with Content-Length."""
        h.send_response(status)
        for name, value in headers or []:
            h.send_header(name, value)
        h.send_header("Content-Type", "text/plain; charset=utf-8")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        """Answer one GET or HEAD request."""
        length = int(h.headers.get("Content-Length") or 0)
        # read any body, so the next request on a kept-alive connection starts in step
        body = h.rfile.read(length) if length > 0 else None
        auth = h.headers.get("Proxy-Authorization")
        if self.fail:
            with self.lock:
                self.requests.append(h.path)
                self.auth_headers.append(auth)
            h.close_connection = True  # no answer at all: the socket is simply closed
            return
        try:
            parts = urlsplit(h.path)
            port = parts.port or 80
        except ValueError:
            parts, port = None, 0
        if parts is None or parts.scheme != "http" or not parts.hostname:
            self.reply(h, 400, b"absolute http:// URL expected\n")
            return
        with self.lock:
            self.auth_headers.append(auth)
        if self.expected_auth is not None:
            scheme, _, token = (auth or "").partition(" ")
            if scheme.lower() != "basic" or token.strip() != self.expected_auth:
                self.reply(
                    h,
                    407,
                    b"proxy authentication required\n",
                    [("Proxy-Authenticate", 'Basic realm="test"')],
                )
                return
        with self.lock:
            self.requests.append(h.path)
        self.forward(
            h,
            parts.hostname,
            port,
            (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
            body,
        )

    def forward(
        self,
        h: BaseHTTPRequestHandler,
        host: str,
        port: int,
        target: str,
        body: bytes | None,
    ) -> None:
        """Send the request upstream over a fresh connection and relay the whole answer."""
        conn = http.client.HTTPConnection(host, port, timeout=10)
        try:
            headers = [
                (k, v) for k, v in h.headers.items() if k.lower() not in HOP_BY_HOP
            ]
            has_host = any(k.lower() == "host" for k, _ in headers)
            conn.putrequest(
                h.command, target, skip_host=has_host, skip_accept_encoding=True
            )
            for name, value in headers:
                conn.putheader(name, value)
            conn.putheader("Connection", "close")
            conn.putheader("Via", "1.1 test-proxy")
            conn.endheaders(body)
            resp = conn.getresponse()
            if self.stream:
                self.relay(h, resp)
                return
            data = resp.read()
            upstream = resp.getheaders()
        except (OSError, http.client.HTTPException) as exc:
            self.reply(h, 502, f"bad gateway: {exc.__class__.__name__}\n".encode())
            return
        finally:
            conn.close()
        named = {
            t.strip().lower()
            for k, v in upstream
            if k.lower() == "connection"
            for t in v.split(",")
        }
        h.send_response_only(resp.status, resp.reason)
        for name, value in upstream:
            if name.lower() not in HOP_BY_HOP | named | {"content-length"}:
                h.send_header(name, value)
        if h.command == "HEAD":  # no body: pass on the size the origin announced
            h.send_header("Content-Length", resp.getheader("Content-Length") or "0")
        else:
            h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)

    @staticmethod
    def relay(h: BaseHTTPRequestHandler, resp: http.client.HTTPResponse) -> None:
        """Pass the answer on as it arrives, ended by closing the connection."""
        h.send_response_only(resp.status, resp.reason)
        for name, value in resp.getheaders():
            if name.lower() not in HOP_BY_HOP | {"content-length"}:
                h.send_header(name, value)
        h.send_header("Connection", "close")
        h.end_headers()
        h.close_connection = True
        ends = time.monotonic() + STREAM_S
        try:
            while h.command != "HEAD" and time.monotonic() < ends and (chunk := resp.read1(65536)):
                h.wfile.write(chunk)
                h.wfile.flush()
        except OSError:
            pass


if __name__ == "__main__":
    import requests

    vias: list[str | None] = []

    class Hello(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            vias.append(self.headers.get("Via"))
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(b"hello")

        do_HEAD = do_GET

        def log_message(self, *args: object) -> None:
            pass

    origin = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    origin.daemon_threads = True
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{origin.server_address[1]}/x?q=1"
    session = requests.Session()
    session.trust_env = False  # no NO_PROXY from the environment

    with ForwardProxy(username="u", password="p") as proxy:
        authed = {"http": f"http://u:p@127.0.0.1:{proxy.port}"}
        r = session.get(site, proxies=authed, timeout=5)
        r2 = session.get(site, proxies=authed, timeout=5)  # same pooled connection
        hd = session.head(site, proxies=authed, timeout=5)
        print("status:", r.status_code, "body:", r.text, "via upstream:", vias)
        print("head:", hd.status_code, hd.headers.get("Content-Length"))
        print("requests:", proxy.requests)
        print("auth_headers:", proxy.auth_headers)
        assert (r.status_code, r.text, r2.text, hd.status_code) == (
            200,
            "hello",
            "hello",
            200,
        )
        assert vias == ["1.1 test-proxy"] * 3 and proxy.requests == [site] * 3
        r = session.get(site, proxies={"http": proxy.url}, timeout=5)
        print("no credentials:", r.status_code, r.headers.get("Proxy-Authenticate"))
        assert (
            r.status_code == 407
            and proxy.requests == [site] * 3
            and proxy.auth_headers[-1] is None
        )
        plain = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
        plain.request("GET", "/x")  # path-only target: not a proxy request
        assert plain.getresponse().status == 400
        plain.close()

    with ForwardProxy(fail=True) as dead:
        try:
            session.get(site, proxies={"http": dead.url}, timeout=5)
        except requests.ConnectionError as exc:
            print("fail=True:", type(exc).__name__, "requests:", dead.requests)
        else:
            raise AssertionError("fail=True should give a connection error")
        assert dead.requests == [site]
    origin.shutdown()
    print("ok")
