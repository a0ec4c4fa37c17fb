"""Seed feeds: the start-URL key, a seed file and sitemaps, fed into real crawls by a real worker."""

from __future__ import annotations

import gzip
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import redis

from crawler_tasks.backends import open_store
from crawler_tasks.broker import lists
from crawler_tasks.broker.queues import waiting_fetches
from crawler_tasks.cli.local import wait_drained
from crawler_tasks.core import routing
from crawler_tasks.core.errors import BadInput
from crawler_tasks.service.celery_app import app as celery_app
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages import feeds
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests
from tests.helpers import REDIS, by_url, token
from tests.service.test_tasks import _junk

#: Database of the broker no worker consumes (backpressure); test_beat.py uses it too.
IDLE_DB = 15
#: Seconds between ticks of the file and sitemap feeds in these tests (their slot lasts 90% of it).
INTERVAL = 1.0  # a tick on a loaded machine can take a fifth of a second: the slot must outlast it


def next_interval() -> None:
    time.sleep(INTERVAL + 0.05)


@pytest.fixture
def feed_rt(rt, settings, tmp_path) -> Iterator[Callable[..., Runtime]]:
    """feed_rt(**settings) -> a runtime whose feeds feed a new crawl stored in tmp_path."""
    made: list[Runtime] = []

    def make(**changes: object) -> Runtime:
        s = settings.replace(seed_interval=INTERVAL, seed_crawl_id=f"seeds{token()}", **changes)
        feed_runtime = Runtime(s, celery_app)
        feed_runtime.crawls.register(s.seed_crawl_id, store=str(tmp_path / "pages.db"))
        for name in feeds.FEED_NAMES:  # one feeder's slot and status per test
            feed_runtime.redis.delete(feed_runtime.keys.feed(name), feed_runtime.keys.feed_slot(name))
        made.append(feed_runtime)
        return feed_runtime

    yield make
    for r in made:
        r.close()


def stored(frt: Runtime, tmp_path: Path, worker) -> dict[str, object]:
    crawl_id = frt.settings.seed_crawl_id
    wait_drained(lambda: frt.crawls.outstanding(crawl_id) == 0, timeout=30, workers=worker)
    return by_url(list(open_store(str(tmp_path / "pages.db")).records(crawl_id)))


# -- seed file ------------------------------------------------------------------

def test_a_seed_file_in_both_formats_is_crawled_and_a_malformed_line_is_counted(
        feed_rt, worker, site, tmp_path, caplog):
    t = token()
    url = f"{site.url}/page/{t}"
    lines = [
        "# seeds for the test",
        f"{url}-plain",
        "",
        json.dumps({"url": f"{url}-json", "method": "GET", "_encoding": "utf-8",
                    "meta": {"url_id": "42", "NotExtract": True, "source": "catalogue"}}),
        '{"url": "' + f"{url}-broken" + '", "meta": ',  # line 5: cut off
        json.dumps({"url": f"{url}-head", "method": "HEAD", "meta": {"url_id": 7}}),
        f"  {url}-spaced  ",
    ]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(lines) + "\n")
    frt = feed_rt(seed_file=str(seeds))
    crawl_id = frt.settings.seed_crawl_id

    with caplog.at_level(logging.WARNING, logger="crawler_tasks.stages.feeds"):
        first = feeds.tick(frt, feeds.SEED_FILE)
    assert first.outcome == "fed"
    assert (first.fed.admitted, first.fed.invalid) == (4, 1)
    assert f"{seeds}:5" in caplog.text and "not a JSON seed object" in caplog.text
    # Within the same interval a second tick (another beat's) feeds nothing.
    assert feeds.tick(frt, feeds.SEED_FILE).reason == "already_fed"

    records = stored(frt, tmp_path, worker)
    assert set(records) == {f"{url}-plain", f"{url}-json", f"{url}-head", f"{url}-spaced"}
    assert records[f"{url}-json"].meta == {"url_id": "42", "NotExtract": True, "source": "catalogue"}
    assert records[f"{url}-head"].meta == {"url_id": 7} and records[f"{url}-head"].method == "HEAD"
    assert records[f"{url}-plain"].meta == {}
    assert frt.stats.read(crawl_id)["seeds/invalid"] == 1
    assert site.paths(f"/page/{t}-broken") == []
    # Next interval: the file is read again; the gate refuses what it admitted, a new line goes in.
    with seeds.open("a") as f:
        f.write(f"{url}-added\n")
    next_interval()
    second = feeds.tick(frt, feeds.SEED_FILE)
    assert (second.fed.admitted, second.fed.duplicates, second.fed.invalid) == (1, 4, 1)
    assert set(stored(frt, tmp_path, worker)) == {*records, f"{url}-added"}
    assert len(site.paths(f"/page/{t}-plain")) == 1
    assert frt.stats.read(crawl_id)["seeds/invalid"] == 2

    status = feeds.status(frt, feeds.SEED_FILE)
    assert (status["ticks"], status["admitted"], status["duplicates"], status["refused"]) == (2, 5, 4, 2)
    assert (status["skipped"], status["skipped/already_fed"]) == (1, 1)
    assert status["last_tick"].endswith("+00:00") and status["last_outcome"].startswith("fed: 1 admitted")


