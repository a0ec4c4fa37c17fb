"""The HTTP transport: one deadline per download, cut-off headers, the private-network guard."""

from __future__ import annotations

import socket
import time

import pytest

from crawler_tasks.download import download, make_session
from crawler_tasks.errors import FetchError
from crawler_tasks.models import CrawlRequest
from crawler_tasks.transport import is_public

from .hostile_site import HostileSite


@pytest.fixture(scope="module")
def hostile():
    site = HostileSite().start()
    yield site
    site.stop()


def fetch(url: str, *, timeout: float = 2.0, deny_private: bool = False, maxsize: int = 1 << 20):
    session = make_session("test", deny_private=deny_private)
    return download(session, CrawlRequest(url=url), timeout=timeout, maxsize=maxsize)


@pytest.mark.parametrize("path", ["/drip", "/stall-headers"])
def test_the_timeout_bounds_the_whole_download_however_slowly_the_server_sends(hostile, path):
    started = time.monotonic()
    with pytest.raises(FetchError, match=r"timeout after 1.5s") as info:
        fetch(hostile.url + path, timeout=1.5)
    assert info.value.retryable and time.monotonic() - started < 2.5


def test_headers_cut_off_by_the_server_are_a_failure_not_an_empty_page(hostile):
    with pytest.raises(FetchError, match="response cut off inside its headers"):
        fetch(hostile.url + "/cut-headers")


def test_the_size_cap_counts_decompressed_bytes_and_says_truncated(hostile):
    dl = fetch(hostile.url + "/gzip-bomb", timeout=20)
    assert dl.truncated and len(dl.body) == 1 << 20 and set(dl.body) == {0}


def test_a_body_of_exactly_the_cap_is_not_truncated(hostile):
    dl = fetch(hostile.url + "/ok")
    assert not dl.truncated
    exact = fetch(hostile.url + "/ok", maxsize=len(dl.body))
    assert exact.body == dl.body and not exact.truncated


@pytest.mark.parametrize("path,message,retryable", [
    ("/many-headers", "malformed response: got more than 100 headers", False),
    ("/cl-short", "response ended early: 100 bytes read", True),
])
def test_broken_responses_fail_with_a_named_reason(hostile, path, message, retryable):
    with pytest.raises(FetchError, match=message) as info:
        fetch(hostile.url + path)
    assert info.value.retryable is retryable


def test_an_untrusted_certificate_is_a_tls_failure_not_retried(hostile):
    with pytest.raises(FetchError, match="TLS error: certificate verify failed") as info:
        fetch(hostile.tls_url + "/ok")
    assert not info.value.retryable


@pytest.mark.parametrize("address,public", [
    ("127.0.0.1", False), ("10.1.2.3", False), ("192.168.0.1", False), ("172.16.0.1", False),
    ("169.254.169.254", False), ("100.64.0.1", False), ("0.0.0.0", False), ("::1", False),
    ("fd00:ec2::254", False), ("fe80::1%eth0", False), ("::ffff:127.0.0.1", False), ("224.0.0.1", False),
    ("93.184.216.34", True), ("2606:4700::1111", True), ("::ffff:8.8.8.8", True),
])
def test_public_addresses(address, public):
    assert is_public(address) is public


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_deny_private_networks_refuses_loopback(site, host):
    url = site.url.replace("127.0.0.1", host) + "/"
    assert fetch(url).status == 200  # allowed when the guard is off
    with pytest.raises(FetchError, match=r"refused: .* is at (127\.0\.0\.1|::1), a private") as info:
        fetch(url, deny_private=True)
    assert not info.value.retryable and info.value.reason == "blocked_address"


def test_deny_private_networks_judges_the_address_connected_to_not_the_name(site, monkeypatch):
    # A resolver that answers a public-looking name with loopback: DNS rebinding.
    real = socket.getaddrinfo

    def rebinding(host, *args, **kwargs):
        return real("127.0.0.1" if host == "public.example.test" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    url = site.url.replace("127.0.0.1", "public.example.test") + "/"
    assert fetch(url).status == 200
    with pytest.raises(FetchError, match="public.example.test is at 127.0.0.1"):
        fetch(url, deny_private=True)
