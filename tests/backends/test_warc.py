"""The WARC store: real downloads from a local server, archived, then read back with warcio."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler_tasks.backends import open_store
from crawler_tasks.backends.base import WriteOnlyStore
from crawler_tasks.backends.warc import WARCStore
from crawler_tasks.core.errors import TLSFailure, UnknownStore
from crawler_tasks.core.limits import Limits
from crawler_tasks.core.models import CrawlRequest, PageRecord
from crawler_tasks.core.policy import HandOn, decide
from crawler_tasks.core.settings import Settings
from crawler_tasks.net.download import download, make_session
from crawler_tasks.stages.parse import decode_html
from tests.helpers import LOCAL, REDIS
from tests.net.test_download_raw import HTML, PNG, TEXT, RawSite

SETTINGS = Settings()
LIMITS = Limits(domains=frozenset({"127.0.0.1"}), max_depth=0, max_pages=0, store="warc:///x")


@pytest.fixture(scope="module")
def raw_site() -> Iterator[RawSite]:
    site = RawSite()
    yield site
    site.stop()


def fetched(site: RawSite, path: str, *, maxsize: int = 1 << 20) -> PageRecord:
    """The record the fetch stage would store for ``path`` (HTML parsed as parse_page does)."""
    req = CrawlRequest(url=site.url + path)
    session = make_session("warc-test/1.0", policy=LOCAL)
    try:
        result = download(session, req, timeout=10, maxsize=maxsize)
    finally:
        session.close()
    outcome = decide(req, result, SETTINGS, LIMITS)
    assert isinstance(outcome, HandOn)
    record = outcome.record
    if outcome.body is not None:
        record.encoding, record.body = decode_html(outcome.body, record.headers.get("content-type"))
    return record


def read_warcs(directory: Path) -> list[dict]:
    """Every record of every file, with its digests checked (a bad one raises)."""
    out = []
    for path in sorted(directory.glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests="raise"):
                payload = rec.raw_stream.read()
                out.append({
                    "file": path.name, "type": rec.rec_type, "headers": rec.rec_headers,
                    "http": rec.http_headers, "payload": payload,
                    "digests_ok": rec.digest_checker.passed})
    return out


def by_type(records: list[dict], rec_type: str) -> list[dict]:
    return [r for r in records if r["type"] == rec_type]


def test_pages_are_archived_as_request_response_pairs(raw_site, tmp_path):
    store = open_store(f"warc://{tmp_path}")
    paths = ["/page.html", "/image.png", "/cookies", "/text.gz", "/chunked.txt", "/missing"]
    assert store.upsert([fetched(raw_site, p) for p in paths]) == []
    store.close()
    records = read_warcs(tmp_path)
    assert [r["type"] for r in records][:1] == ["warcinfo"]
    responses = {r["headers"].get_header("WARC-Target-URI"): r for r in by_type(records, "response")}
    requests = {r["headers"].get_header("WARC-Target-URI"): r for r in by_type(records, "request")}
    assert sorted(responses) == sorted(requests) == sorted(raw_site.url + p for p in paths)
    for uri, response in responses.items():
        request = requests[uri]
        assert request["headers"].get_header("WARC-Concurrent-To") == \
            response["headers"].get_header("WARC-Record-ID")
        assert request["http"].protocol == "GET"
        assert request["http"].get_header("User-Agent") == "warc-test/1.0"
        assert response["headers"].get_header("WARC-Payload-Digest").startswith("sha1:")
        assert response["headers"].get_header("WARC-Block-Digest").startswith("sha1:")
        assert response["digests_ok"] and request["digests_ok"]
        assert response["headers"].protocol == "WARC/1.1"
    served = {"/page.html": HTML, "/image.png": PNG, "/cookies": HTML, "/text.gz": TEXT,
              "/chunked.txt": TEXT, "/missing": b"not here"}
    for path, body in served.items():
        assert responses[raw_site.url + path]["payload"] == body, path
    missing = responses[raw_site.url + "/missing"]["http"]
    assert (missing.protocol, missing.statusline) == ("HTTP/1.1", "404 Not Found")


def test_text_in_another_charset_is_archived_as_the_bytes_served(raw_site, tmp_path):
    from tests.net.test_download_raw import PAGES

    store = WARCStore(str(tmp_path))
    record = fetched(raw_site, "/gbk.html")
    assert record.encoding != "utf-8"
    store.upsert([record])
    store.close()
    (response,) = by_type(read_warcs(tmp_path), "response")
    assert response["payload"] == PAGES["/gbk.html"][2]


def test_response_headers_keep_case_and_repeats(raw_site, tmp_path):
    store = WARCStore(str(tmp_path))
    store.upsert([fetched(raw_site, "/cookies")])
    store.close()
    (response,) = by_type(read_warcs(tmp_path), "response")
    headers = response["http"].headers
    assert [(k, v) for k, v in headers if k.lower() == "set-cookie"] == [
        ("Set-Cookie", "a=1; Path=/"), ("set-cookie", "b=2"), ("Set-Cookie", "c=3")]
    assert ("X-MiXeD-Case", "Yes") in headers


def test_decoded_payloads_say_so_in_their_headers(raw_site, tmp_path):
    store = WARCStore(str(tmp_path))
    store.upsert([fetched(raw_site, "/text.gz"), fetched(raw_site, "/chunked.txt"),
                  fetched(raw_site, "/image.png")])
    store.close()
    responses = {r["headers"].get_header("WARC-Target-URI").rsplit("/", 1)[1]: r["http"]
                 for r in by_type(read_warcs(tmp_path), "response")}
    gz = responses["text.gz"]
    assert gz.get_header("Content-Encoding") is None
    assert gz.get_header("X-Archive-Orig-Content-Encoding") == "gzip"
    assert gz.get_header("Content-Length") == str(len(TEXT))
    chunked = responses["chunked.txt"]
    assert chunked.get_header("Transfer-Encoding") is None
    assert chunked.get_header("X-Archive-Orig-Transfer-Encoding") == "chunked"
    assert chunked.get_header("Content-Length") == str(len(TEXT))
    png = responses["image.png"]  # untouched: the header as sent
    assert [k for k, _ in png.headers if k.lower().endswith("content-length")] == ["Content-Length"]


def test_a_truncated_body_is_marked(raw_site, tmp_path):
    store = WARCStore(str(tmp_path))
    store.upsert([fetched(raw_site, "/image.png", maxsize=10)])
    store.close()
    (response,) = by_type(read_warcs(tmp_path), "response")
    assert response["headers"].get_header("WARC-Truncated") == "length"
    assert response["payload"] == PNG[:10]


def test_records_without_a_response_write_nothing(tmp_path):
    req = CrawlRequest(url="http://127.0.0.1:9/")
    outcome = decide(req, TLSFailure("TLS error: certificate verify failed"), SETTINGS, LIMITS)
    store = WARCStore(str(tmp_path))
    assert store.upsert([outcome.record]) == []
    store.close()
    assert list(tmp_path.iterdir()) == []


def test_files_rotate_past_max_bytes(raw_site, tmp_path):
    store = WARCStore(str(tmp_path), max_bytes=3000)
    record = fetched(raw_site, "/image.png")
    for _ in range(12):
        store.upsert([record])
    store.close()
    files = sorted(tmp_path.glob("*.warc.gz"))
    assert len(files) >= 3
    records = read_warcs(tmp_path)
    assert len(by_type(records, "response")) == len(by_type(records, "request")) == 12
    assert {r["file"] for r in by_type(records, "warcinfo")} == {f.name for f in files}
    for response in by_type(records, "response"):  # a pair never straddles two files
        (request,) = [r for r in by_type(records, "request") if r["headers"].get_header(
            "WARC-Concurrent-To") == response["headers"].get_header("WARC-Record-ID")]
        assert request["file"] == response["file"]


def test_eight_threads_share_one_valid_file(raw_site, tmp_path):
    store = WARCStore(str(tmp_path))
    records = [fetched(raw_site, p) for p in ("/page.html", "/image.png", "/cookies", "/text.gz")]
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(25):
                store.upsert(records)
        except BaseException as exc:  # noqa: BLE001 (reported by the test)
            errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    store.close()
    assert errors == []
    assert len(list(tmp_path.glob("*.warc.gz"))) == 1
    archived = read_warcs(tmp_path)
    assert len(by_type(archived, "response")) == len(by_type(archived, "request")) == 8 * 25 * 4
    assert all(r["digests_ok"] for r in archived if r["type"] != "warcinfo")


def test_warcio_check_and_index_accept_the_files(raw_site, tmp_path):
    store = WARCStore(str(tmp_path))
    store.upsert([fetched(raw_site, p) for p in ("/page.html", "/image.png", "/text.gz")])
    store.close()
    (path,) = tmp_path.glob("*.warc.gz")
    warcio = [sys.executable, "-m", "warcio.cli"]
    check = subprocess.run([*warcio, "check", "-v", str(path)], capture_output=True, text=True,
                           check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    index = subprocess.run([*warcio, "index", str(path)], capture_output=True, text=True, check=True)
    assert index.stdout.count('"warc-type": "response"') == 3


def test_it_is_write_only(tmp_path):
    store = open_store(f"warc://{tmp_path}")
    with pytest.raises(WriteOnlyStore, match="write-only"):
        list(store.records())
    assert store.get("f") is None
    assert store.count() == 0


@pytest.mark.parametrize("uri", ["warc://relative/dir", "warc://host/dir", "warc:///dir?x=1", "warc://"])
def test_a_malformed_uri_fails_in_one_line(uri):
    with pytest.raises(UnknownStore, match="warc store") as info:
        open_store(uri)
    assert "\n" not in str(info.value)


def test_a_file_where_the_directory_should_be_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(UnknownStore, match="not a directory"):
        open_store(f"warc://{tmp_path}/f")


def test_a_binary_record_crosses_the_claim_check_compressed_and_whole(raw_site, tmp_path):
    import uuid

    import redis

    from crawler_tasks.state.claims import Claims
    from crawler_tasks.state.keys import Keys

    client = redis.Redis.from_url(f"{REDIS}/13")
    claims = Claims(client, Keys(f"w{uuid.uuid4().hex[:8]}"), ttl=60)
    big = fetched(raw_site, "/image.png")
    big.body_base64 = big.body_base64 * 40  # over COMPRESS_OVER: kept compressed
    small = fetched(raw_site, "/missing")
    try:
        for n, record in enumerate((big, small)):
            claims.write("c", f"t{n}", record)
            stored = client.hget(claims.keys.page("c", f"t{n}"), "record")
            assert (stored[:1] == b"{") is (record is small)
            assert claims.load("c", f"t{n}", with_body=False)[0] == record
    finally:
        claims.delete("c", "t0")
        claims.delete("c", "t1")


def test_items_follow_their_response_as_a_metadata_record(raw_site, tmp_path):
    store = open_store(f"warc://{tmp_path}")
    with_items = fetched(raw_site, "/page.html")
    with_items.items, with_items.rule = [{"name": "Chair", "price": 12.5}, {"name": "Stool"}], "shop.product"
    without = fetched(raw_site, "/cookies")
    assert store.upsert([with_items, without]) == []
    store.close()
    records = read_warcs(tmp_path)
    [meta] = by_type(records, "metadata")
    [response] = [r for r in by_type(records, "response")
                  if r["headers"].get_header("WARC-Target-URI") == with_items.url]
    assert meta["headers"].get_header("WARC-Target-URI") == with_items.url
    assert meta["headers"].get_header("WARC-Concurrent-To") == response["headers"].get_header("WARC-Record-ID")
    assert meta["headers"].get_header("Content-Type") == "application/json"
    assert json.loads(meta["payload"]) == {"rule": "shop.product", "items": with_items.items}
    assert meta["digests_ok"]


def test_a_rendered_page_keeps_its_response_as_served_and_its_dom_as_a_conversion(raw_site, tmp_path):
    store = open_store(f"warc://{tmp_path}")
    page = fetched(raw_site, "/page.html")
    served = page.body
    page.dom = "<html><head><title>built caf\u00e9</title></head><body><a href='/next'>next</a></body></html>"
    page.rendered = {"wait": "load", "settled": True, "requests": 3}
    assert store.upsert([page]) == []
    store.close()
    records = read_warcs(tmp_path)
    [response], [conversion], [meta] = (by_type(records, kind) for kind in ("response", "conversion", "metadata"))
    assert response["payload"] == served.encode(page.encoding) and response["digests_ok"]
    assert conversion["headers"].get_header("WARC-Refers-To") == response["headers"].get_header("WARC-Record-ID")
    assert conversion["headers"].get_header("Content-Type") == "text/html; charset=utf-8"
    assert conversion["payload"].decode("utf-8") == page.dom and conversion["digests_ok"]
    assert json.loads(meta["payload"])["rendered"] == page.rendered


def test_a_body_repeated_byte_for_byte_is_archived_as_a_revisit_record(raw_site, tmp_path):
    first = fetched(raw_site, "/page.html")
    again = fetched(raw_site, "/page.html?copy=1")
    again.duplicate_of = {"url": first.url, "fetched_at": first.fetched_at, "fingerprint": first.fingerprint}
    store = WARCStore(str(tmp_path))
    store.upsert([first, again])
    store.close()
    records = read_warcs(tmp_path)
    (revisit,) = by_type(records, "revisit")
    headers = revisit["headers"]
    assert headers.get_header("WARC-Target-URI") == again.url
    assert headers.get_header("WARC-Refers-To-Target-URI") == first.url
    assert headers.get_header("WARC-Payload-Digest") == first.payload_digest == again.payload_digest
    assert "identical-payload-digest" in headers.get_header("WARC-Profile")
    assert revisit["payload"] == b"" and revisit["http"].get_statuscode() == "200"
    assert [r["headers"].get_header("WARC-Target-URI") for r in by_type(records, "response")] == [first.url]
    (path,) = tmp_path.glob("*.warc.gz")
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", "-v", str(path)],
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