def test_hostile_seed_file_lines_are_refused_one_by_one(feed_rt, worker, site, tmp_path):
    t = token()
    hostile = [b"\xff\xfe not utf-8", b"x" * (feeds.MAX_LINE + 10), b"[" * 100_000, b'{"a":' + b"[" * 20_000,
               b"javascript:alert(1)", b'{"url": "ftp://a.test/"}', b'{"url": "http://a.test/", "method": "PUT"}',
               b'{"url": "http://a.test/", "crawl_id": "a:b"}', b'{"url": "http://a.test/", "meta": [1]}',
               b"\x00", b'"just a string"']
    good = [f"{site.url}/page/{t}-{i}".encode() for i in range(3)]
    seeds = tmp_path / "seeds.txt"
    seeds.write_bytes(b"\n".join([good[0], *hostile[:6], good[1], *hostile[6:], good[2]]))
    frt = feed_rt(seed_file=str(seeds))

    result = feeds.tick(frt, feeds.SEED_FILE)
    assert (result.outcome, result.fed.admitted, result.fed.invalid) == ("fed", 3, len(hostile))
    assert len(stored(frt, tmp_path, worker)) == 3


def test_a_missing_seed_file_fails_the_tick_in_one_line(feed_rt, tmp_path, caplog):
    frt = feed_rt(seed_file=str(tmp_path / "nowhere.txt"))
    with caplog.at_level(logging.WARNING, logger="crawler_tasks.stages.feeds"):
        result = feeds.tick(frt, feeds.SEED_FILE)
    assert result.outcome == "failed" and "No such file or directory" in result.reason
    assert [r.getMessage() for r in caplog.records] == [
        f"feed seed_file: tick failed: seed file {tmp_path / 'nowhere.txt'}: No such file or directory"]
    status = feeds.status(frt, feeds.SEED_FILE)
    assert (status["ticks"], status["failed"]) == (1, 1) and "No such file" in status["last_outcome"]


def test_an_unknown_feed_or_an_unset_one_feeds_nothing(feed_rt):
    frt = feed_rt()
    assert feeds.tick(frt, feeds.SEED_FILE).outcome == "off"
    with pytest.raises(BadInput, match="feed: 'nope' is not one of"):
        feeds.tick(frt, "nope")


# -- start-URL key (moved from test_seed.py) -------------------------------------

def start_urls_tick(rt: Runtime, batch: int | None = None) -> feeds.Fed:
    result = feeds.tick(rt, feeds.START_URLS, batch=batch)
    assert result.outcome == "fed", result
    return result.fed


