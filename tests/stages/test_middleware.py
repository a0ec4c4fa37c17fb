"""Request and response middlewares around a download (pure: no Redis, no worker)."""

from __future__ import annotations

from typing import Any

from crawler_tasks.core.limits import Limits
from crawler_tasks.core.models import CrawlRequest
from crawler_tasks.core.policy import Drop, Fail, Retry
from crawler_tasks.core.program import load_program
from crawler_tasks.core.responses import Download
from crawler_tasks.core.settings import Settings
from crawler_tasks.stages.middleware import Go, after_download, before_download, shown_proxy

LIMITS = Limits(domains=frozenset({"s.test"}), max_depth=0, max_pages=0, store="x")
CHAIN = load_program((), (), ("tests.programs.middlewares.Second:200",
                              "tests.programs.middlewares.First:100")).middlewares
SETTINGS = Settings()


def request(path: str, **more: Any) -> CrawlRequest:
    return CrawlRequest(url=f"http://s.test/mw/t/{path}", crawl_id="c", depth=2, priority=3, **more)


def response(req: CrawlRequest, body: bytes = b"<p>fine</p>") -> Download:
    return Download(url=req.url, status=200, headers={"content-type": "text/html"}, body=body,
                    truncated=False, request_size=10, response_size=len(body))


def test_the_chain_is_ordered_by_priority():
    assert [m.name for m in CHAIN] == ["tests.programs.middlewares.First", "tests.programs.middlewares.Second"]


def test_requests_pass_in_ascending_and_responses_in_descending_priority():
    step = before_download(CHAIN, request("plain"), LIMITS)
    assert isinstance(step, Go)
    assert step.request.headers == {"X-Order": "first,second"} and step.request.meta == {"marked_by": "first"}
    seen = after_download(CHAIN, step.request, None, response(step.request), LIMITS, SETTINGS)
    assert isinstance(seen, Download) and seen.headers["x-order"] == "second,first"


def test_a_dropped_request_is_counted_by_its_reason_and_nothing_else():
    assert before_download(CHAIN, request("drop"), LIMITS) == Drop({"requests/dropped/not_wanted": 1})


def test_a_returned_request_replaces_this_one_at_its_depth_within_the_crawl():
    step = before_download(CHAIN, request("swap"), LIMITS)
    assert isinstance(step, Drop) and step.counts == {"requests/replaced": 1}
    [new] = step.follow
    assert (new.url, new.priority, new.depth, new.crawl_id) == ("http://s.test/mw/t/plain?swapped=1", 4, 2, "c")
    assert before_download(CHAIN, request("offsite"), LIMITS) == Drop({"requests/dropped/offsite": 1})


def test_a_middleware_retry_is_demoted_like_any_retry_and_given_up_at_the_budget():
    req = request("ban")
    retry = after_download(CHAIN, req, None, response(req, b"you are banned"), LIMITS, SETTINGS)
    assert isinstance(retry, Retry) and retry.reason == "ban_page"
    assert (retry.request.retries, retry.request.priority) == (1, 3 + SETTINGS.retry_priority_adjust)
    assert retry.counts["retry/reason_count/ban_page"] == 1 and retry.counts["total_num"] == 1
    last = request("ban", retries=SETTINGS.max_retries)
    failed = after_download(CHAIN, last, None, response(last, b"banned"), LIMITS, SETTINGS)
    assert isinstance(failed, Fail)
    assert failed.record.description == ("tests.programs.middlewares.Second asked for a retry: ban_page "
                                         f"({SETTINGS.max_retries + 1} attempts)")
    assert failed.counts["retry/max_reached/ban_page"] == 1


def test_a_middleware_that_raises_gives_a_failure_record_naming_it():
    req = request("broken")
    failed = after_download(CHAIN, req, None, response(req), LIMITS, SETTINGS)
    assert isinstance(failed, Fail) and failed.record.status == 200
    assert failed.record.description == ("response middleware tests.programs.middlewares.Second failed: "
                                         "KeyError: 'no such header'")
    assert failed.counts["plugin/failed/middleware"] == 1 and failed.counts["failures"] == 1


def test_a_proxy_is_shown_without_its_credentials():
    assert shown_proxy("http://user:secret@proxy.test:3128") == "http://proxy.test:3128"
