"""Per-host politeness across two real worker processes: delay, concurrency, waiting in
Redis (not in a worker), back-off on 429, and the limiter's script-level rules."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.core.models import CrawlRequest
from crawler_tasks.core.politeness import Feedback, host_key
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.fakes.polite_site import PoliteSite
from tests.helpers import REDIS, flush, token

#: CRAWLER_POLITE_TEST_DB lets a second run (another checkout's) use its own database.
POLITE_DB = int(os.environ.get("CRAWLER_POLITE_TEST_DB", "4"))
#: Two worker processes of this many slots each, as the issue asks.
SLOTS = 4
#: Slack for "no two requests closer than the delay": the slot is taken in Redis, the
#: request reaches the server a few ms later, not always equally late.
TOLERANCE = 0.06


def polite_settings(tmp_path, **changes) -> Settings:
    """The suite's settings with robots.txt obeyed (the default) on this module's database."""
    return Settings.from_env().replace(**{
        "broker_url": f"{REDIS}/{POLITE_DB}", "redis_url": f"{REDIS}/{POLITE_DB}",
        "key_prefix": f"polite{token()}", "store": str(tmp_path / "pages.db"),
        "robotstxt_obey": True, **changes})


def site(sites: list[PoliteSite], **kw) -> PoliteSite:
    s = PoliteSite(**kw)
    sites.append(s)
    return s


def crawl(settings: Settings, urls: list[str], tmp_path, *, timeout: float = 120,
          processes: int = 2, flush_first: bool = True) -> tuple[Runtime, str, float]:
    """Crawl ``urls`` with ``processes`` workers of :data:`SLOTS` slots; (runtime, crawl id, seconds)."""
    if flush_first:
        flush(POLITE_DB)
    rt = Runtime(settings, create_app(settings))
    crawl_id = f"polite-{token()}"
    workers = Workers(settings, processes=processes, concurrency=SLOTS, name=f"polite{token()}@%h",
                      log_path=str(tmp_path / "workers.log")).start()
    try:
        started = time.monotonic()
        submit_requests(rt, build_requests(urls, crawl_id=crawl_id), max_depth=0, store=settings.store)
        wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=timeout, workers=workers)
        return rt, crawl_id, time.monotonic() - started
    finally:
        workers.stop()


def redis_contents(client) -> Iterator[tuple[bytes, bytes]]:
    """Every key of the database with its value(s) joined, whatever its type."""
    read = {b"string": lambda k: [client.get(k)], b"hash": lambda k: sum(client.hgetall(k).items(), ()),
            b"list": lambda k: client.lrange(k, 0, -1), b"set": client.smembers,
            b"zset": lambda k: client.zrange(k, 0, -1)}
    for key in client.scan_iter(count=1000):
        values = read.get(client.type(key), lambda k: [])(key)
        yield key, b"".join(v for v in values if isinstance(v, bytes))


def gaps(starts: list[float]) -> list[float]:
    return [b - a for a, b in zip(starts, starts[1:])]


def test_requests_to_one_host_are_spaced_by_the_delay_across_two_workers(sites, tmp_path):
    s = site(sites, pages=12)
    settings = polite_settings(tmp_path, download_delay=0.4, host_concurrency=2)
    rt, crawl_id, took = crawl(settings, [s.url + "/p/0"], tmp_path)
    starts = [h.start for h in s.page_hits()]
    assert len(starts) == 12
    assert min(gaps(starts)) >= 0.4 - TOLERANCE, gaps(starts)
    assert took >= 11 * 0.4 - TOLERANCE
    assert len(list(open_store(settings.store).records(crawl_id))) == 12
    # Waiting fetches were deferred, never retried.
    stats = rt.stats.read(crawl_id)
    assert stats.get("retries", 0) == 0 and stats["status/200"] == 12


def test_in_flight_requests_to_one_host_never_exceed_the_host_concurrency(sites, tmp_path):
    s = site(sites, pages=24, latency=0.3)
    settings = polite_settings(tmp_path, download_delay=0, host_concurrency=2)
    rt, crawl_id, _ = crawl(settings, [s.url + "/p/0"], tmp_path)
    assert len(s.page_hits()) == 24
    assert s.max_in_flight == 2  # the cap is reached and never passed, with 8 slots free
    assert rt.stats.read(crawl_id).get("retries", 0) == 0


def test_a_second_host_is_not_slowed_by_a_slow_first_host(sites, tmp_path):
    settings = polite_settings(tmp_path, download_delay=0, host_concurrency=2)
    alone = site(sites, pages=30, latency=0.05)
    crawl(settings, [alone.url + "/p/0"], tmp_path)
    hits = alone.page_hits()
    rate_alone = len(hits) / (hits[-1].end - hits[0].start)

    slow = site(sites, pages=30, latency=1.0)
    fast = site(sites, pages=30, latency=0.05)
    crawl(settings, [slow.url + "/p/0", fast.url + "/p/0"], tmp_path)
    hits = fast.page_hits()
    rate_shared = len(hits) / (hits[-1].end - hits[0].start)
    print(f"\nfast host alone {rate_alone:.1f} pages/s, beside a slow host {rate_shared:.1f} pages/s")
    assert len(hits) == 30 and slow.max_in_flight <= 2
    # A slow host holding what the fast one needs would bring it to about its own pace, 2
    # pages/s; the two measurements differ by up to a third on a loaded machine.
    assert rate_shared >= 0.5 * rate_alone


def test_retry_after_on_429_pauses_the_host_for_every_worker(sites, tmp_path):
    s = site(sites, pages=40, latency=0.02)
    s.extra_links = ["/limited/0"]
    settings = polite_settings(tmp_path, download_delay=0, host_concurrency=4)
    rt, crawl_id, _ = crawl(settings, [s.url + "/p/0"], tmp_path)
    hits = s.page_hits()
    throttled = next(h for h in hits if h.status == 429)
    # Requests that took their slot before the 429 came back may reach the site just after it.
    after = [h.start for h in hits if h.start > throttled.end + 0.05]
    assert after, "nothing was fetched after the 429"
    pause = after[0] - throttled.end
    print(f"\nfirst request after the 429 came {pause:.2f}s later")
    assert 2 - TOLERANCE <= pause <= 3.5
    # The 429 page itself came back once the pause was over (a retry, as Scrapy does).
    assert [h.status for h in hits if h.path == "/limited/0"] == [429, 200]
    assert rt.hosts.busiest()[0].throttled == 1


# -- the limiter's rules, on the real Redis, without workers --------------------------------

@pytest.fixture
def limiter_rt(tmp_path) -> Iterator[Runtime]:
    flush(POLITE_DB)
    settings = polite_settings(tmp_path, download_delay=0, host_concurrency=1)
    rt = Runtime(settings, create_app(settings))
    yield rt
    rt.close()


def test_the_recent_hosts_list_keeps_the_newest_hosts_only(limiter_rt):
    rt = limiter_rt
    rt.hosts.recent_hosts = 20  # RECENT_HOSTS (10,000) in production
    for i in range(100):  # a first request puts its host on the list, a parked fetch too
        host = f"h{i}.test:80"
        assert rt.hosts.acquire(host, f"t{i}").go
        if i % 2:
            rt.hosts.park(host, f"w{i}", CrawlRequest(f"http://h{i}.test/w"), 0)
    recent = [h.decode() for h in rt.redis.zrange(rt.keys.hosts_recent(0), 0, -1)]
    assert 20 <= len(recent) <= 22  # trimmed to 20 once it is a tenth over
    assert recent[-1] == "h99.test:80" and "h0.test:80" not in recent
    assert [h.host for h in rt.hosts.busiest(n=1)] == ["h99.test:80"]


def test_host_key_is_host_and_port():
    assert host_key("http://Example.COM/a") == "example.com:80"
    assert host_key("https://example.com/a") == "example.com:443"
    assert host_key("http://a.example.com:8080/") == "a.example.com:8080"
    assert host_key("http://[::1]:81/") == "::1:81"


def test_a_blocked_host_goes_through_a_proxy_and_the_record_names_it(sites, tmp_path):
    from tests.fakes.proxy_server import ForwardProxy

    s = site(sites, pages=12)
    s.ban_after = 3  # direct requests get 403 after three pages
    dead = ForwardProxy(fail=True).start()
    good = ForwardProxy(username="crawler", password="s3cret-pw").start()
    try:
        good_url = f"http://crawler:s3cret-pw@127.0.0.1:{good.port}"
        settings = polite_settings(tmp_path, download_delay=0, host_concurrency=2, ban_threshold=2,
                                   proxies=(f"http://127.0.0.1:{dead.port}", good_url))
        rt, crawl_id, _ = crawl(settings, [s.url + "/p/0"], tmp_path)
    finally:
        dead.stop()
        good.stop()
    records = list(open_store(settings.store).records(crawl_id))
    assert len(records) == 12 and all(r.status == 200 for r in records), \
        [(r.url, r.status, r.description) for r in records if r.status != 200]
    proxied = [r for r in records if r.proxy]
    assert proxied and {r.proxy for r in proxied} == {good.url}  # credentials never on a record
    assert len(good.requests) == len(proxied) and all(a and a.startswith("Basic ") for a in good.auth_headers)
    assert dead.requests  # tried in turn, failed, benched
    state = rt.hosts.busiest()[0]
    assert state.proxied and state.blocked >= 2
    stats = rt.stats.read(crawl_id)
    assert stats["retry/reason_count/blocked"] >= 1 and stats["retry/reason_count/proxy_failed"] >= 1
    # The password is nowhere: not in Redis (records, stats, task messages), not in the worker log.
    for key, value in redis_contents(rt.redis):
        assert b"s3cret" not in key + value, key
    assert "s3cret" not in (tmp_path / "workers.log").read_text(errors="replace")
    assert "s3cret" not in "".join(r.to_dict().__repr__() for r in records)


def test_503_without_retry_after_backs_off_and_successes_relax_it(limiter_rt):
    rt = limiter_rt
    host = "example.test:80"
    assert rt.hosts.acquire(host, "a").go
    rt.hosts.release(host, "a", Feedback("throttled", 503))
    slot = rt.hosts.acquire(host, "b")
    assert not slot.go  # paused for the back-off (1 s, doubling on each throttle)
    state = rt.hosts.busiest()[0]
    assert state.backoff == 1.0 and state.throttled == 1
    delays = []
    for tid in ("c", "d", "e", "f", "g"):
        rt.redis.hset(rt.keys.host(host), "next", 0)  # do not wait out the delay in a test
        assert rt.hosts.acquire(host, tid).go
        delays.append(rt.hosts.busiest()[0].delay)
        rt.hosts.release(host, tid, Feedback("ok", 200))
    # The back-off is the host's delay meanwhile, halved on each success, then dropped.
    assert delays == [1.0, 0.5, 0.25, 0.125, 0.0625]
    assert rt.hosts.busiest()[0].backoff == 0


def test_a_host_that_keeps_timing_out_gets_fewer_concurrent_requests(limiter_rt):
    rt = limiter_rt
    rt.settings = rt.hosts.settings = rt.settings.replace(host_concurrency=2)
    host = "slow.test:80"
    for tid in ("t1", "t2", "t3"):
        assert rt.hosts.acquire(host, tid).go
        rt.hosts.release(host, tid, Feedback("timeout"))
    assert rt.hosts.busiest()[0].concurrency_cut == 1
    assert rt.hosts.acquire(host, "x").go
    assert not rt.hosts.acquire(host, "y").go  # 2 - 1: one at a time now
    rt.hosts.release(host, "x", Feedback("ok", 200))
    for i in range(10):  # ten good answers in a row give the slot back
        assert rt.hosts.acquire(host, f"ok{i}").go
        rt.hosts.release(host, f"ok{i}", Feedback("ok", 200))
    assert rt.hosts.busiest()[0].concurrency_cut == 0


def test_autothrottle_moves_the_delay_towards_latency_over_target_concurrency(limiter_rt):
    rt = limiter_rt
    rt.settings = rt.hosts.settings = rt.settings.replace(autothrottle=True, autothrottle_start_delay=5.0,
                                                          autothrottle_target_concurrency=2.0)
    host = "auto.test:80"
    delays = []
    for i in range(12):
        rt.redis.hset(rt.keys.host(host), "next", 0)  # do not wait out the delay in a test
        assert rt.hosts.acquire(host, f"t{i}").go
        delays.append(rt.hosts.busiest()[0].delay)
        rt.hosts.release(host, f"t{i}", Feedback("ok", 200, latency=0.4))
    # 5 (start), then half-way towards 0.4 / 2 = 0.2 each time: 2.6, 1.4, 0.8, 0.5 ...
    assert delays[:4] == pytest.approx([5.0, 2.6, 1.4, 0.8])
    assert delays[-1] == pytest.approx(0.2, abs=0.01)
    # A slower answer raises it again; an error answer never lowers it.
    rt.hosts.release(host, "x", Feedback("ok", 500, latency=0.01))
    rt.redis.hset(rt.keys.host(host), "next", 0)
    assert rt.hosts.acquire(host, "y").go and rt.hosts.busiest()[0].delay == pytest.approx(0.2, abs=0.01)


def test_many_waiting_fetches_wait_in_redis_not_in_the_workers(sites, tmp_path):
    """20 hosts paused by a 429 (Retry-After 10 s: the checks below, a CLI process among them,
    must see the pause whole on a loaded machine) and 400 fetches for them: the workers hold
    no more than their prefetch, every fetch waits in Redis, stats shows the hosts, and all
    are fetched once the pause is over."""
    import json

    from tests.cli.test_cli import cli

    hosts = [site(sites, pages=20) for _ in range(20)]
    settings = polite_settings(tmp_path, download_delay=0, host_concurrency=2, robotstxt_obey=False,
                               retry_backoff_max=12.0)  # the suite's 5 s would cap the Retry-After
    flush(POLITE_DB)
    rt = Runtime(settings, create_app(settings))
    for s in hosts:  # each host just answered 429 with Retry-After: 10
        rt.hosts.release(s.host, "-", Feedback("throttled", 429, retry_after=10))
    crawl_id = f"polite-{token()}"
    workers = Workers(settings, processes=2, concurrency=SLOTS, name=f"polite{token()}@%h",
                      log_path=str(tmp_path / "workers.log")).start()
    try:
        seeds = [f"{s.url}/p/{n}" for s in hosts for n in range(20)]
        submit_requests(rt, build_requests(seeds, crawl_id=crawl_id), max_depth=0, store=settings.store)
        wait_drained(lambda: rt.hosts.waiting() == 400, timeout=30, workers=workers)
        broker = rt.redis  # the broker and the state share this database here
        assert broker.hlen("unacked") <= 2 * SLOTS  # at most one message per slot (prefetch 1)
        assert sum(len(h.page_hits()) for h in hosts) == 0
        env = {k: v for k, v in settings.to_env().items() if v}
        stats = json.loads(cli("stats", "--json", env=env).stdout)
        busiest = stats["hosts"]["busiest"]
        assert stats["hosts"]["waiting"] == 400 and len(busiest) == 10
        assert all(h["waiting"] == 20 and h["throttled"] == 1 and h["backoff"] > 0 for h in busiest)
        wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=120, workers=workers)
    finally:
        workers.stop()
    assert all(len(s.page_hits()) == 20 and s.max_in_flight <= 2 for s in hosts)
    assert len(list(open_store(settings.store).records(crawl_id))) == 400
    stats = rt.stats.read(crawl_id)
    assert stats["status/200"] == 400 and stats.get("retries", 0) == 0


def test_with_no_delay_and_no_cap_every_new_fetch_goes_to_the_broker(tmp_path):
    flush(POLITE_DB)
    s = polite_settings(tmp_path, download_delay=0.0, host_concurrency=0)
    rt = Runtime(s, create_app(s))
    assert not rt.hosts.holds  # nothing can hold a fetch: no per-host look-up at all
    rt.close()



def test_with_no_delay_fetches_taking_slots_back_to_back_never_wait(tmp_path):
    # Many threads' fetches of one host reach Redis microseconds apart: with no delay (and no
    # cap) none of them may be told to wait. The host's next time is kept to the microsecond:
    # rounded up, it was a little after the next fetch's "now", which then waited in the room,
    # and every fetch after it waited behind it.
    flush(POLITE_DB)
    s = polite_settings(tmp_path, download_delay=0.0, host_concurrency=0)
    rt = Runtime(s, create_app(s))
    host = "example.test:80"

    def take(n: int) -> list[str]:
        return [f"t{n}-{i}" for i in range(300) if not rt.hosts.acquire(host, f"t{n}-{i}").go]

    with ThreadPoolExecutor(8) as pool:
        told_to_wait = [tid for waited in pool.map(take, range(8)) for tid in waited]
    assert told_to_wait == []
    rt.close()
