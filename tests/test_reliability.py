"""A worker SIGKILLed mid-crawl loses no page and stores none twice."""

from __future__ import annotations

import time

from crawler_tasks.backends import open_store
from crawler_tasks.celery_app import create_app
from crawler_tasks.local import Workers, wait_drained
from crawler_tasks.runtime import Runtime
from crawler_tasks.seed import build_requests, submit_requests
from crawler_tasks.settings import Settings

from .conftest import REDIS, flush, token

KILL_DB = 11
PAGES = 40


def test_sigkilled_worker_loses_no_page_and_stores_none_twice(site, tmp_path):
    flush(KILL_DB)
    store = str(tmp_path / "pages.db")
    settings = Settings(broker_url=f"{REDIS}/{KILL_DB}", key_prefix=f"kill{token()}",
                        visibility_timeout=5, retry_backoff=0.1, retry_backoff_max=2, store=store)
    rt = Runtime(settings, create_app(settings))
    t, crawl_id = token(), "killed"
    seed = f"{site.url}/tree/{t}/0?size={PAGES}&delay=0.3"
    submit_requests(rt, build_requests(seed, crawl_id=crawl_id))

    first = Workers(settings, concurrency=2, name=f"kill1{t}@%h",
                    log_path=str(tmp_path / "w1.log")).start()
    wait_drained(lambda: rt.stats.read(crawl_id).get("stored", 0) >= 8, timeout=60, workers=first)
    first.kill()
    assert 8 <= open_store(store).count(crawl_id) < PAGES

    killed_at = time.monotonic()
    second = Workers(settings, concurrency=2, name=f"kill2{t}@%h",
                     log_path=str(tmp_path / "w2.log")).start()
    try:
        wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=90, workers=second)
    finally:
        second.stop()
    recovered_in = time.monotonic() - killed_at

    records = list(open_store(store).records(crawl_id))
    urls = [r.url for r in records]
    assert len(urls) == len(set(urls)) == PAGES
    assert {u.split("?")[0].rsplit("/", 1)[-1] for u in urls} == {str(n) for n in range(PAGES)}
    assert all(r.status == 200 for r in records)
    assert recovered_in < 60
    rt.close()
