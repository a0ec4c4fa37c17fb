"""The HTTP transport: one deadline per download, cut-off headers, the private-network guard,
direct and through a proxy.
Also: idle keep-alive connections bounded however many hosts are crawled."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psutil
import pytest

from crawler_tasks.cli.local import EmbeddedRedis, Workers, wait_drained
from crawler_tasks.core.addresses import AddressPolicy
from crawler_tasks.core.errors import FetchError
from crawler_tasks.core.memory import LARGE_BODY, LargeBodies
from crawler_tasks.core.models import CrawlRequest
from crawler_tasks.core.settings import Settings
from crawler_tasks.net.download import download, make_session
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.fakes.hostile_site import HostileSite, bomb
from tests.fakes.many_hosts import ManyHosts
from tests.fakes.proxy_server import ForwardProxy
from tests.helpers import LOCAL, UNTHROTTLED, token


class Connects:
    """Every ``socket.connect`` this process attempts, seen by an audit hook (Python calls it
    before the connect). A connect to an address off this machine is stopped there with
    :class:`OffMachine`: whatever the code under test does, no packet leaves."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple) -> None:
        if event != "socket.connect":
            return
        address = args[1]
        host = str(address[0]) if isinstance(address, tuple) else str(address)
        self.seen.append(host)
        if isinstance(address, tuple) and not host.startswith(("127.", "::1", "localhost")):
            raise OffMachine(f"connect to {host} stopped by the test")

    def during(self, fn, *args, **kwargs) -> tuple[list[str], object]:
        """(addresses connected to while ``fn`` ran, what it returned or raised)."""
        start = len(self.seen)
        try:
            result: object = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the caller looks at it
            result = exc
        return self.seen[start:], result


class OffMachine(PermissionError):
    """A test tried to connect somewhere other than loopback."""


CONNECTS = Connects()


@pytest.fixture(scope="module")
def hostile():
    site = HostileSite().start()
    yield site
    site.stop()


def fetch(url: str, *, timeout: float = 2.0, policy: AddressPolicy = LOCAL, maxsize: int = 1 << 20,
          proxy: str | None = None, **fields):
    session = make_session("test", policy=policy)
    try:
        return download(session, CrawlRequest(url=url, **fields), timeout=timeout, maxsize=maxsize,
                        proxy=proxy)
    finally:
        session.close()


def refused(url: str, **options) -> FetchError:
    """The FetchError of a download the guard refused."""
    with pytest.raises(FetchError) as info:
        fetch(url, **options)
    assert info.value.reason == "blocked_address" and not info.value.retryable, info.value
    return info.value


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


def test_a_body_growing_past_1_mib_waits_for_a_large_body_slot_its_timeout_paused(hostile):
    bomb("gzip")  # built before the clock starts
    bodies = LargeBodies(1)
    holder, permit = bodies.permit(), bodies.permit()
    holder.take()  # another page holds the only slot
    session = make_session("test", policy=LOCAL)
    small = download(session, CrawlRequest(url=hostile.url + "/ok"), timeout=1.5,
                     maxsize=4 * LARGE_BODY, permit=permit)
    assert small.status == 200 and not permit.held  # a small body needs no slot
    got: list = []
    waiting = threading.Thread(target=lambda: got.append(download(
        session, CrawlRequest(url=hostile.url + "/gzip-bomb"), timeout=1.5,
        maxsize=4 * LARGE_BODY, permit=permit)), daemon=True)
    waiting.start()
    time.sleep(2.5)  # longer than the timeout: the wait is not the server's doing
    assert waiting.is_alive() and not got
    holder.release()
    waiting.join(timeout=10)
    [dl] = got
    assert dl.truncated and len(dl.body) == 4 * LARGE_BODY and permit.held  # the caller gives it back


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


# -- the private-network guard ------------------------------------------------

