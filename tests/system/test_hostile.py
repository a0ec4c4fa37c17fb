"""A crawl of a site of hostile responses: every one ends in a record with a clear
description, in bounded time, with bounded worker memory, and the crawl drains."""

from __future__ import annotations

import threading
import time

import psutil
import pytest

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import EmbeddedRedis, Workers, wait_drained
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.fakes.hostile_site import HOSTILE_PATHS, LONG_LINKS, HostileSite
from tests.helpers import UNTHROTTLED, token

pytestmark = pytest.mark.slow

TIMEOUT = 2.0
MAX_RETRIES = 1
MAX_LINKS = 1000
#: What one worker process of the default pool (threads, CRAWLER_WORKER_CONCURRENCY)
#: may hold at its peak, whatever the pages.
MAX_RSS = 512 * 2**20

#: path -> (status of the record, text its description must contain); None = a stored page.
EXPECTED = {
    "/drip": (None, f"timeout after {TIMEOUT}s ({MAX_RETRIES + 1} attempts)"),
    "/stall-headers": (None, f"timeout after {TIMEOUT}s ({MAX_RETRIES + 1} attempts)"),
    "/cut-headers": (None, "response cut off inside its headers"),
    "/gzip-bomb": (200, None),
    "/deflate-bomb": (200, None),
    "/redirects/10000": (302, None),
    "/links/1000000": (200, None),
    "/long-links/0": (200, None),
    "/deep": (200, None),
    "/bad-utf8": (200, None),
    "/mixed-encoding": (200, None),
    "/many-headers": (None, "malformed response: got more than 100 headers"),
    "/cl-short": (None, "response ended early"),
    "/cl-long": (200, None),
}


@pytest.fixture(scope="module")
def hostile() -> HostileSite:
    site = HostileSite(warm=True).start()
    yield site
    site.stop()


@pytest.fixture
def private_redis() -> EmbeddedRedis:
    """A redis-server of this test's own, as its broker and state Redis."""
    server = EmbeddedRedis().start()
    yield server
    server.stop()


def tree_rss(proc: psutil.Process) -> int:
    """RSS of ``proc`` and its children (0 once it is gone)."""
    try:
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
    except psutil.NoSuchProcess:
        return 0


