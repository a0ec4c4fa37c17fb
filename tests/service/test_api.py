"""The public surface other apps use: ``submit()`` and the task names."""

from __future__ import annotations

import time

import pytest
import redis

import crawler_tasks
from crawler_tasks.broker.lists import redis_list
from crawler_tasks.core.errors import InvalidURL
from crawler_tasks.core.routing import FETCH_QUEUE, MAX_BAND
from tests.helpers import REDIS, TEST_DB, token
from tests.system.test_reliability import amqp_vhost  # noqa: F401  (a fixture)


def queued(crawl_url_part: str) -> int:
    client = redis.Redis.from_url(f"{REDIS}/{TEST_DB}")
    return sum(raw.count(crawl_url_part.encode()) for p in range(MAX_BAND + 1)
               for raw in client.lrange(redis_list(FETCH_QUEUE, p), 0, -1))


def test_exported_members():
    assert crawler_tasks.__all__ == ["app", "submit", "CrawlRequest", "PageRecord", "errors", "rule", "Request",
                                     "Failure", "Page", "DropItem", "DropRequest", "RetryRequest", "crawl_page",
                                     "list_crawls", "pause", "resume", "cancel", "purge"]
    assert crawler_tasks.app.main == "crawler_tasks"
    for name in crawler_tasks.__all__:
        assert getattr(crawler_tasks, name) is not None


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

    from crawler_tasks.cli.local import wait_drained
    from crawler_tasks.service.celery_app import celery_config

    other = Celery("other-app")
    other.config_from_object(celery_config(rt.settings))
    crawl_id = f"api{token()}"
    other.send_task("crawl.submit", kwargs={"urls": [f"{site.url}/page/{crawl_id}"], "crawl_id": crawl_id})
    wait_drained(lambda: rt.stats.read(crawl_id).get("stored", 0) == 1, timeout=30)
    assert site.paths(f"/page/{crawl_id}") == [f"/page/{crawl_id}"]


def test_a_bad_seed_sent_to_the_submit_task_is_counted_and_the_others_are_crawled(rt, worker, site):
    from celery import Celery

    from crawler_tasks.cli.local import wait_drained
    from crawler_tasks.service.celery_app import celery_config

    other = Celery("other-app")
    other.config_from_object(celery_config(rt.settings))
    crawl_id = f"api{token()}"
    urls = ["gopher://x/", f"{site.url}/page/{crawl_id}", "http://169.254.169.254/latest/meta-data/"]
    other.send_task("crawl.submit", kwargs={"urls": urls, "crawl_id": crawl_id})
    wait_drained(lambda: rt.stats.read(crawl_id).get("stored", 0) == 1, timeout=30)
    assert site.paths(f"/page/{crawl_id}") == [f"/page/{crawl_id}"]
    assert rt.stats.read(crawl_id).get("seeds/invalid") == 2


# An app that has only Celery and the broker URL: it does not import this package, sends
# with Celery's defaults (default queue, no transport options, no priority).
_PLAIN_APP = """
import sys, json
from celery import Celery
broker, fetch_args, fetch_id, submit_kwargs = json.loads(sys.argv[1])
app = Celery("plain", broker=broker)
if fetch_args is not None:
    app.send_task("crawl.fetch", args=fetch_args, task_id=fetch_id)
if submit_kwargs is not None:
    app.send_task("crawl.submit", kwargs=submit_kwargs)
assert not any(m.startswith("crawler_tasks") for m in sys.modules), "imported crawler_tasks"
"""
PLAIN_DB = 9


def send_from_plain_app(broker: str, *, fetch: dict | None = None, fetch_id: str | None = None,
                        submit: dict | None = None) -> None:
    import json
    import subprocess
    import sys

    payload = json.dumps([broker, [fetch] if fetch else None, fetch_id, submit])
    subprocess.run([sys.executable, "-c", _PLAIN_APP, payload], check=True, timeout=60,
                   capture_output=True, cwd="/")


@pytest.fixture(params=["redis", "amqp"])
def plain_setup(request, site, tmp_path):
    """Workers on a broker of their own (no other test's worker takes these messages), as a
    user starts them, with their store in ``tmp_path``."""
    from crawler_tasks.cli.local import Workers
    from crawler_tasks.core.settings import Settings
    from crawler_tasks.service.celery_app import create_app
    from crawler_tasks.stages.runtime import Runtime
    from tests.helpers import UNTHROTTLED, flush

    flush(PLAIN_DB)
    if request.param == "amqp":
        amqp_vhost = request.getfixturevalue("amqp_vhost")
        broker = amqp_vhost
    else:
        broker = f"{REDIS}/{PLAIN_DB}"
    settings = Settings.from_env(broker_url=broker, redis_url=f"{REDIS}/{PLAIN_DB}",
                                 store=str(tmp_path / "pages.db"), key_prefix=f"plain{token()}",
                                 **UNTHROTTLED)
    rt = Runtime(settings, create_app(settings))
    workers = Workers(settings, concurrency=4, name=f"plain-{token()}@%h",
                      log_path=str(tmp_path / "worker.log")).start()
    yield broker, rt, workers
    workers.stop()
    flush(PLAIN_DB)


def test_a_fetch_sent_by_name_from_an_app_with_only_the_broker_url_is_stored_and_counted_once(
        plain_setup, site):
    from crawler_tasks.backends import open_store
    from crawler_tasks.cli.local import wait_drained

    broker, rt, workers = plain_setup
    crawl_id = f"plain{token()}"
    url = f"{site.url}/page/{crawl_id}?delay=0.5"
    send_from_plain_app(broker, fetch={"url": url, "crawl_id": crawl_id}, fetch_id=f"{crawl_id}-1")
    # The crawl counts the fetch as soon as a worker takes it, and drains only after its record.
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) > 0, timeout=30, workers=workers)
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=30, workers=workers)
    stats = rt.stats.read(crawl_id)
    assert stats.get("stored") == 1 and stats.get("fetch/direct") == 1, stats
    [record] = open_store(rt.settings.store).records(crawl_id)
    assert record.status == 200 and record.url == url

    # The same message delivered again (same task id) is a late duplicate: not stored twice.
    send_from_plain_app(broker, fetch={"url": url, "crawl_id": crawl_id}, fetch_id=f"{crawl_id}-1")
    # and crawl.submit from the same app reaches the workers too.
    other = f"{site.url}/page/{crawl_id}-submitted"
    send_from_plain_app(broker, submit={"urls": [other], "crawl_id": crawl_id})
    wait_drained(lambda: rt.stats.read(crawl_id).get("stored", 0) >= 2, timeout=30, workers=workers)
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=30, workers=workers)
    stats = rt.stats.read(crawl_id)
    assert stats.get("stored") == 2 and stats.get("fetch/direct") == 1, stats
    time.sleep(1)  # the duplicate delivery had every chance to run
    assert len(site.paths(f"/page/{crawl_id}?")) == 1
    assert sorted(r.url for r in open_store(rt.settings.store).records(crawl_id)) == sorted([url, other])
