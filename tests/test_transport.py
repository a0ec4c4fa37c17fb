"""The HTTP transport: one deadline per download, cut-off headers, the private-network guard,
idle keep-alive connections bounded however many hosts are crawled."""

from __future__ import annotations

import socket
import time

import psutil
import pytest

from crawler_tasks.celery_app import create_app
from crawler_tasks.download import download, make_session
from crawler_tasks.errors import FetchError
from crawler_tasks.local import EmbeddedRedis, Workers, wait_drained
from crawler_tasks.models import CrawlRequest
from crawler_tasks.runtime import Runtime
from crawler_tasks.seed import build_requests, submit_requests
from crawler_tasks.settings import Settings
from crawler_tasks.transport import is_public

from .conftest import UNTHROTTLED, token
from .hostile_site import HostileSite
from .many_hosts import ManyHosts


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


# -- idle keep-alive connections ----------------------------------------------------

def sockets_to(proc: psutil.Process, port: int) -> int:
    """The process's TCP sockets connected to ``port`` (in use or idle)."""
    try:
        return sum(1 for c in proc.net_connections(kind="tcp") if c.raddr and c.raddr.port == port)
    except psutil.NoSuchProcess:
        return 0


def test_a_session_keeps_idle_connections_to_its_most_recent_hosts_only():
    site = ManyHosts(40).start()
    try:
        session = make_session("test", pool_hosts=8)
        for url in site.urls():
            assert download(session, CrawlRequest(url=url), timeout=5, maxsize=1 << 20).status == 200
        assert sockets_to(psutil.Process(), site.port) == 8
        for url in site.urls()[-8:]:  # the eight most recent hosts: their connections are reused
            download(session, CrawlRequest(url=url), timeout=5, maxsize=1 << 20)
        assert sockets_to(psutil.Process(), site.port) == 8 and site.requests == 48
        session.close()
    finally:
        site.stop()


def test_a_worker_crawling_a_thousand_hosts_keeps_its_idle_connections_under_the_cap(tmp_path):
    """8 threads, CRAWLER_MAX_IDLE_CONNECTIONS=32: at most 32 idle sockets plus 8 in use,
    where one pool of 32 hosts per thread kept up to 256 open."""
    site = ManyHosts(1000).start()
    server = EmbeddedRedis().start()
    settings = Settings(broker_url=server.url, store=str(tmp_path / "pages.db"), key_prefix="broad",
                        max_idle_connections=32, **UNTHROTTLED)
    rt = Runtime(settings, create_app(settings))
    workers = Workers(settings, concurrency=8, name=f"broad{token()}@%h",
                      log_path=str(tmp_path / "worker.log")).start()
    peak_sockets = peak_fds = 0
    try:
        proc = psutil.Process(workers.proc.pid)
        submit_requests(rt, build_requests(site.urls(), crawl_id="broad"))

        def drained() -> bool:
            nonlocal peak_sockets, peak_fds
            peak_sockets = max(peak_sockets, sockets_to(proc, site.port))
            peak_fds = max(peak_fds, proc.num_fds())
            return rt.crawls.outstanding("broad") == 0

        wait_drained(drained, timeout=180, workers=workers, poll=0.1)
        stored = rt.stats.read("broad").get("stored", 0)
    finally:
        workers.stop()
        rt.close()
        server.stop()
        site.stop()
    print(f"\n1,000 hosts: peak {peak_sockets} sockets to the site, {peak_fds} open files")
    assert stored == 1000
    assert peak_sockets <= 32 + 8
    assert peak_fds < 200