class PeakRSS:
    """The highest RSS of a process tree, sampled every ``every`` seconds on a thread."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        self.proc, self.every, self.peak = psutil.Process(pid), every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(self.proc))
            self._stop.wait(self.every)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_hostile_site_crawl_drains_with_a_described_record_for_everything(hostile, private_redis, tmp_path):
    assert set(EXPECTED) == set(HOSTILE_PATHS)
    store = str(tmp_path / "pages.db")
    settings = Settings(broker_url=private_redis.url, key_prefix=f"hostile{token()}",
                        store=store, download_timeout=TIMEOUT, max_retries=MAX_RETRIES,
                        retry_backoff=0.1, retry_backoff_max=1, max_links_per_page=MAX_LINKS,
                        allowed_domains=("127.0.0.1", "localhost"), max_depth=2, **UNTHROTTLED)
    assert settings.worker_pool == "threads" and settings.worker_concurrency == 128  # the defaults
    rt = Runtime(settings, create_app(settings))
    crawl_id = "hostile"
    # One worker process of the default pool at the default concurrency.
    workers = Workers(settings, name=f"hostile{token()}@%h", log_path=str(tmp_path / "workers.log")).start()
    started = time.monotonic()
    try:
        with PeakRSS(workers.proc.pid) as rss:
            submit_requests(rt, build_requests([hostile.url + "/", hostile.tls_url + "/ok"],
                                               crawl_id=crawl_id))
            wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=180, workers=workers,
                         poll=0.2)
    finally:
        workers.stop()
    elapsed = time.monotonic() - started
    print(f"\nhostile crawl: drained in {elapsed:.1f}s, peak RSS of the worker {rss.peak / 2**20:.0f} MB")
    assert rss.peak < MAX_RSS, f"peak RSS {rss.peak / 2**20:.0f} MB"

    records = {r.url: r for r in open_store(store).records(crawl_id)}
    for path, (status, text) in EXPECTED.items():
        record = records[hostile.url + path]
        if status is not None:
            assert record.status == status, (path, record.status, record.description)
        if text is not None:
            assert text in (record.description or ""), (path, record.description)
            assert record.status in (None, 0), (path, record.status)
    tls = records[hostile.tls_url + "/ok"]
    assert "TLS error: certificate verify failed" in tls.description

    bombs = [records[hostile.url + p] for p in ("/gzip-bomb", "/deflate-bomb")]
    assert all(r.truncated and r.size == settings.download_maxsize for r in bombs)
    links = records[hostile.url + "/links/1000000"]
    assert links.truncated and len(links.links) == MAX_LINKS
    assert all(r.body is not None and len(r.body) == r.size for r in [*bombs, links])  # kept whole
    deep = records[hostile.url + "/deep"]  # parsed as a stream: no nesting limit
    assert deep.text == "bottom deep end" and deep.links == [hostile.url + "/deep-end"]
    stats = rt.stats.read(crawl_id)
    assert stats["links/over_cap"] > 100_000
    # The redirect chain is cut at CRAWLER_REDIRECT_MAX_TIMES hops, each hop stored once.
    hops = [r for r in records.values() if "/redirects/" in r.url]
    assert len(hops) == settings.redirect_max_times + 1
    assert [r.description for r in hops if r.description] == [
        f"redirect not followed: redirect hops exceeded ({settings.redirect_max_times})"]
    # Exactly what the store holds is what the counters say.
    assert stats["stored"] == len(records)
    assert stats.get("errors", 0) == 0 and stats.get("worker_lost", 0) == 0
    # Each hostile response costs at most its attempts' timeouts plus backoff, run in parallel.
    assert elapsed < 120
    rt.close()




def test_pages_of_long_links_count_them_and_leave_worker_memory_flat(hostile, private_redis, tmp_path):
    """Pages of 1,000 distinct 10 KiB links each: none is queued or kept, each is counted, and
    the worker's memory levels off: a second batch of such pages does not raise it further
    (their URLs would add about 30 MB per page to unbounded caches)."""
    batch = 10
    store = str(tmp_path / "pages.db")
    settings = Settings(broker_url=private_redis.url, store=store, key_prefix="long",
                        download_maxsize=16 * 2**20, max_depth=1, **UNTHROTTLED)
    rt = Runtime(settings, create_app(settings))
    workers = Workers(settings, concurrency=4, name=f"long{token()}@%h",
                      log_path=str(tmp_path / "worker.log")).start()
    proc = psutil.Process(workers.proc.pid)
    peaks = []
    try:
        for first in (0, batch):
            peak = 0
            seeds = [f"{hostile.url}/long-links/{n}" for n in range(first, first + batch)]
            submit_requests(rt, build_requests(seeds, crawl_id="long"))

            def drained() -> bool:
                nonlocal peak
                peak = max(peak, tree_rss(proc))
                return rt.crawls.outstanding("long") == 0

            wait_drained(drained, timeout=240, workers=workers, poll=0.2)
            peaks.append(peak)
        records = list(open_store(store).records("long"))
        stats = rt.stats.read("long")
    finally:
        workers.stop()
        rt.close()
    print(f"\nlong links: worker peak RSS {peaks[0] / 2**20:.0f} MB after {batch} pages, "
          f"{peaks[1] / 2**20:.0f} MB after {2 * batch}")
    assert len(records) == 2 * batch and all("/long-links/" in r.url for r in records)
    assert all(r.status == 200 and r.links == [] and not r.truncated for r in records)
    assert stats["links/too_long"] == 2 * batch * LONG_LINKS
    assert peaks[1] - peaks[0] < 100 * 2**20, f"the second batch added {(peaks[1] - peaks[0]) / 2**20:.0f} MB"
