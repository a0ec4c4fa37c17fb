"""The HBase store's core round trip against a real HBase Thrift (v1) gateway.

Skipped unless ``CRAWLER_TEST_HBASE`` names one::

    CRAWLER_TEST_HBASE=hbase://127.0.0.1:9090/crawler_test pytest tests/backends/test_hbase_contract.py

(add ``?transport=framed&protocol=compact`` for a gateway started with ``-f -c``).
The table is created on first use and kept; every run writes rows of its own
host and crawl id, so runs never meet. ``tests/backends/test_hbase.py`` runs the
same :func:`core_round_trip` against the test gateway in each wire mode.
"""

from __future__ import annotations

import dataclasses
import os
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from crawler_tasks.backends.hbase import HBaseStore
from crawler_tasks.core.models import PageRecord
from crawler_tasks.core.urls import fingerprint

MIB = 1024 * 1024
HBASE_URI = os.environ.get("CRAWLER_TEST_HBASE", "")


def make_record(url: str, crawl_id: str, **fields: Any) -> PageRecord:
    """A page record of ``url`` with the fingerprint the crawler would give it."""
    defaults: dict[str, Any] = {"depth": 1, "fetched_at": "2026-01-02T03:04:05+00:00", "status": 200}
    return PageRecord(url=url, fingerprint=fingerprint(url, fields.get("method", "GET")),
                      crawl_id=crawl_id, **{**defaults, **fields})


def random_html(size: int, seed: int = 0) -> str:
    """``size`` characters of HTML around random-ish words (zlib keeps about 3/4 of it)."""
    head, tail = "<!doctype html><html><body><p>", "</p></body></html>"
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,"
    table = bytes(alphabet[b % len(alphabet)] for b in range(256))
    text = random.Random(seed).randbytes(size - len(head) - len(tail)).translate(table).decode()
    return head + text + tail


def core_round_trip(store: HBaseStore, token: str) -> None:
    """Records with and without bodies (one of 10 MiB) written, read back, scanned by site and
    by crawl, and written again unchanged; ``token`` keeps this run's rows apart."""
    host, crawl, other = f"www.{token}.example", f"crawl-{token}", f"other-{token}"
    big = make_record(f"https://{host}/big", crawl, body=random_html(10 * MIB), content_type="text/html",
                      size=10 * MIB, title="Big", text="big page")
    with_body = make_record(f"https://{host}/a?b=2&a=1", crawl, body="<html><p>héllo ✓</p></html>",
                            headers={"Content-Type": "text/html; charset=utf-8"}, title="Héllo",
                            text="héllo ✓", links=[f"https://{host}/b", "https://elsewhere.example/"],
                            meta={"seed": True, "n": [1, 2]}, encoding="utf-8", size=31)
    no_body = make_record(f"https://{host}/b", crawl, status=404, description="HTTP 404")
    empty_body = make_record(f"http://{host}:8080/c", crawl, body="", method="HEAD", truncated=True)
    sub = make_record(f"https://sub.{host}/d", other, body="<p>sub</p>", redirect_to=f"https://{host}/")
    parent = make_record(f"https://{token}.example/e", other, status=None, description="timeout")
    written = [big, with_body, no_body, empty_body, sub, parent]

    assert store.upsert(written) == []
    for record in written:
        assert store.get(record.fingerprint) == record
    assert store.get(f"no-such-fingerprint-{token}") is None
    assert (store.count(crawl), store.count(other)) == (4, 2)
    assert sorted(r.url for r in store.records(crawl)) == sorted(r.url for r in (big, with_body, no_body, empty_body))
    # Key order: the host's http:8080 row, then its https rows by path; subdomains before the host.
    assert [r.url for r in store.scan_site(host)] == [empty_body.url, with_body.url, no_body.url, big.url]
    assert [r.url for r in store.scan_site(host, subdomains=True)] == [
        sub.url, empty_body.url, with_body.url, no_body.url, big.url]
    assert [r.url for r in store.scan_site(f"{token}.example")] == [parent.url]

    assert store.upsert(written) == []  # a redelivered batch
    assert (store.count(crawl), store.count(other)) == (4, 2)
    changed = dataclasses.replace(with_body, title=None, body=None, links=[], headers={}, status=304)
    smaller = dataclasses.replace(big, body="<p>now small</p>")
    assert store.upsert([changed, smaller]) == []
    assert store.get(with_body.fingerprint) == changed
    assert store.get(big.fingerprint) == smaller
    assert store.count(crawl) == 4


@pytest.fixture
def real_store() -> Iterator[HBaseStore]:
    """The store CRAWLER_TEST_HBASE names."""
    if not HBASE_URI:
        pytest.skip("CRAWLER_TEST_HBASE is not set (e.g. hbase://127.0.0.1:9090/crawler_test)")
    store = HBaseStore.from_uri(HBASE_URI)
    yield store
    store.close()


def test_core_round_trip_against_a_real_gateway(real_store: HBaseStore) -> None:
    core_round_trip(real_store, uuid.uuid4().hex[:12])
