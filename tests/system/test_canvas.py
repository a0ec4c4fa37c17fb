"""``crawl.page`` in Celery's canvas: a chain into another app's task, a group whose results
the caller waits on, a chord; with real crawler workers, a real result backend and the
other app's real worker."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest
import redis
from celery import chain, chord, group

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import Workers
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from tests.helpers import REDIS, UNTHROTTLED, token
from tests.system.test_callbacks import Receiver

CANVAS_DB = int(os.environ.get("CRAWLER_CANVAS_TEST_DB", "6"))
URL = f"{REDIS}/{CANVAS_DB}"


@pytest.fixture(scope="module")
def canvas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    redis.Redis.from_url(URL).flushdb()
    tmp = tmp_path_factory.mktemp("canvas")
    settings = Settings(broker_url=URL, redis_url=URL, result_backend=URL, store=str(tmp / "pages.db"),
                        plugins=("tests.programs.faulty",), **UNTHROTTLED)
    workers = Workers(settings, concurrency=4, name=f"canvas{token()}@%h", log_path=str(tmp / "w.log"),
                      loglevel="INFO").start()
    receiver = Receiver(URL, tmp / "receiver.log", notes=URL)
    app = create_app(settings)
    try:
        yield app, settings, receiver
    finally:
        receiver.stop()
        workers.stop()


def test_a_chain_hands_the_page_summary_to_another_apps_task(canvas, site):
    app, settings, receiver = canvas
    tag, url = f"chain{token()}", f"{site.url}/rules/{token()}/items"
    chain(app.signature("crawl.page", args=[url], kwargs={"crawl_id": tag}),
          app.signature("receiver.page", kwargs={"tag": tag}, queue="crawl.callbacks")).apply_async()
    receiver.wait(lambda: receiver.pages(tag))
    assert receiver.pages(tag) == {url: 1}
    summary = json.loads(receiver.notes.lindex(f"receiver:{tag}:summaries", 0))
    assert summary["status"] == 200 and summary["written"] and not summary["duplicate"]
    assert summary["rule"] == "tests.programs.faulty.items"  # the rules ran
    assert summary["items"] == [{"n": 1}, {"n": 2, "explode": True}]
    record = open_store(settings.store).get(summary["fingerprint"])  # written before the chain went on
    assert record is not None and record.url == url and record.items == summary["items"]


def test_a_group_returns_each_pages_summary_and_the_gate_still_applies(canvas, site):
    app, settings, _ = canvas
    crawl_id = f"group{token()}"
    urls = [f"{site.url}/page/{token()}" for _ in range(3)]
    results = group(app.signature("crawl.page", args=[u], kwargs={"crawl_id": crawl_id})
                    for u in [*urls, urls[0]]).apply_async().get(timeout=60)
    assert [r["url"] for r in results] == [*urls, urls[0]]
    # The same URL twice in one crawl: fetched once, the other answer says so (and gives the
    # stored record, if the fetch of the first has stored it by then: the two run at once).
    assert sorted(r["duplicate"] for r in (results[0], results[3])) == [False, True]
    assert [r["status"] for r in results if not r["duplicate"]] == [200, 200, 200]
    assert all(r["written"] for r in results if not r["duplicate"])
    again = app.signature("crawl.page", args=[urls[1]], kwargs={"crawl_id": crawl_id, "dont_filter": True}
                          ).apply_async().get(timeout=60)
    assert again["duplicate"] is False and again["status"] == 200  # dont_filter: fetched again
    hits = [p for p in site.paths("/page/") if p == urls[1][len(site.url):]]
    assert len(hits) == 2


def test_a_chord_gets_every_summary_once_all_pages_are_stored(canvas, site):
    app, _, receiver = canvas
    tag = f"chord{token()}"
    urls = [f"{site.url}/page/{token()}" for _ in range(4)]
    chord((app.signature("crawl.page", args=[u], kwargs={"crawl_id": tag}) for u in urls),
          app.signature("receiver.done", kwargs={"tag": tag}, queue="crawl.callbacks")).apply_async()
    receiver.wait(lambda: receiver.done(tag))
    [summaries] = receiver.done(tag)
    assert sorted(s["url"] for s in summaries) == sorted(urls)
    assert all(s["status"] == 200 and s["written"] for s in summaries)
    time.sleep(0.5)
    assert len(receiver.done(tag)) == 1
