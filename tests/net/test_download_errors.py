"""A failed download raises the FetchError of its kind, told by exception types (a real
server misbehaving on loopback, a resolver that does not know the name), with the
descriptions and counter names the records and stats have always had."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from crawler_tasks.core.classify import classify
from crawler_tasks.core.errors import (
    BadResponse,
    ConnectionFailed,
    ConnectionRefused,
    ConnectionReset,
    DNSFailure,
    FetchError,
    FetchTimeout,
    ProxyFailure,
    ResponseIncomplete,
)
from crawler_tasks.core.models import CrawlRequest
from crawler_tasks.net.download import download, make_session
from tests.helpers import LOCAL


def _reset(conn: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a firewall or a blocking site does."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


ANSWERS = {
    "/reset": _reset,
    "/reset-in-body": lambda c: (c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 10),
                                 time.sleep(0.1), _reset(c)),
    "/close": lambda c: c.close(),  # no response at all, a clean close
    "/bad-chunk": lambda c: (c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n"),
                             c.close()),
    "/chunk-cut": lambda c: (c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n100\r\nhello"),
                             c.close()),
    "/garbage": lambda c: (c.sendall(b"garbage\r\n\r\n"), c.close()),
    "/silent": lambda c: (time.sleep(2), c.close()),
}


class Misbehaving:
    """A TCP server on loopback answering each path as :data:`ANSWERS` says."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            ANSWERS[head.split(b" ")[1].decode()](conn)
        except OSError:
            pass


@pytest.fixture(scope="module")
def server() -> Iterator[Misbehaving]:
    s = Misbehaving()
    yield s
    s.sock.close()


def failure(url: str, *, proxy: str | None = None, timeout: float = 1.0) -> FetchError:
    with pytest.raises(FetchError) as info:
        download(make_session("test", policy=LOCAL), CrawlRequest(url=url), timeout=timeout,
                 maxsize=1 << 20, proxy=proxy)
    return info.value


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("path,kind,reason,description,feedback", [
    ("/reset", ConnectionReset, "connection_reset", "connection reset", "blocked"),
    ("/reset-in-body", ConnectionReset, "connection_reset", "connection reset", "blocked"),
    # http.client's RemoteDisconnected is a ConnectionResetError, but no reset came: not a blocking sign.
    ("/close", ConnectionFailed, "connection", "connection error: ('Connection aborted.', "
     "RemoteDisconnected('Remote end closed connection without response'))", "timeout"),
    ("/bad-chunk", ConnectionFailed, "connection", None, "timeout"),
    ("/chunk-cut", ResponseIncomplete, "incomplete", "response ended early: 5 bytes read, 251 more expected",
     "error"),
    ("/garbage", BadResponse, "bad_response", "malformed response: garbage\r\n", "error"),
    ("/silent", FetchTimeout, "timeout", "timeout after 1.0s", "timeout"),
])
def test_a_misbehaving_server_fails_the_download_with_its_kind(server, path, kind, reason, description, feedback):
    err = failure(server.url + path)
    assert type(err) is kind and err.reason == reason, err
    assert description is None or err.description == description
    assert classify(err).feedback == feedback


def test_a_refused_connection_is_its_own_kind():
    err = failure(f"http://127.0.0.1:{closed_port()}/")
    assert type(err) is ConnectionRefused and (err.reason, err.description) == ("connection_refused",
                                                                               "connection refused")
    assert err.retryable and classify(err).feedback == "timeout"


@pytest.mark.parametrize("code", [socket.EAI_NONAME, socket.EAI_AGAIN, socket.EAI_FAIL])
def test_a_name_that_does_not_resolve_is_a_dns_failure_whatever_the_resolver_said(server, monkeypatch, code):
    real = socket.getaddrinfo

    def resolver(host, *args, **kwargs):
        if host == "nowhere.example.test":
            raise socket.gaierror(code, "resolver says no")  # its own words: not what is looked at
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    direct = failure("http://nowhere.example.test/")
    proxied = failure("http://nowhere.example.test/", proxy=server.url)  # judged before the proxy
    for err in (direct, proxied):
        assert type(err) is DNSFailure and (err.reason, err.description) == ("dns", "DNS lookup failed")
        assert err.retryable and classify(err).feedback == "error"


def test_a_proxy_that_refuses_is_the_proxys_failure(server):
    err = failure(server.url + "/reset", proxy=f"http://127.0.0.1:{closed_port()}")
    assert type(err) is ProxyFailure and (err.reason, err.description) == ("proxy", "proxy failed")
    assert classify(err).feedback == "proxy"
