"""The store stage: idempotent records, and a dead backend delays pages but drops none."""

from __future__ import annotations

from crawler_tasks.backends import open_store
from crawler_tasks.local import wait_drained
from crawler_tasks.seed import build_requests, submit_requests

from .conftest import token


def test_dead_backend_means_retried_store_tasks_not_dropped_pages(rt, worker, site, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store's directory should be")
    store = str(blocker / "pages.db")
    crawl_id = f"dead{token()}"
    submit_requests(rt, build_requests(f"{site.url}/page/{token()}", crawl_id=crawl_id), store=store)

    wait_drained(lambda: rt.stats.read(crawl_id).get("store/retries", 0) >= 2, timeout=30)
    assert rt.crawls.outstanding(crawl_id) == 1  # still waiting, not dropped
    blocker.unlink()  # the backend comes back
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=60)
    [record] = open_store(store).records(crawl_id)
    assert record.status == 200
