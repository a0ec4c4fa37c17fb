"""Incremental recrawls: a URL passes the gate again after CRAWLER_RECRAWL_AFTER and is
revalidated with If-None-Match / If-Modified-Since; a 304 keeps the stored page."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.core.settings import Settings
from crawler_tasks.core.urls import fingerprint
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.helpers import REDIS, flush, token

RECRAWL_DB = 14
WINDOW = 3.0  # the first crawl of the page must end inside it, on a slow machine too


@pytest.fixture(scope="module", params=["set", "bloom"])
def recrawler(request: pytest.FixtureRequest, settings: Settings,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Runtime, Workers]]:
    flush(RECRAWL_DB)
    s = settings.replace(broker_url=f"{REDIS}/{RECRAWL_DB}", redis_url=f"{REDIS}/{RECRAWL_DB}",
                         key_prefix=f"re{token()}", recrawl_after=WINDOW, dedup=request.param,
                         bloom_capacity=10_000)
    log = tmp_path_factory.mktemp("recrawl") / "worker.log"
    workers = Workers(s, concurrency=2, name=f"recrawl-{request.param}@%h", log_path=str(log)).start()
    rt = Runtime(s, create_app(s))
    yield rt, workers
    workers.stop()
    rt.close()
    flush(RECRAWL_DB)


def test_a_recrawl_revalidates_and_a_304_keeps_the_stored_page(recrawler, site, tmp_path):
    rt, workers = recrawler
    archive = tmp_path / "warc"
    store = f"{tmp_path / 'pages.db'},warc://{archive}"
    crawl_id, path = f"re-{token()}", f"/validated/{token()}?change=3"
    url = site.url + path

    def submit() -> int:
        n = submit_requests(rt, build_requests([url], crawl_id=crawl_id), store=store)
        wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=30, workers=workers)
        return n

    def resubmit_until_admitted() -> float:
        start = time.monotonic()
        while submit() == 0:
            assert time.monotonic() - start < 2 * WINDOW + 2, "never re-admitted"
            time.sleep(0.1)
        return time.monotonic() - start

    admitted_at = time.monotonic()
    assert submit() == 1
    first = open_store(store.split(',')[0]).get(fingerprint(url))
    assert first is not None and first.title == "Version 1"
    assert submit() == 0  # inside the window: a duplicate

    # Past the window the URL passes again and is revalidated; the page did not change.
    resubmit_until_admitted()
    assert time.monotonic() - admitted_at >= WINDOW
    again = open_store(store.split(',')[0]).get(fingerprint(url))
    stats = rt.stats.read(crawl_id)
    assert stats["status/304"] == 1 and stats["not_modified"] == 1 and stats["stored"] == 2
    assert again.title == first.title == "Version 1" and again.status == 200
    assert again.text == first.text and again.fetched_at >= first.fetched_at  # seconds: may be equal
    assert site.validators[-1] == (path, '"v1"', "Mon, 01 Jan 2024 00:00:00 GMT")

    # Next time round the page has changed: a 200 replaces the stored content.
    resubmit_until_admitted()
    latest = open_store(store.split(',')[0]).get(fingerprint(url))
    assert latest.title == "Version 2" and rt.stats.read(crawl_id)["status/200"] == 2
    assert open_store(store.split(',')[0]).count(crawl_id) == 1

    # The archive holds each exchange as it was: 200, then a 304 with no payload, then 200.
    responses = []
    for path in sorted(archive.glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f, check_digests="raise"):
                if rec.rec_type == "response" and rec.rec_headers.get_header("WARC-Target-URI") == url:
                    responses.append((rec.rec_headers.get_header("WARC-Date"),
                                      rec.http_headers.get_statuscode(), rec.content_stream().read()))
    # One file per worker process, and whichever process's store task took a batch wrote it:
    # the archive's order is the WARC-Date of the records, not the order of the files.
    responses = [(code, body) for _, code, body in sorted(responses)]
    assert [code for code, _ in responses] == ["200", "304", "200"]
    assert b"Version 1" in responses[0][1] and responses[1][1] == b"" and b"Version 2" in responses[2][1]
