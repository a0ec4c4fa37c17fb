"""The public surface other apps use: ``submit()`` and the task names."""

from __future__ import annotations

import pytest
import redis

import crawler_tasks
from crawler_tasks.errors import InvalidURL
from crawler_tasks.routing import FETCH_QUEUE, MAX_BAND, redis_list

from .conftest import REDIS, TEST_DB, token


def queued(crawl_url_part: str) -> int:
    client = redis.Redis.from_url(f"{REDIS}/{TEST_DB}")
    return sum(raw.count(crawl_url_part.encode()) for p in range(MAX_BAND + 1)
               for raw in client.lrange(redis_list(FETCH_QUEUE, p), 0, -1))


def test_exported_members():
    assert crawler_tasks.__all__ == ["app", "submit", "CrawlRequest", "PageRecord", "errors"]
    assert crawler_tasks.app.main == "crawler_tasks"


def test_submit_returns_how_many_the_gate_accepted(rt):
    crawl_id = f"api{token()}"
    urls = [f"http://127.0.0.1:9/{crawl_id}/{i}" for i in range(3)]
    assert crawler_tasks.submit(urls, crawl_id=crawl_id) == 3
    assert crawler_tasks.submit(urls + [urls[0] + "#frag"], crawl_id=crawl_id) == 0
    assert crawler_tasks.submit(urls[0], crawl_id=crawl_id, dont_filter=True) == 1
    rt.redis.delete(rt.keys.outstanding(crawl_id))


def test_one_invalid_url_enqueues_nothing(rt):
    crawl_id = f"api{token()}"
    with pytest.raises(InvalidURL):
        crawler_tasks.submit([f"http://127.0.0.1:9/{crawl_id}", "gopher://x/"], crawl_id=crawl_id)
    assert queued(crawl_id) == 0 and rt.gate.seen_count(crawl_id) == 0


def test_other_apps_can_send_the_submit_task_by_name(rt, worker, site):
    from celery import Celery

    from crawler_tasks.celery_app import celery_config
    from crawler_tasks.local import wait_drained

    other = Celery("other-app")
    other.config_from_object(celery_config(rt.settings))
    crawl_id = f"api{token()}"
    other.send_task("crawl.submit", kwargs={"urls": [f"{site.url}/page/{crawl_id}"], "crawl_id": crawl_id})
    wait_drained(lambda: rt.stats.read(crawl_id).get("stored", 0) == 1, timeout=30)
    assert site.paths(f"/page/{crawl_id}") == [f"/page/{crawl_id}"]
