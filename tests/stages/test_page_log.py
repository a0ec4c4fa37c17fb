"""The worker's per-response log line and its pace line (no I/O)."""

from __future__ import annotations

import logging

from crawler_tasks.core.errors import FetchError
from crawler_tasks.core.responses import Download, byte_size, page_line
from crawler_tasks.core.settings import Settings
from crawler_tasks.stages.page_log import PageLog


def download(status: int = 200, size: int = 20_100, elapsed: float = 0.1234, truncated: bool = False) -> Download:
    return Download(url="http://a.test/x", status=status, headers={}, body=b"x" * size, elapsed=elapsed,
                    truncated=truncated, request_size=100, response_size=size + 100)


def test_a_line_per_response_as_scrapys_crawled_line():
    assert page_line("GET", "http://a.test/x", download()) == "fetched 200 GET http://a.test/x 123 ms 20.1 KB"
    assert page_line("HEAD", "http://a.test/x", download(404, 0, 0.0021)).endswith("404 HEAD http://a.test/x 2 ms 0 B")
    assert page_line("GET", "http://a.test/x", download(size=3_400_000, truncated=True)).endswith("3.4 MB (truncated)")
    failed = FetchError("connection refused")
    assert page_line("GET", "http://a.test/x", failed) == "fetch failed GET http://a.test/x: connection refused"
    assert [byte_size(n) for n in (0, 999, 1000, 2_500_000)] == ["0 B", "999 B", "1.0 KB", "2.5 MB"]


def test_the_lines_go_to_the_log_at_info_unless_turned_off(caplog):
    caplog.set_level(logging.INFO, logger="crawler_tasks.stages.page_log")
    PageLog(Settings()).response("GET", "http://a.test/x", download())
    PageLog(Settings(log_pages=False)).response("GET", "http://a.test/y", download())
    assert [r.getMessage() for r in caplog.records] == ["fetched 200 GET http://a.test/x 123 ms 20.1 KB"]


def test_the_pace_line_comes_once_a_period_with_the_pages_per_minute():
    pages = PageLog(Settings(log_pages=False, log_stats_s=60))
    start = pages._mark[0]
    for _ in range(30):
        pages.response("GET", "http://a.test/x", download(size=100_000))
    pages.response("GET", "http://a.test/x", FetchError("timeout"))
    assert pages.tick(start + 30) is None  # not due yet
    assert pages.tick(start + 60) == "fetched 30 pages (at 30 pages/min), 1 failed, 3.0 MB in this process"
    assert pages.tick(start + 90) is None
    assert pages.tick(start + 120) == "fetched 30 pages (at 0 pages/min), 1 failed, 3.0 MB in this process"
    assert PageLog(Settings(log_stats_s=0)).tick(start + 1e6) is None


def test_a_fetch_s_result_says_what_became_of_it():
    from crawler_tasks.core.models import CrawlRequest, PageRecord
    from crawler_tasks.core.policy import Controlled, Defer, Fail, HandOn, Retry, Skip
    from crawler_tasks.stages.fetch import outcome_label

    req = CrawlRequest("http://a.test/x")
    record = PageRecord(url=req.url, fingerprint="fp", crawl_id="c", depth=0, fetched_at="t", status=404,
                        description="disallowed by robots.txt")
    assert outcome_label(HandOn(record, None)) == "fetched 404"
    assert outcome_label(Retry(req.replace(retries=2), 4.0, "http_503")) == "retry 2: http_503"
    assert outcome_label(Fail(record, reason="timeout")) == "failed: timeout"
    assert outcome_label(Skip(record)) == "skipped: disallowed by robots.txt"
    assert outcome_label(Defer(req, 0.0)) == "waiting for its host"
    assert [outcome_label(Controlled(s)) for s in ("paused", "cancelled", "purged")] == [
        "held: crawl paused", "cancelled", "purged"]
