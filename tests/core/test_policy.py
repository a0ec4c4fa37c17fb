"""The fetch decision rules, as plain functions: no Redis, no worker, no HTTP."""

from __future__ import annotations

import pytest

from crawler_tasks.core.errors import FetchTimeout, RequestFailed, TooManyRedirects
from crawler_tasks.core.limits import Limits
from crawler_tasks.core.models import CrawlRequest, PageRecord
from crawler_tasks.core.policy import (
    Fail,
    HandOn,
    Redirect,
    Retry,
    backoff,
    conditional,
    decide,
    plan_redirect,
    plan_retry,
    retry_delay,
)
from crawler_tasks.core.responses import Download
from crawler_tasks.core.settings import Settings

SETTINGS = Settings(max_retries=2, retry_backoff=1.0, retry_backoff_max=60.0,
                    redirect_max_times=3, retry_priority_adjust=-1, redirect_priority_adjust=2)
LIMITS = Limits(domains=frozenset({"a.test"}), max_depth=0, max_pages=0, store="x.db")


def req(url: str = "http://a.test/p", **fields) -> CrawlRequest:
    return CrawlRequest(url=url, **fields)


def response(status: int, headers: dict[str, str] | None = None, body: bytes = b"",
             url: str = "http://a.test/p") -> Download:
    return Download(url=url, status=status, headers=headers or {}, body=body, truncated=False,
                    request_size=100, response_size=200 + len(body))


# Retry: Scrapy's get_retry_request rules


def test_retry_demotes_priority_and_counts_the_attempt():
    again = plan_retry(req(priority=3), SETTINGS)
    assert (again.retries, again.priority) == (1, 2)


def test_no_retry_once_max_retries_are_used():
    assert plan_retry(req(retries=2), SETTINGS) is None


def test_retry_overrides_keyword_beats_meta_beats_setting():
    r = req(meta={"max_retry_times": 5, "retry_priority_adjust": -3}, retries=3)
    assert plan_retry(r, SETTINGS).priority == -3
    assert plan_retry(r, SETTINGS, max_retries=3) is None
    assert plan_retry(r, SETTINGS, priority_adjust=0).priority == 0


def test_backoff_doubles_and_is_capped():
    assert [backoff(SETTINGS, n) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]


def test_retry_after_wins_over_backoff_but_not_over_the_cap():
    assert retry_delay(req(retries=1), SETTINGS, 7.0) == 7.0
    assert retry_delay(req(retries=1), SETTINGS, 900.0) == 60.0
    assert retry_delay(req(retries=1), SETTINGS.replace(download_delay=0), None) == 2.0
    # the host's delay, which the retry waits anyway, counts towards its backoff
    assert retry_delay(req(retries=1), SETTINGS.replace(download_delay=0.5), None) == 1.5
    assert retry_delay(req(retries=0), SETTINGS.replace(download_delay=1.0), None) == 0.0


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_retryable_statuses_become_a_retry_with_a_reason_counter(status):
    out = decide(req(), response(status), SETTINGS, LIMITS)
    assert isinstance(out, Retry)
    assert out.reason == f"http_{status}" and out.counts[f"retry/reason_count/http_{status}"] == 1
    assert out.request.retries == 1


def test_503_with_retry_after_waits_that_long():
    out = decide(req(), response(503, {"retry-after": "3"}), SETTINGS, LIMITS)
    assert isinstance(out, Retry) and out.countdown == 3.0


def test_exhausted_retries_fail_with_the_attempt_count():
    out = decide(req(retries=2), response(500), SETTINGS, LIMITS)
    assert isinstance(out, Fail)
    assert out.record.description == "HTTP 500 after 3 attempts" and out.record.status == 500
    assert out.counts["failures"] == 1 and out.counts["retry/max_reached/http_500"] == 1


def test_connection_error_without_response_fails_with_no_status():
    err = FetchTimeout("timeout after 1.0s")
    assert isinstance(decide(req(), err, SETTINGS, LIMITS), Retry)
    out = decide(req(retries=2), err, SETTINGS, LIMITS)
    assert isinstance(out, Fail)
    assert out.record.status is None and out.record.description == "timeout after 1.0s (3 attempts)"


def test_permanent_error_is_not_retried():
    out = decide(req(), RequestFailed("request failed: bad"), SETTINGS, LIMITS)
    assert isinstance(out, Fail) and out.record.description == "request failed: bad"


@pytest.mark.parametrize("status", [404, 403, 410])
def test_client_errors_are_kept_without_retry(status):
    out = decide(req(), response(status), SETTINGS, LIMITS)
    assert isinstance(out, HandOn) and out.body is None and out.record.status == status
    assert out.http_error == f"http_{status}"  # what the errback and the error handler hear