DEFAULT = AddressPolicy()  # what a worker has with no setting: private addresses refused


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_loopback_is_refused_by_default_and_allowed_by_the_allowlist(site, host):
    url = site.url.replace("127.0.0.1", host) + "/"
    before = len(site.paths())
    error = refused(url, policy=DEFAULT)
    assert str(error) == ("refused: 127.0.0.1 is a loopback address (not in CRAWLER_PRIVATE_ALLOWLIST)"
                          if host == "127.0.0.1" else
                          "refused: localhost is at 127.0.0.1, a loopback address (not in CRAWLER_PRIVATE_ALLOWLIST)")
    assert len(site.paths()) == before  # nothing reached the server
    assert fetch(url, policy=LOCAL).status == 200


def test_the_allowlist_judges_a_name_by_its_address_unless_it_names_the_host(site):
    by_name = site.url.replace("127.0.0.1", "localhost") + "/"
    # A range or an address: whatever name leads there is allowed, and only there.
    assert fetch(by_name, policy=AddressPolicy(allowlist=("127.0.0.1/32",))).status == 200
    assert "localhost is at 127.0.0.1" in str(refused(by_name, policy=AddressPolicy(allowlist=("127.0.0.2",))))
    # A name: that host, whatever it resolves to; the address itself is not allowed by it.
    assert fetch(by_name, policy=AddressPolicy(allowlist=("localhost",))).status == 200
    refused(site.url + "/", policy=AddressPolicy(allowlist=("localhost",)))


class Answer:
    """A server on one loopback address that says which one it is."""

    def __init__(self, host: str, port: int = 0) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = host.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def twin_servers() -> Iterator[int]:
    """One port, served on 127.0.0.2 (allowed below) and 127.0.0.1 (the 'internal' one)."""
    allowed = Answer("127.0.0.2")
    internal = Answer("127.0.0.1", allowed.port)
    yield allowed.port
    allowed.close()
    internal.close()


def test_dns_rebinding_gains_nothing_the_address_judged_is_the_one_connected_to(twin_servers, monkeypatch):
    # A resolver whose first answer is an allowed address and every later one an internal
    # one: a guard that checks a name and then lets the connection resolve it again
    # would reach the internal server.
    real, answers = socket.getaddrinfo, []

    def rebinding(host, *args, **kwargs):
        if host == "rebind.example.test":
            answers.append(host)
            host = "127.0.0.2" if len(answers) == 1 else "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    policy = AddressPolicy(allowlist=("127.0.0.2",))
    dl = fetch(f"http://rebind.example.test:{twin_servers}/", policy=policy)
    assert dl.body == b"127.0.0.2" and len(answers) == 1
    error = refused(f"http://rebind.example.test:{twin_servers}/", policy=policy)
    assert "rebind.example.test is at 127.0.0.1, a loopback address" in str(error)


@pytest.mark.parametrize("host,what", [
    ("169.254.169.254", "169.254.169.254 is a cloud-metadata address"),
    ("100.100.100.200", "100.100.100.200 is a cloud-metadata address"),
    ("[fd00:ec2::254]", "fd00:ec2::254 is a cloud-metadata address"),
    ("[::ffff:169.254.169.254]", "IPv4-mapped for 169.254.169.254, a cloud-metadata address"),
    ("[64:ff9b::a9fe:a9fe]", "NAT64 for 169.254.169.254, a cloud-metadata address"),
    ("[64:ff9b::a00:1]", "NAT64 for 10.0.0.1, a private address"),
    ("[64:ff9b:1::7f00:1]", "local-use NAT64 for 127.0.0.1, a loopback address"),
    ("[2002:a9fe:a9fe::1]", "6to4 for 169.254.169.254, a cloud-metadata address"),
    ("[2002:c0a8:101::1]", "6to4 for 192.168.1.1, a private address"),
    ("10.1.2.3", "10.1.2.3 is a private address"),
    ("2852039166", "2852039166 is at 169.254.169.254, a cloud-metadata address"),
])
def test_refused_addresses_are_refused_before_any_packet_is_sent(host, what):
    # The loopback allowlist does not cover them: LOCAL is what the test sites need.
    connected, result = CONNECTS.during(fetch, f"http://{host}/latest/meta-data/", policy=LOCAL)
    assert isinstance(result, FetchError) and result.reason == "blocked_address", result
    assert what in str(result)
    assert connected == []


