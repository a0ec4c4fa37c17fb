"""What a download keeps for archives: the exchange as it crossed the wire, over real HTTP."""

from __future__ import annotations

import base64
import gzip
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from crawler_tasks.core.models import CrawlRequest, PageRecord
from crawler_tasks.core.policy import response_record
from crawler_tasks.core.responses import Download
from crawler_tasks.net.download import download, make_session
from tests.helpers import LOCAL

#: A 1x1 PNG (bytes that are not text in any encoding).
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
HTML = "<html><head><title>Grüße</title></head><body><p>héllo</p></body></html>".encode()
TEXT = ("line of text\n" * 200).encode()

#: path -> (status, [(header, value)] as sent, body, send it chunked)
PAGES: dict[str, tuple[int, list[tuple[str, str]], bytes, bool]] = {
    "/cookies": (200, [("Content-Type", "text/html; charset=utf-8"), ("Set-Cookie", "a=1; Path=/"),
                       ("set-cookie", "b=2"), ("X-MiXeD-Case", "Yes"), ("Set-Cookie", "c=3")],
                 HTML, False),
    "/page.html": (200, [("Content-Type", "text/html; charset=utf-8")], HTML, False),
    "/gbk.html": (200, [("Content-Type", "text/html; charset=gbk")],
                  "<html><head><title>中文网页标题</title></head><body>中文</body></html>".encode("gbk"),
                  False),
    "/image.png": (200, [("Content-Type", "image/png")], PNG, False),
    "/text.gz": (200, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Encoding", "gzip")],
                 gzip.compress(TEXT), False),
    "/chunked.txt": (200, [("Content-Type", "text/plain")], TEXT, True),
    "/missing": (404, [("Content-Type", "text/plain")], b"not here", False),
    "/teapot": (418, [("Content-Type", "text/plain")], b"short and stout", False),
}