def test_statuses_a_request_handles_reach_its_parser_neither_retried_nor_failed():
    html = {"content-type": "text/html"}
    gone = decide(req(handle_status=[410, 503]), response(410, html, b"<p>gone</p>"), SETTINGS, LIMITS)
    assert isinstance(gone, HandOn) and gone.body == b"<p>gone</p>" and gone.http_error is None
    busy = decide(req(handle_status=[503]), response(503, html, b"<p>busy</p>"), SETTINGS, LIMITS)
    assert isinstance(busy, HandOn) and busy.body == b"<p>busy</p>"  # not retried
    moved = decide(req(handle_status=[301]), response(301, {**html, "location": "/x"}, b"<p>m</p>"),
                   SETTINGS, LIMITS)
    assert isinstance(moved, HandOn) and moved.body == b"<p>m</p>"  # not followed: its parser decides
    assert isinstance(decide(req(), response(503, html), SETTINGS, LIMITS), Retry)


def test_a_text_body_reaches_a_parser_that_reads_it_html_or_not():
    js = {"content-type": "application/json"}
    assert decide(req(), response(200, js, b"{}"), SETTINGS, LIMITS).body is None
    assert decide(req(), response(200, js, b"{}"), SETTINGS, LIMITS, reads_text=True).body == b"{}"
    assert decide(req(), response(404, js, b"{}"), SETTINGS, LIMITS, reads_text=True).body is None
    pdf = {"content-type": "application/pdf"}
    assert decide(req(), response(200, pdf, b"%PDF"), SETTINGS, LIMITS, reads_text=True).body is None


def test_html_2xx_is_handed_on_for_parsing_other_types_are_not():
    html = decide(req(), response(200, {"content-type": "text/html"}, b"<p>x</p>"), SETTINGS, LIMITS)
    pdf = decide(req(), response(200, {"content-type": "application/pdf"}, b"%PDF"), SETTINGS, LIMITS)
    assert isinstance(html, HandOn) and html.body == b"<p>x</p>"
    assert isinstance(pdf, HandOn) and pdf.body is None and pdf.record.content_type == "application/pdf"


# Redirects: Scrapy's RedirectMiddleware rules


def test_redirect_target_is_promoted_and_resolved():
    out = decide(req(priority=1), response(301, {"location": "/q"}), SETTINGS, LIMITS)
    assert isinstance(out, Redirect)
    assert (out.target.url, out.target.priority, out.target.redirects) == ("http://a.test/q", 3, 1)
    assert out.record.redirect_to == "http://a.test/q" and out.counts["redirects"] == 1


def test_redirect_hop_limit_fails_the_request():
    out = decide(req(redirects=3), response(302, {"location": "/q"}), SETTINGS, LIMITS)
    assert isinstance(out, Fail) and "redirect hops exceeded (3)" in out.record.description
    with pytest.raises(TooManyRedirects) as info:
        plan_redirect(req(redirects=3), "/q", 302, SETTINGS)
    assert info.value.reason == "redirect_max" and not info.value.retryable


def test_a_redirect_to_a_url_over_the_length_cap_fails_the_request_and_says_why():
    out = decide(req(), response(302, {"location": "/" + "x" * 9000}), SETTINGS, LIMITS)
    assert isinstance(out, Fail) and out.counts["failures"] == 1
    assert out.record.description.startswith("redirect not followed: invalid URL 'http://a.test/xxx")
    assert out.record.description.endswith("9014 bytes, longer than CRAWLER_MAX_URL_LENGTH (8192)")


def test_offsite_redirect_is_recorded_not_followed():
    out = decide(req(), response(302, {"location": "http://elsewhere.test/"}), SETTINGS, LIMITS)
    assert isinstance(out, HandOn) and out.counts["redirect/offsite"] == 1
    assert out.record.redirect_to == "http://elsewhere.test/"


def test_cross_host_redirect_drops_cookie_and_authorization():
    r = req(headers={"Cookie": "s=1", "Authorization": "Basic eA==", "Accept": "text/html"})
    same = plan_redirect(r, "/next", 302, SETTINGS)
    other = plan_redirect(r, "http://b.a.test/next", 302, SETTINGS)
    downgraded = plan_redirect(req("https://a.test/p", headers=r.headers), "http://a.test/", 301,
                               SETTINGS)
    assert same.headers == r.headers
    assert other.headers == downgraded.headers == {"Accept": "text/html"}


def test_303_turns_get_into_get_and_keeps_head():
    assert plan_redirect(req(method="HEAD"), "/q", 303, SETTINGS).method == "HEAD"
    assert plan_redirect(req(method="HEAD"), "/q", 302, SETTINGS).method == "HEAD"
    assert plan_redirect(req(), "/q", 303, SETTINGS).method == "GET"


def test_redirect_resets_the_retry_count():
    assert plan_redirect(req(retries=2), "/q", 307, SETTINGS).retries == 0


# The offsite rule


def test_offsite_rule_allows_subdomains_and_falls_back_to_the_origin_host():
    assert LIMITS.allows("http://www.a.test/x", origin="http://a.test/")
    assert not LIMITS.allows("http://b.test/x", origin="http://a.test/")
    none = Limits(domains=frozenset(), max_depth=0, max_pages=0, store="x.db")
    assert none.allows("http://c.test/y", origin="http://c.test/")
    assert not none.allows("http://d.test/y", origin="http://c.test/")


