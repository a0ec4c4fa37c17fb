"""The fetch failure kinds: each names its counter and says whether a retry is safe."""

from __future__ import annotations

import pytest

from crawler_tasks.core.errors import (
    AddressRefused,
    BadResponse,
    BadStatus,
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


@pytest.mark.parametrize("kind,reason,retryable", [
    (FetchTimeout, "timeout", True),
    (ConnectionFailed, "connection", True),
    (DNSFailure, "dns", True),
    (ConnectionRefused, "connection_refused", True),
    (ConnectionReset, "connection_reset", True),
    (ProxyFailure, "proxy", True),
    (TLSFailure, "tls", False),
    (AddressRefused, "blocked_address", False),
    (BadResponse, "bad_response", False),
    (HeadersCut, "headers_cut", True),
    (ResponseIncomplete, "incomplete", True),
    (TooManyRedirects, "redirect_max", False),
    (RequestFailed, "request", False),
    (FetchError, "error", False),
])
def test_each_failure_kind_names_its_counter_and_whether_a_retry_is_safe(kind, reason, retryable):
    err = kind("what happened")
    assert (err.reason, err.retryable, err.description, str(err)) == (reason, retryable, "what happened",
                                                                      "what happened")
    assert kind.reason == reason and kind.retryable is retryable  # said by the class itself
    assert err.status is None and err.retry_after is None


def test_a_bad_status_is_named_by_its_status_and_keeps_retry_after():
    err = BadStatus(503, 2.0)
    assert (err.reason, err.retryable, err.status, err.retry_after, err.description) == \
        ("http_503", True, 503, 2.0, "HTTP 503")


def test_the_connection_kinds_are_connection_failures():
    assert all(issubclass(k, ConnectionFailed) for k in (DNSFailure, ConnectionRefused, ConnectionReset))