def test_the_start_url_list_feeds_good_items_and_refuses_fuzzed_ones(rt, worker, site):
    key = rt.settings.start_urls_key
    rt.redis.delete(key, f"{key}:rejected")
    crawl_id, t = f"feed{token()}", token()
    good = [f"{site.url}/page/{t}-a",
            json.dumps({"url": f"{site.url}/page/{t}-b", "crawl_id": crawl_id, "meta": {"url_id": "7"}}),
            json.dumps({"url": f"{site.url}/page/{t}-c", "crawl_id": crawl_id})]
    rng = random.Random(7)
    junk = [json.dumps(_junk(rng)) if rng.random() < 0.5 else rng.choice(
        ["", "not a url", "javascript:alert(1)", "{", "{\"url\": 1}", "\xff\xfe", "x" * 5000,
         "http://", "[1, 2]", "{\"url\": \"mailto:a@b.test\"}"])
        for _ in range(200)]
    items = junk[:100] + good + junk[100:]
    rt.redis.rpush(key, *[i.encode("utf-8", "surrogatepass") for i in items])
    rt.redis.rpush(key, b"\xff\xfe\x00 raw bytes")
    invalid_before = rt.stats.read(rt.settings.seed_crawl_id).get("seeds/invalid", 0)

    fed = start_urls_tick(rt, batch=1000)
    assert fed.admitted == 3 and fed.invalid == len(items) - 3 + 1
    assert rt.redis.llen(key) == 0
    reasons = [json.loads(r) for r in rt.redis.lrange(f"{key}:rejected", 0, -1)]
    assert len(reasons) == fed.invalid and all(r["error"] and "\n" not in r["error"] for r in reasons)
    assert rt.stats.read(rt.settings.seed_crawl_id)["seeds/invalid"] == invalid_before + fed.invalid

    # The good seeds are crawled: the plain URL in the seed crawl, the objects in theirs.
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=30, workers=worker)
    assert rt.stats.read(crawl_id)["stored"] == 2
    assert start_urls_tick(rt) == feeds.Fed(feeds.START_URLS)  # an empty list feeds nothing


def test_beat_s_feed_task_runs_on_the_worker(rt, worker, site):
    key = rt.settings.start_urls_key
    crawl_id, t = f"feedtask{token()}", token()
    rt.redis.rpush(key, json.dumps({"url": f"{site.url}/page/{t}", "crawl_id": crawl_id}))
    rt.app.send_task(routing.FEED_TASK, **routing.ROUTES[routing.FEED_TASK])  # no argument: start_urls
    wait_drained(lambda: rt.stats.read(crawl_id).get("stored") == 1, timeout=30, workers=worker)
    assert rt.redis.llen(key) == 0
    rt.redis.rpush(key, json.dumps({"url": f"{site.url}/page/{t}-2", "crawl_id": crawl_id}))
    rt.app.send_task(routing.FEED_TASK, args=[feeds.START_URLS], **routing.ROUTES[routing.FEED_TASK])
    wait_drained(lambda: rt.stats.read(crawl_id).get("stored") == 2, timeout=30, workers=worker)


@pytest.mark.parametrize("kind", ["set", "zset"])
def test_a_start_url_set_or_sorted_set_is_drained_in_batches(rt, worker, site, kind):
    key = rt.settings.start_urls_key
    rt.redis.delete(key, f"{key}:rejected")
    crawl_id, t = f"feed{kind}{token()}", token()
    entries = [json.dumps({"url": f"{site.url}/page/{t}-{i}", "crawl_id": crawl_id}) for i in range(5)]
    if kind == "set":
        rt.redis.sadd(key, *entries, "not a url")
    else:
        rt.redis.zadd(key, {e: i for i, e in enumerate(entries)} | {"not a url": 9})
    fed = start_urls_tick(rt, batch=4)
    assert fed.admitted + fed.invalid == 4  # one batch
    if kind == "zset":
        assert (fed.admitted, fed.invalid) == (4, 0)  # lowest scores first: the bad entry scores 9
    while rt.redis.exists(key):
        start_urls_tick(rt, batch=4)
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=30, workers=worker)
    assert rt.stats.read(crawl_id)["stored"] == 5
    assert rt.redis.llen(f"{key}:rejected") == 1