class RawSite:
    """A server sending each page's headers exactly as listed (case, order, repeats)."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                status, headers, body, chunked = PAGES[self.path.split("?")[0]]
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Transfer-Encoding" if chunked else "Content-Length",
                                 "chunked" if chunked else str(len(body)))
                self.end_headers()
                if chunked:
                    for i in range(0, len(body), 1000):
                        part = body[i:i + 1000]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def raw_site() -> Iterator[RawSite]:
    site = RawSite()
    yield site
    site.stop()


def fetch(site: RawSite, path: str, **fields) -> tuple[CrawlRequest, Download]:
    req = CrawlRequest(url=site.url + path, **fields)
    session = make_session("raw-test/1.0", policy=LOCAL)
    try:
        return req, download(session, req, timeout=10, maxsize=1 << 20)
    finally:
        session.close()


def head_size(first_line: str, headers: list[tuple[str, str]]) -> int:
    """Bytes of a message head with these lines, as ``Name: value\\r\\n``."""
    return len(first_line) + 2 + sum(len(f"{k}: {v}\r\n") for k, v in headers) + 2


def roundtrip(record: PageRecord) -> PageRecord:
    return PageRecord.from_dict(json.loads(json.dumps(record.to_dict())))


def test_repeated_headers_and_their_case_are_kept(raw_site):
    req, dl = fetch(raw_site, "/cookies")
    assert dl.raw is not None
    assert [(k, v) for k, v in dl.raw.headers if k.lower() == "set-cookie"] == [
        ("Set-Cookie", "a=1; Path=/"), ("set-cookie", "b=2"), ("Set-Cookie", "c=3")]
    assert ("X-MiXeD-Case", "Yes") in dl.raw.headers
    record = roundtrip(response_record(req, dl))
    assert [k for k, _ in record.raw_headers if k.lower() == "set-cookie"] == [
        "Set-Cookie", "set-cookie", "Set-Cookie"]
    assert ["X-MiXeD-Case", "Yes"] in record.raw_headers
    assert record.headers["x-mixed-case"] == "Yes"  # the lower-cased dict stays as it was


def test_status_line_and_request_line_are_the_ones_on_the_wire(raw_site):
    req, dl = fetch(raw_site, "/missing?q=1")
    assert dl.raw.status_line == "HTTP/1.1 404 Not Found"
    assert dl.raw.request_line == "GET /missing?q=1 HTTP/1.1"
    sent = dict(dl.raw.request_headers)
    assert sent["Host"] == raw_site.url.split("//")[1]
    assert sent["User-Agent"] == "raw-test/1.0"
    record = roundtrip(response_record(req, dl))
    assert record.status_line == "HTTP/1.1 404 Not Found"
    assert record.request["line"] == "GET /missing?q=1 HTTP/1.1"
    assert ["User-Agent", "raw-test/1.0"] in record.request["headers"]
    _, teapot = fetch(raw_site, "/teapot")
    assert teapot.raw.status_line == "HTTP/1.1 418 I'm a Teapot"  # the reason as sent


def test_request_headers_of_the_crawl_request_are_sent_and_kept(raw_site):
    _, dl = fetch(raw_site, "/page.html", headers={"X-Token": "abc"})
    assert ("X-Token", "abc") in dl.raw.request_headers


def test_sizes_are_wire_bytes(raw_site):
    _, dl = fetch(raw_site, "/page.html")
    assert dl.request_size == head_size(dl.raw.request_line, dl.raw.request_headers)
    assert dl.response_size == head_size(dl.raw.status_line, dl.raw.headers) + len(HTML)


def test_gzip_body_is_decoded_and_its_size_is_the_compressed_one(raw_site):
    req, dl = fetch(raw_site, "/text.gz")
    assert dl.body == TEXT
    assert ("Content-Encoding", "gzip") in dl.raw.headers  # the headers as sent
    compressed = len(gzip.compress(TEXT))
    assert compressed < len(TEXT)
    assert dl.response_size == head_size(dl.raw.status_line, dl.raw.headers) + compressed
    record = response_record(req, dl)
    assert record.body_base64 is None  # text: archived from the record's text
    assert record.size == len(TEXT)


def test_chunked_body_is_kept_without_its_framing(raw_site):
    _, dl = fetch(raw_site, "/chunked.txt")
    assert dl.body == TEXT
    assert ("Transfer-Encoding", "chunked") in dl.raw.headers


def test_binary_bodies_are_kept_base64_and_text_ones_are_not(raw_site):
    req, dl = fetch(raw_site, "/image.png")
    record = roundtrip(response_record(req, dl))
    assert base64.b64decode(record.body_base64) == PNG
    assert record.payload_digest.startswith("sha1:")
    req, dl = fetch(raw_site, "/page.html")
    record = response_record(req, dl)
    assert record.body_base64 is None and record.body is None  # HTML: the parser sets body
    assert response_record(*fetch(raw_site, "/image.png"), keep_body=False).body_base64 is None


def test_a_record_with_everything_survives_json(raw_site):
    req, dl = fetch(raw_site, "/cookies")
    record = response_record(req, dl)
    assert roundtrip(record) == record


def test_cookies_a_site_sets_are_not_sent_with_later_requests(raw_site):
    """A worker thread's session serves every crawl: what one site set must not ride
    along on the next request (of this crawl or another)."""
    session = make_session("raw-test/1.0", policy=LOCAL)
    try:
        download(session, CrawlRequest(url=raw_site.url + "/cookies"), timeout=10, maxsize=1 << 20)
        own = CrawlRequest(url=raw_site.url + "/page.html", headers={"Cookie": "mine=1", "user-agent": "own/2"})
        plain = download(session, CrawlRequest(url=raw_site.url + "/page.html"), timeout=10, maxsize=1 << 20)
        dl = download(session, own, timeout=10, maxsize=1 << 20)
    finally:
        session.close()
    assert "cookie" not in {k.lower() for k, _ in plain.raw.request_headers}
    sent = [(k.lower(), v) for k, v in dl.raw.request_headers]
    assert ("cookie", "[redacted]") in sent  # its own Cookie header went (kept redacted)
    assert [v for k, v in sent if k == "user-agent"] == ["own/2"]  # the request's own header wins
