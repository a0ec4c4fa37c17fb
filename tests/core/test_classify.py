"""One reading of a download's result: the failure kinds, what is retried and counted, and
what each result tells the host limiter."""

from __future__ import annotations

import inspect

import pytest

from crawler_tasks.core import errors
from crawler_tasks.core.classify import FAILURE_FEEDBACK, classify, failure_feedback, host_feedback
from crawler_tasks.core.errors import (
    AddressRefused,
    BadResponse,
    ConnectionFailed,
    ConnectionRefused,
    ConnectionReset,
    DNSFailure,
    FetchError,
    FetchTimeout,
    HeadersCut,
    ProxyFailure,
    RequestFailed,
    ResponseIncomplete,
    TLSFailure,
    TooManyRedirects,
)
from crawler_tasks.core.politeness import Feedback, FeedbackKind
from crawler_tasks.core.proxies import Proxies
from crawler_tasks.core.responses import Download
from crawler_tasks.core.settings import Settings

PROXIES = Proxies(Settings(ban_pattern="(?i)looks? like a robot", proxies=("http://p.test:3128",)))


def _download(status: int, body: bytes = b"<html></html>", **headers: str) -> Download:
    return Download(url="http://a.test/", status=status, headers=headers, body=body, truncated=False,
                    request_size=10, response_size=10, elapsed=0.2)


# Every kind of failure has its feedback.

def test_every_failure_kind_has_its_host_feedback_listed():
    kinds = {c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, FetchError)}
    assert kinds == set(FAILURE_FEEDBACK)


def test_an_unlisted_failure_kind_takes_its_parents_feedback():
    class Odd(ConnectionReset):
        pass

    assert failure_feedback(Odd("x")) is FeedbackKind.BLOCKED


# The verdict: retried? counted as? what the host limiter hears?

@pytest.mark.parametrize("status,retry,counted_as,feedback", [
    (200, False, None, "ok"),
    (304, False, None, "ok"),
    (404, False, None, "ok"),
    (403, False, None, "blocked"),
    (407, False, None, "ok"),  # direct: the site's own 407, nothing to do with a proxy
    (408, True, "http_408", "ok"),
    (429, True, "http_429", "throttled"),
    (500, True, "http_500", "ok"),
    (503, True, "http_503", "throttled"),
    (599, True, "http_599", "ok"),
])
def test_what_a_response_means(status, retry, counted_as, feedback):
    verdict = classify(_download(status), PROXIES)
    assert (verdict.retry, verdict.counted_as, verdict.feedback) == (retry, counted_as, feedback)
    assert (verdict.failure is None) is (not retry)


def test_a_407_through_a_proxy_is_the_proxys_failure():
    assert classify(_download(407), PROXIES, via_proxy=True).feedback is FeedbackKind.PROXY
    assert classify(_download(429), PROXIES, via_proxy=True).feedback is FeedbackKind.THROTTLED


def test_a_ban_page_is_a_blocking_sign_only_when_proxies_say_what_one_looks_like():
    ban = _download(200, b"<h1>Access denied: you look like a robot</h1>")
    assert classify(ban, PROXIES).feedback is FeedbackKind.BLOCKED
    assert classify(ban).feedback is FeedbackKind.OK
    assert classify(ban, PROXIES).failure is None  # kept, unless a proxy takes it again


@pytest.mark.parametrize("err,feedback", [
    (FetchTimeout("timeout after 1s"), "timeout"),
    (ConnectionRefused("connection refused"), "timeout"),
    (ConnectionFailed("connection error: x"), "timeout"),
    (ConnectionReset("connection reset"), "blocked"),
    (DNSFailure("DNS lookup failed"), "error"),
    (ProxyFailure("proxy failed"), "proxy"),
    (TLSFailure("TLS error"), "error"),
    (HeadersCut("cut"), "error"),
    (ResponseIncomplete("short"), "error"),
    (BadResponse("malformed"), "error"),
    (AddressRefused("refused: x"), "error"),
    (TooManyRedirects("more than 5 redirects"), "error"),
    (RequestFailed("request failed: x"), "error"),
    (FetchError("invalid URL"), "error"),
])
def test_what_a_failure_means(err, feedback):
    verdict = classify(err)
    assert verdict.failure is err and verdict.feedback == feedback
    assert verdict.retry is err.retryable and verdict.counted_as == err.reason


def test_no_result_tells_nothing():
    assert classify(None).feedback is FeedbackKind.ERROR and not classify(None).retry


@pytest.mark.parametrize("result,kind", [
    (_download(200), "ok"),
    (_download(404), "ok"),
    (_download(429, **{"retry-after": "2"}), "throttled"),
    (_download(503), "throttled"),
    (_download(403), "blocked"),
    (_download(200, b"<h1>Access denied: you look like a robot</h1>"), "blocked"),
    (ConnectionReset("connection reset"), "blocked"),
    (FetchTimeout("timeout after 1s"), "timeout"),
    (ConnectionRefused("connection refused"), "timeout"),
    (ProxyFailure("proxy failed"), "proxy"),
    (TLSFailure("TLS error"), "error"),
])
def test_what_a_download_tells_the_host_limiter(result, kind):
    feedback = host_feedback(result, PROXIES)
    assert feedback.kind == kind
    if kind == "throttled" and result.status == 429:
        assert feedback.retry_after == 2.0


def test_the_feedback_carries_status_latency_and_retry_after_as_the_limiter_reads_them():
    assert host_feedback(_download(429, **{"retry-after": "2"}), PROXIES, 1) == \
        Feedback("throttled", 429, 2.0, 0.2, 1)
    assert host_feedback(_download(403, **{"retry-after": "2"})) == Feedback("blocked", 403, None, 0.2)
    assert host_feedback(_download(200)) == Feedback("ok", 200, None, 0.2)
    # A failed proxy's latency says nothing of the host: none is given.
    assert host_feedback(_download(407), PROXIES, 0) == Feedback("proxy", 407, proxy=0)
    assert host_feedback(FetchTimeout("t"), proxy=1) == Feedback("timeout", proxy=1)
    assert host_feedback(None) == Feedback("error")


def test_feedback_kinds_are_the_strings_the_limiter_compares():
    assert [k.value for k in FeedbackKind] == ["ok", "throttled", "blocked", "timeout", "proxy", "error"]
    assert Feedback("throttled").kind is FeedbackKind.THROTTLED and f"{FeedbackKind.BLOCKED}" == "blocked"
    with pytest.raises(ValueError):
        Feedback("slow")
