"""Self-test of the hostile site: each path misbehaves as HOSTILE_PATHS says.

Plain requests and raw sockets only: no Redis, no Celery, no crawler.
"""

from __future__ import annotations

import re
import socket
import threading
import time
import warnings
import zlib
from collections.abc import Iterator
from contextlib import suppress
from urllib.parse import urlsplit

import pytest
import requests

from tests.fakes.hostile_site import (
    BOMB_SIZE,
    HOSTILE_PATHS,
    LONG_LINK_BYTES,
    LONG_LINKS,
    MANY_HEADERS,
    PARTIAL_HEAD,
    HostileSite,
    bomb,
    links_body,
    links_length,
)


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileSite]:
    s = HostileSite(warm=True).start()
    yield s
    s.stop()


# -- raw HTTP ---------------------------------------------------------------
def ask(site: HostileSite, path: str, timeout: float = 5.0) -> socket.socket:
    """A socket that has sent ``GET path`` and awaits the answer."""
    sock = socket.create_connection(("127.0.0.1", urlsplit(site.url).port), timeout=timeout)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock


def read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before {marker!r}: {data[:200]!r}"
        data += chunk
    return data


def read_to_eof(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def fetch(site: HostileSite, path: str) -> tuple[list[str], bytes]:
    """(head lines, body) of one raw exchange, read until the server closes."""
    with ask(site, path) as sock:
        data = read_to_eof(sock)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert "Connection: close" in lines
    return lines, body


def header(lines: list[str], name: str) -> str | None:
    found = [v for k, _, v in (ln.partition(": ") for ln in lines[1:]) if k.lower() == name.lower()]
    return found[0] if found else None


# -- the paths ----------------------------------------------------------------
def test_index_links_every_path(hostile: HostileSite) -> None:
    r = requests.get(hostile.url + "/", timeout=5)
    assert r.status_code == 200 and r.headers["Connection"] == "close"
    hrefs = set(re.findall(r'href="([^"]+)"', r.text))
    assert hrefs == set(HOSTILE_PATHS) | {"/ok", hostile.tls_url + "/ok"}


def test_ok_and_missing(hostile: HostileSite) -> None:
    r = requests.get(hostile.url + "/ok", timeout=5)
    assert r.status_code == 200 and "<title>OK</title>" in r.text
    assert requests.get(hostile.url + "/nowhere", timeout=5).status_code == 404
    assert requests.head(hostile.url + "/ok", timeout=5).headers["Content-Length"] == str(len(r.content))


def test_drip_keeps_sending(hostile: HostileSite) -> None:
    with ask(hostile, "/drip", timeout=1.5) as sock:
        start, data = time.monotonic(), read_until(sock, b"\r\n\r\n")
        assert data.startswith(b"HTTP/1.1 200 OK") and b"Content-Length" not in data
        last = start
        while time.monotonic() - start < 2.6:
            assert sock.recv(4096)
            last = time.monotonic()
        assert last - start > 2.0


def test_stall_headers_never_end(hostile: HostileSite) -> None:
    with ask(hostile, "/stall-headers", timeout=1.0) as sock:
        assert read_until(sock, b"text/html\r\n") == PARTIAL_HEAD
        with pytest.raises(TimeoutError):
            sock.recv(1)


def test_cut_headers_close_before_blank_line(hostile: HostileSite) -> None:
    with ask(hostile, "/cut-headers") as sock:
        assert read_to_eof(sock) == PARTIAL_HEAD


@pytest.mark.parametrize(("path", "encoding", "wbits"),
                         [("/gzip-bomb", "gzip", 31), ("/deflate-bomb", "deflate", 15)])
def test_bombs(hostile: HostileSite, path: str, encoding: str, wbits: int) -> None:
    with requests.get(hostile.url + path, stream=True, timeout=10) as r:
        assert r.headers["Content-Encoding"] == encoding
        assert int(r.headers["Content-Length"]) == len(bomb(encoding)) < 2_000_000
        compressed = r.raw.read(64 * 1024, decode_content=False)
    out = zlib.decompressobj(wbits).decompress(compressed, 16 << 20)
    assert len(out) == 16 << 20 and out == bytes(len(out))


def test_bomb_trailers() -> None:
    gz, zl = bomb("gzip"), bomb("deflate")
    assert gz[:2] == b"\x1f\x8b" and int.from_bytes(gz[-4:], "little") == BOMB_SIZE % (1 << 32)
    assert zl[:2] == b"\x78\xda" and zl[2:-4] == gz[10:-8]  # one deflate stream, two wrappers


def test_redirects_alternate_hosts(hostile: HostileSite) -> None:
    hosts, url = [], hostile.url + "/redirects/3"
    for n in (3, 2, 1):
        r = requests.get(url, allow_redirects=False, timeout=5)
        assert r.status_code == 302
        url = r.headers["Location"]
        parts = urlsplit(url)
        assert parts.path == f"/redirects/{n - 1}" and parts.port == urlsplit(hostile.url).port
        hosts.append(parts.hostname)
    assert hosts == ["127.0.0.1", "localhost", "127.0.0.1"]
    r = requests.get(hostile.url + "/redirects/3", timeout=5)
    assert r.status_code == 200 and len(r.history) == 3
    first = requests.get(hostile.url + "/redirects/10000", allow_redirects=False, timeout=5)
    assert urlsplit(first.headers["Location"]).path == "/redirects/9999"


def test_links_length_formula() -> None:
    for n in (0, 1, 9, 10, 11, 99, 100, 101, 12_345):
        assert links_length(n) == sum(map(len, links_body(n)))


def test_links_pages(hostile: HostileSite) -> None:
    lines, body = fetch(hostile, "/links/1000")
    assert int(header(lines, "Content-Length") or -1) == len(body)
    assert len(set(re.findall(rb'<a href="(/l/\d+)">x</a>', body))) == 1000
    lines, body = fetch(hostile, "/links/1000000")
    assert int(header(lines, "Content-Length") or -1) == len(body) == links_length(1_000_000)
    assert body.count(b'<a href="/l/') == 1_000_000 and b'href="/l/999999"' in body
    assert requests.get(hostile.url + "/l/7", timeout=5).status_code == 200


def test_long_links_pages(hostile: HostileSite) -> None:
    body = requests.get(hostile.url + "/long-links/3", timeout=5).content
    hrefs = re.findall(rb'<a href="([^"]+)">', body)
    assert len(set(hrefs)) == LONG_LINKS and {len(h) for h in hrefs} == {LONG_LINK_BYTES}
    assert all(h.startswith(b"/l/long-3-") for h in hrefs)
    assert not set(hrefs) & set(re.findall(rb'<a href="([^"]+)">', fetch(hostile, "/long-links/4")[1]))
    assert requests.get(hostile.url + hrefs[0].decode(), timeout=5).status_code == 200


def test_deep(hostile: HostileSite) -> None:
    r = requests.get(hostile.url + "/deep", timeout=10)
    assert r.content.count(b"<div>") == r.content.count(b"</div>") == 100_000
    assert b'<a href="/deep-end">' in r.content
    assert requests.get(hostile.url + "/deep-end", timeout=5).status_code == 200


def test_bad_utf8(hostile: HostileSite) -> None:
    lines, body = fetch(hostile, "/bad-utf8")
    assert header(lines, "Content-Type") == "text/html; charset=utf-8"
    title = body.split(b"<title>")[1].split(b"</title>")[0]
    for part in (title, body.split(b"<body>")[1]):
        with pytest.raises(UnicodeDecodeError):
            part.decode("utf-8")


def test_mixed_encoding(hostile: HostileSite) -> None:
    lines, body = fetch(hostile, "/mixed-encoding")
    assert header(lines, "Content-Type") == "text/html; charset=utf-8"
    assert b'<meta charset="windows-1252">' in body
    assert b"Caf\xc3\xa9" in body and b"caf\xe9" in body  # UTF-8 and latin-1 side by side
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")


def test_many_headers(hostile: HostileSite) -> None:
    lines, body = fetch(hostile, "/many-headers")
    names = [ln.split(":")[0] for ln in lines if ln.startswith("X-H-")]
    assert len(names) == len(set(names)) == MANY_HEADERS
    assert lines[0] == "HTTP/1.1 200 OK" and b"<title>Many headers</title>" in body


def test_content_length_lies(hostile: HostileSite) -> None:
    lines, body = fetch(hostile, "/cl-short")
    assert header(lines, "Content-Length") == "100000" and len(body) == 100
    lines, body = fetch(hostile, "/cl-long")
    assert header(lines, "Content-Length") == "10" and len(body) == 5000


def test_tls_certificate_is_untrusted(hostile: HostileSite) -> None:
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(hostile.tls_url + "/ok", timeout=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = requests.get(hostile.tls_url + "/ok", verify=False, timeout=5)
    assert r.status_code == 200 and "<title>OK</title>" in r.text


def test_responsive_with_many_drips(hostile: HostileSite) -> None:
    socks = [ask(hostile, "/drip") for _ in range(50)]
    try:
        for sock in socks:
            read_until(sock, b"\r\n\r\n")
        start = time.monotonic()
        assert requests.get(hostile.url + "/ok", timeout=5).status_code == 200
        assert time.monotonic() - start < 1.0
    finally:
        for sock in socks:
            sock.close()


def test_stop_is_quick_with_open_connections() -> None:
    site = HostileSite().start()
    socks = [ask(site, p) for p in ("/drip", "/stall-headers", "/links/1000000")]
    read_until(socks[0], b"\r\n\r\n")
    read_until(socks[1], b"text/html\r\n")
    read_until(socks[2], b"\r\n\r\n")  # the rest of the page waits in a blocked send
    time.sleep(0.3)
    start = time.monotonic()
    site.stop()
    assert time.monotonic() - start < 2.0
    ports = {f"hostile:{urlsplit(u).port}" for u in (site.url, site.tls_url)}
    deadline = time.monotonic() + 2.0
    while any(t.name.split(":conn")[0] in ports for t in threading.enumerate()):
        assert time.monotonic() < deadline, "connection threads outlived stop()"
        time.sleep(0.05)
    for sock in socks:  # each client sees its connection end
        with sock, suppress(ConnectionResetError):
            read_to_eof(sock)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", urlsplit(site.url).port), timeout=1)