def test_a_metadata_address_passes_only_when_named_exactly():
    url = "http://169.254.169.254/latest/meta-data/"
    for allowlist in (("169.254.0.0/16",), ("0.0.0.0/0",), ("localhost",)):
        connected, result = CONNECTS.during(fetch, url, policy=AddressPolicy(allowlist=allowlist))
        assert isinstance(result, FetchError) and result.reason == "blocked_address" and connected == []
    # Named exactly, the connection is attempted (and stopped here, off this machine).
    connected, _ = CONNECTS.during(fetch, url, policy=AddressPolicy(allowlist=("169.254.169.254",)))
    assert connected == ["169.254.169.254"]
    # With the private networks allowed, still refused.
    connected, result = CONNECTS.during(fetch, url, policy=AddressPolicy(deny_private=False))
    assert isinstance(result, FetchError) and result.reason == "blocked_address" and connected == []


def test_a_redirect_is_not_followed_by_the_transport_each_hop_is_judged(site):
    # The fetch stage turns a redirect into a new request: its target meets the guard like a seed.
    dl = fetch(f"{site.url}/goto?to=http://169.254.169.254/latest/meta-data/")
    assert dl.status == 302 and dl.headers["location"] == "http://169.254.169.254/latest/meta-data/"
    connected, result = CONNECTS.during(fetch, dl.headers["location"])
    assert isinstance(result, FetchError) and result.reason == "blocked_address" and connected == []


# -- through a proxy -----------------------------------------------------------

@pytest.fixture(scope="module")
def proxy() -> Iterator[ForwardProxy]:
    p = ForwardProxy(stream=True).start()
    yield p
    p.stop()


@pytest.fixture
def env_proxy(proxy, monkeypatch) -> ForwardProxy:
    """``HTTP_PROXY`` in the environment, as an operator may have it, and no exceptions."""
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("http_proxy", proxy.url)
    return proxy


@pytest.mark.parametrize("how", ["CRAWLER_PROXIES", "HTTP_PROXY"])
def test_through_a_proxy_the_target_is_judged_and_nothing_refused_reaches_the_proxy(
        site, proxy, how, request):
    options = {"proxy": proxy.url} if how == "CRAWLER_PROXIES" else {}
    if how == "HTTP_PROXY":
        request.getfixturevalue("env_proxy")
    before = list(proxy.requests)
    dl = fetch(f"{site.url}/page/proxied", **options)
    assert dl.status == 200
    assert dl.raw is not None and dl.raw.request_line.startswith("GET http://")  # the guarded connection
    for url, what in [("http://169.254.169.254/latest/meta-data/iam/", "a cloud-metadata address"),
                      (f"http://127.0.0.2:{site.url.rsplit(':', 1)[1]}/", "127.0.0.2 is a loopback address"),
                      (f"http://0.0.0.0:{site.url.rsplit(':', 1)[1]}/", "0.0.0.0 is an unspecified address")]:
        error = refused(url, policy=AddressPolicy(allowlist=("127.0.0.1",)), **options)
        assert what in str(error)
    assert proxy.requests == [*before, f"{site.url}/page/proxied"]


@pytest.mark.parametrize("how", ["CRAWLER_PROXIES", "HTTP_PROXY"])
def test_the_deadline_cuts_a_slow_server_behind_a_proxy(hostile, proxy, how, request):
    options = {"proxy": proxy.url} if how == "CRAWLER_PROXIES" else {}
    if how == "HTTP_PROXY":
        request.getfixturevalue("env_proxy")
    started = time.monotonic()
    with pytest.raises(FetchError, match=r"timeout after 1.5s"):
        fetch(hostile.url + "/drip", timeout=1.5, **options)
    assert time.monotonic() - started < 2.5
    assert proxy.requests[-1] == hostile.url + "/drip"


def test_a_refused_target_does_not_bench_the_proxy(proxy):
    # Refused before the request: not the proxy's failure (no "proxy" reason that benches it).
    error = refused("http://[64:ff9b::a9fe:a9fe]/", proxy=proxy.url)
    assert "NAT64 for 169.254.169.254" in str(error)



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
        session = make_session("test", pool_hosts=8, policy=LOCAL)
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