def test_a_tick_finding_the_lock_held_is_skipped(rt):
    key = rt.settings.start_urls_key
    rt.redis.delete(key)
    rt.redis.rpush(key, "http://127.0.0.1:9/held")
    holder = feeds.FeedLock(rt.redis, rt.keys.feed_lock(feeds.START_URLS), 30)
    assert holder.acquire()
    try:
        assert feeds.tick(rt, feeds.START_URLS).reason == "busy"
        assert rt.redis.llen(key) == 1
    finally:
        holder.release()
    rt.redis.delete(key)


# -- sitemaps -------------------------------------------------------------------

class Files:
    """A local HTTP server of fixed files the test changes between ticks; records User-Agents."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, dict[str, str]]] = {}
        self.agents: list[str] = []
        files = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                files.agents.append(self.headers.get("User-Agent", ""))
                body, headers = files.files.get(self.path, (b"not found", {"X-Status": "404"}))
                self.send_response(int(headers.get("X-Status", "200")))
                for name, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def files() -> Iterator[Files]:
    f = Files()
    yield f
    f.close()


def urlset(entries: list[tuple[str, str | None]], ns: str = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"',
           prefix: str = "") -> bytes:
    urls = "".join(f"<{prefix}url><{prefix}loc>{loc}</{prefix}loc>"
                   + (f"<{prefix}lastmod>{lastmod}</{prefix}lastmod>" if lastmod else "") + f"</{prefix}url>"
                   for loc, lastmod in entries)
    return f'<?xml version="1.0" encoding="UTF-8"?><{prefix}urlset {ns}>{urls}</{prefix}urlset>'.encode()


def test_sitemaps_feed_their_locs_and_a_newer_lastmod_readmits_a_url(feed_rt, files, worker, site, tmp_path):
    t = token()
    page = f"{site.url}/page/{t}"
    files.files["/sitemap_index.xml"] = (gzip.compress(
        b'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + f"<sitemap><loc>{files.url}/a.xml</loc></sitemap>"
          f"<sitemap><loc>{files.url}/b.xml.gz</loc><lastmod>2024-01-01</lastmod></sitemap>".encode()
        + b"</sitemapindex>"), {"Content-Type": "application/xml", "Content-Encoding": "gzip"})

    def sitemap_a(lastmod: str) -> None:
        files.files["/a.xml"] = (urlset([(f"{page}-a1", lastmod), (f"{page}-a2", "2024-01-01T10:00:00+02:00")]),
                                 {"Content-Type": "application/xml"})

    sitemap_a("2024-01-01")
    files.files["/b.xml.gz"] = (gzip.compress(urlset(
        [(f"{page}-b1", None), ("ftp://files.test/b2", None), (f"{page}-b3?x=1&amp;y=2", "not a date")],
        ns='xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9"', prefix="sm:")),
        {"Content-Type": "application/x-gzip"})
    frt = feed_rt(sitemap_urls=(f"{files.url}/sitemap_index.xml",))
    crawl_id = frt.settings.seed_crawl_id

    first = feeds.tick(frt, feeds.SITEMAPS)
    assert (first.outcome, first.fed.admitted, first.fed.invalid) == ("fed", 4, 1)
    records = stored(frt, tmp_path, worker)
    assert set(records) == {f"{page}-a1", f"{page}-a2", f"{page}-b1", f"{page}-b3?x=1&y=2"}
    assert frt.stats.read(crawl_id)["seeds/invalid"] == 1
    assert set(files.agents) == {frt.settings.user_agent}

    # a1 changed since it was fed, a2 did not (the same instant, written in UTC), b1 has no lastmod.
    sitemap_a("2024-02-01T00:00:00Z")
    files.files["/a.xml"] = (files.files["/a.xml"][0].replace(b"2024-01-01T10:00:00+02:00",
                                                               b"2024-01-01T08:00:00Z"), {})
    next_interval()
    second = feeds.tick(frt, feeds.SITEMAPS)
    assert (second.fed.admitted, second.fed.duplicates) == (1, 3)
    stored(frt, tmp_path, worker)
    assert len(site.paths(f"/page/{t}-a1")) == 2
    assert len(site.paths(f"/page/{t}-a2")) == 1 and len(site.paths(f"/page/{t}-b1")) == 1

    # Unchanged since: refused again.
    next_interval()
    assert feeds.tick(frt, feeds.SITEMAPS).fed.admitted == 0
    assert feeds.status(frt, feeds.SITEMAPS)["admitted"] == 5


def test_sitemap_dates_keep_only_the_newest_and_a_too_long_loc_is_refused(feed_rt, files, worker, site,
                                                                            tmp_path):
    t = token()
    entries = [(f"{site.url}/page/{t}-{day}", f"2024-01-{day:02d}") for day in range(1, 31)]
    long_loc = f"{site.url}/page/{t}-" + "x" * 9000
    files.files["/dated.xml"] = (urlset(entries + [(long_loc, "2024-02-01")]), {})
    frt = feed_rt(sitemap_urls=(f"{files.url}/dated.xml",), sitemap_lastmod_max=10)
    first = feeds.tick(frt, feeds.SITEMAPS)
    assert (first.fed.admitted, first.fed.invalid) == (30, 1)
    stored(frt, tmp_path, worker)
    key = frt.keys.sitemap_lastmod(frt.settings.seed_crawl_id)
    assert frt.redis.zcard(key) == 10  # the ten newest dates: the 21st to the 30th
    kept = {m.decode() for m in frt.redis.zrange(key, 0, -1)}
    assert kept == {r.fingerprint for r in build_requests([loc for loc, _ in entries[20:]])}

    # The 1st is newer now: as its old date was dropped, it meets the gate (refused as seen),
    # and its new date is kept; the 30th changed too and is fetched again.
    entries[0] = (entries[0][0], "2024-03-01")
    entries[29] = (entries[29][0], "2024-03-01")
    files.files["/dated.xml"] = (urlset(entries), {})
    next_interval()
    second = feeds.tick(frt, feeds.SITEMAPS)
    assert (second.fed.admitted, second.fed.duplicates) == (1, 29)
    stored(frt, tmp_path, worker)
    fetched = site.paths(f"/page/{t}-")
    assert fetched.count(f"/page/{t}-30") == 2 and fetched.count(f"/page/{t}-1") == 1
    [first_page] = build_requests([entries[0][0]])
    assert frt.redis.zcard(key) == 10 and frt.redis.zscore(key, first_page.fingerprint) is not None


def test_broken_sitemaps_are_logged_and_the_others_still_feed(feed_rt, files, worker, site, tmp_path):
    t = token()
    files.files["/good.xml"] = (urlset([(f"{site.url}/page/{t}", None)]), {})
    files.files["/html.xml"] = (b"<html><body>not a sitemap</body></html>", {})
    files.files["/bad.xml"] = (b"<urlset><url><loc>http://a.test/</loc>", {})
    files.files["/bomb.xml.gz"] = (gzip.compress(b" " * (60 * 1024 * 1024)), {})
    files.files["/xxe.xml"] = (b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
                               + f"<urlset><url><loc>{site.url}/page/{t}-xxe&e;</loc></url></urlset>".encode(), {})
    names = ["good.xml", "html.xml", "bad.xml", "bomb.xml.gz", "missing.xml", "xxe.xml"]
    frt = feed_rt(sitemap_urls=tuple(f"{files.url}/{n}" for n in names))
    result = feeds.tick(frt, feeds.SITEMAPS)
    assert result.outcome == "fed" and result.fed.admitted == 2
    assert result.fed.sources_failed == 4  # html, bad (cut off), bomb (over 50 MB), missing (404)
    # The external entity is never read: its loc is the text before it.
    assert set(stored(frt, tmp_path, worker)) == {f"{site.url}/page/{t}", f"{site.url}/page/{t}-xxe"}

    frt_none = feed_rt(sitemap_urls=(f"{files.url}/missing.xml",))
    assert feeds.tick(frt_none, feeds.SITEMAPS).outcome == "failed"


# -- backpressure ---------------------------------------------------------------

@pytest.fixture
def idle_rt(settings, tmp_path) -> Iterator[Runtime]:
    """A runtime on a broker no worker consumes (database 15), fetch queue capped at 3."""
    url = f"{REDIS}/{IDLE_DB}"
    redis.Redis.from_url(url).flushdb()
    s = settings.replace(broker_url=url, redis_url=url, max_queued=3, start_urls_batch=5,
                         seed_interval=INTERVAL, seed_file=str(tmp_path / "seeds.txt"))
    idle = Runtime(s, create_app(s))
    yield idle
    idle.close()
    redis.Redis.from_url(url).flushdb()


def test_ticks_skip_while_the_fetch_queue_is_over_the_cap(idle_rt, tmp_path):
    batch = 10
    Path(idle_rt.settings.seed_file).write_text("".join(f"http://127.0.0.1:9/f{i}\n" for i in range(35)))
    key = idle_rt.settings.start_urls_key
    idle_rt.redis.rpush(key, *[f"http://127.0.0.1:9/s{i}" for i in range(40)])

    first = feeds.tick(idle_rt, feeds.SEED_FILE, batch=batch)
    assert first.outcome == "fed" and first.fed.admitted == batch and first.fed.stopped
    assert waiting_fetches(idle_rt.app, idle_rt.settings) == batch  # cap 3 + at most one chunk
    for _ in range(3):
        next_interval()
        assert feeds.tick(idle_rt, feeds.SEED_FILE, batch=batch).reason == "queue_full"
        assert feeds.tick(idle_rt, feeds.START_URLS).reason == "queue_full"
    assert waiting_fetches(idle_rt.app, idle_rt.settings) == batch
    assert idle_rt.redis.llen(key) == 40  # nothing taken off the start-URL list

    # The workers catch up (here: the queue is emptied): the next tick feeds the next chunk.
    idle_rt.redis.delete(*[lists.redis_list(routing.FETCH_QUEUE, p) for p in range(routing.MAX_BAND + 1)])
    next_interval()
    again = feeds.tick(idle_rt, feeds.SEED_FILE, batch=batch)
    assert (again.fed.admitted, again.fed.duplicates) == (batch, batch)
    assert waiting_fetches(idle_rt.app, idle_rt.settings) == batch
    status = feeds.status(idle_rt, feeds.SEED_FILE)
    assert (status["ticks"], status["stopped_early"], status["skipped/queue_full"]) == (2, 2, 3)
    assert feeds.status(idle_rt, feeds.START_URLS)["skipped/queue_full"] == 3


def test_entries_producers_push_while_ticks_run_are_neither_lost_nor_fed_twice(settings):
    url = f"{REDIS}/{IDLE_DB}"
    redis.Redis.from_url(url).flushdb()
    s = settings.replace(broker_url=url, redis_url=url, start_urls_batch=20, max_queued=0)
    frt = Runtime(s, create_app(s))
    key, total = s.start_urls_key, 400
    producer = redis.Redis.from_url(url)

    def produce() -> None:  # LPUSH, as scrapy-redis users do, one at a time
        for i in range(total):
            producer.lpush(key, f"http://127.0.0.1:9/pushed/{i}")
            time.sleep(0.0005)

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        while thread.is_alive() or feeds.waiting(frt):
            feeds.tick(frt, feeds.START_URLS)
    finally:
        thread.join()
    stats = frt.stats.read(s.seed_crawl_id)
    assert frt.gate.seen_count(s.seed_crawl_id) == total and stats["gate/admitted"] == total, stats
    assert waiting_fetches(frt.app, s) == total  # each published once
    frt.close()
    redis.Redis.from_url(url).flushdb()


# -- the private-network guard ---------------------------------------------------

#: Seeds whose host is an address the guard refuses, whatever the tests' loopback allowlist.
REFUSED = ["http://169.254.169.254/latest/meta-data/iam/security-credentials/",
           json.dumps({"url": "http://10.0.0.5/admin", "headers": {"Authorization": "Bearer x"}}),
           json.dumps({"url": "http://[fd00:ec2::254]/latest/api/token", "method": "HEAD",
                       "headers": {"X-aws-ec2-metadata-token-ttl-seconds": "60"}})]


def test_start_url_seeds_at_refused_addresses_are_rejected_with_their_reason(rt, worker, site):
    key = rt.settings.start_urls_key
    rt.redis.delete(key, f"{key}:rejected")
    crawl_id, t = f"guard{token()}", token()
    good = json.dumps({"url": f"{site.url}/page/{t}", "crawl_id": crawl_id, "headers": {"X-A": "1"}})
    rt.redis.rpush(key, *REFUSED[:2], good, REFUSED[2])
    fed = start_urls_tick(rt)
    assert (fed.admitted, fed.invalid) == (1, 3)
    errors = [json.loads(r)["error"] for r in rt.redis.lrange(f"{key}:rejected", 0, -1)]
    assert sorted(errors) == sorted([
        "seed http://10.0.0.5/admin refused: 10.0.0.5 is a private address (not in CRAWLER_PRIVATE_ALLOWLIST)",
        "seed http://169.254.169.254/latest/meta-data/iam/security-credentials/ refused: 169.254.169.254 is a "
        "cloud-metadata address (only CRAWLER_PRIVATE_ALLOWLIST naming it exactly allows it)",
        "seed http://[fd00:ec2::254]/latest/api/token refused: fd00:ec2::254 is a cloud-metadata address "
        "(only CRAWLER_PRIVATE_ALLOWLIST naming it exactly allows it)"])
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=30, workers=worker)
    assert rt.stats.read(crawl_id)["stored"] == 1


def test_seed_file_lines_at_refused_addresses_are_refused_one_by_one(feed_rt, worker, site, tmp_path, caplog):
    t = token()
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join([*REFUSED, f"{site.url}/page/{t}"]) + "\n")
    frt = feed_rt(seed_file=str(seeds))
    with caplog.at_level(logging.WARNING, logger="crawler_tasks.stages.feeds"):
        result = feeds.tick(frt, feeds.SEED_FILE)
    assert (result.fed.admitted, result.fed.invalid) == (1, 3)
    assert f"feed seed_file: refused {seeds}:2: seed http://10.0.0.5/admin refused: 10.0.0.5 is a private " \
           "address" in caplog.text
    assert set(stored(frt, tmp_path, worker)) == {f"{site.url}/page/{t}"}


def test_a_sitemap_loc_at_a_refused_address_is_never_fetched_nor_stored(feed_rt, files, worker, site, tmp_path):
    t = token()
    files.files["/map.xml"] = (urlset([(f"{site.url}/page/{t}", None),
                                       ("http://169.254.169.254/latest/meta-data/iam/", None),
                                       ("http://[64:ff9b::a9fe:a9fe]/latest/user-data", None),
                                       ("http://192.168.1.1/admin", None)]), {})
    frt = feed_rt(sitemap_urls=(f"{files.url}/map.xml",))
    result = feeds.tick(frt, feeds.SITEMAPS)
    assert (result.outcome, result.fed.admitted, result.fed.invalid) == ("fed", 1, 3)
    records = stored(frt, tmp_path, worker)
    assert set(records) == {f"{site.url}/page/{t}"}
    assert feeds.status(frt, feeds.SITEMAPS)["refused"] == 3