# Recrawls: revalidation with the stored record's validators


def stored(**fields) -> PageRecord:
    return PageRecord(url="http://a.test/p", fingerprint=req().fingerprint, crawl_id="c", depth=0,
                      fetched_at="2026-01-01T00:00:00+00:00", **fields)


def test_a_recrawl_sends_the_stored_validators_and_nothing_without_them():
    before = stored(status=200, headers={"etag": '"x1"', "last-modified": "Mon, 01 Jan 2024 00:00:00 GMT"})
    sent = conditional(req(headers={"Accept": "text/html"}), before).headers
    assert sent == {"Accept": "text/html", "If-None-Match": '"x1"',
                    "If-Modified-Since": "Mon, 01 Jan 2024 00:00:00 GMT"}
    assert conditional(req(), stored(status=200, headers={"etag": '"x1"'})).headers == {
        "If-None-Match": '"x1"'}
    assert conditional(req(), stored(status=200)).headers == {}
    assert conditional(req(), stored(status=404, headers={"etag": '"x1"'})).headers == {}
    assert conditional(req(), None).headers == {}


def test_a_304_keeps_the_stored_page_with_a_new_fetch_time():
    before = stored(status=200, title="Kept", text="body text", headers={"etag": '"x1"'})
    outcome = decide(req(meta={"url_id": "9"}), response(304), SETTINGS, LIMITS, previous=before)
    assert isinstance(outcome, HandOn) and outcome.body is None
    kept = outcome.record
    assert (kept.status, kept.title, kept.text, kept.meta) == (200, "Kept", "body text", {"url_id": "9"})
    assert kept.fetched_at > before.fetched_at
    assert outcome.counts["status/304"] == 1 and outcome.counts["not_modified"] == 1


def test_a_304_nobody_asked_for_is_stored_as_it_came():
    outcome = decide(req(), response(304), SETTINGS, LIMITS)
    assert isinstance(outcome, HandOn) and outcome.record.status == 304
    assert "not_modified" not in outcome.counts


def test_a_disallowed_url_is_skipped_with_a_record_and_a_busy_host_defers():
    from crawler_tasks.core.policy import Defer, Skip, before_fetch
    from crawler_tasks.core.politeness import ALLOW, RobotsVerdict, Slot

    req = CrawlRequest("http://a.test/private")
    skip = before_fetch(req, RobotsVerdict(False, reason="disallowed by robots.txt",
                                           counter="robots/disallowed"), None)
    assert isinstance(skip, Skip) and skip.record.description == "disallowed by robots.txt"
    assert skip.counts == {"robots/disallowed": 1}
    assert before_fetch(req, RobotsVerdict(wait_until=12.5), None) == Defer(req, 12.5)
    assert before_fetch(req, ALLOW, Slot(False, 99.0)) == Defer(req, 99.0)
    assert before_fetch(req, ALLOW, Slot(True)) is None


# Reroute: a blocked direct request, or a failed proxy, goes again at once through a proxy


@pytest.mark.parametrize("kind,direct,proxies,reason", [
    ("blocked", True, 2, "blocked"),
    ("blocked", False, 2, None),  # already through a proxy: decided as any answer
    ("blocked", True, 0, None),  # no proxy to go through
    ("throttled", True, 2, None),  # a throttled request waits its back-off, as without proxies
    ("proxy", False, 2, "proxy_failed"),
    ("proxy", True, 0, "proxy_failed"),
    ("ok", True, 2, None),
    ("timeout", True, 2, None),
    ("error", True, 2, None),
])
def test_which_answers_reroute_a_request(kind, direct, proxies, reason):
    from crawler_tasks.core.policy import Reroute, reroute_reason
    from crawler_tasks.core.politeness import Feedback

    got = reroute_reason(Feedback(kind, proxy=None if direct else 0), direct=direct, proxies=proxies)
    assert got == reason and (got is None or isinstance(got, Reroute))


@pytest.mark.parametrize("kind,proxies,at_once", [
    ("blocked", 1, True), ("throttled", 1, True), ("ok", 1, False), ("proxy", 1, False),
    ("timeout", 1, False), ("blocked", 0, False), ("throttled", 0, False),
])
def test_blocking_signs_reach_the_limiter_before_the_decision_when_proxies_are_configured(kind, proxies,
                                                                                       at_once):
    from crawler_tasks.core.policy import tell_at_once
    from crawler_tasks.core.politeness import Feedback

    assert tell_at_once(Feedback(kind), proxies) is at_once


def test_a_reroute_is_an_immediate_demoted_retry_counted_under_its_reason():
    from crawler_tasks.core.policy import Reroute, reroute

    out = reroute(req(priority=1), SETTINGS, Reroute.BLOCKED)
    assert isinstance(out, Retry) and out.countdown == 0.0 and out.reason == "blocked"
    assert out.request.retries == 1 and out.request.priority == 0
    assert out.counts == {"retries": 1, "retry/reason_count/blocked": 1}
    assert reroute(req(retries=2), SETTINGS, Reroute.PROXY_FAILED) is None
