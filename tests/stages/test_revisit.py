"""The forum scenario: a crawl with revisits rescans its list page on every Beat tick,
finds the new posts, confirms unchanged posts cheaply (a 304, or the same text) without
writing them again, and stores changed ones marked ``changed``; with the crawler's
defaults (robots.txt obeyed, the default host concurrency; the delay shortened)."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.core import counters
from crawler_tasks.core.settings import Settings
from crawler_tasks.core.urls import fingerprint
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.service.control import list_crawls
from crawler_tasks.stages import revisit
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import submit_to
from tests.fakes.forum_site import ForumSite
from tests.helpers import REDIS, flush, token

REVISIT_DB = int(os.environ.get("CRAWLER_REVISIT_TEST_DB", "11"))
DEFAULTS = Settings()


@pytest.fixture(scope="module")
def forum(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Runtime, Workers, ForumSite, Path]]:
    flush(REVISIT_DB)
    store = tmp_path_factory.mktemp("forum") / "pages.db"
    s = settings.replace(broker_url=f"{REDIS}/{REVISIT_DB}", redis_url=f"{REDIS}/{REVISIT_DB}",
                         key_prefix=f"rv{token()}", store=str(store), revisit_min_s=1.0, revisit_tick_s=1.0,
                         robotstxt_obey=True, host_concurrency=DEFAULTS.host_concurrency, download_delay=0.05,
                         near_duplicates="mark")
    site = ForumSite()
    workers = Workers(s, concurrency=2, name="revisit@%h",
                      log_path=str(tmp_path_factory.mktemp("forum-log") / "worker.log")).start()
    rt = Runtime(s, create_app(s))
    yield rt, workers, site, store
    workers.stop()
    rt.close()
    site.stop()
    flush(REVISIT_DB)


def change_events(rt: Runtime, task: str) -> list[dict]:
    """The payloads of the ``task`` callbacks waiting on ``crawl.callbacks`` (no worker here
    serves that queue: the calling app's would), oldest first."""
    events = []
    for key in rt.redis.scan_iter("crawl.callbacks*"):
        if rt.redis.type(key) != b"list":
            continue
        for raw in rt.redis.lrange(key, 0, -1):
            message = json.loads(raw)
            if not isinstance(message, dict):  # the queue's wake tokens
                continue
            body = message["body"]
            if message.get("properties", {}).get("body_encoding") == "base64":
                body = base64.b64decode(body)
            if message["headers"]["task"] == task:
                events.append(json.loads(body)[0][0])
    return events[::-1]


def test_the_forum_over_several_ticks(forum):
    rt, workers, site, store = forum
    crawl = "forum-" + token()
    site.publish(1, "The new firmware bricked my router. It blinks red after a reset.")
    site.publish(2, "Which laptop should I buy for travel? Light and a long battery.")
    # A long post, and a repost of it with two words changed: a near-duplicate.
    words = [f"{a}{b}{c}" for a in ("quiet", "brisk", "amber", "hollow", "silver", "rapid", "gentle", "narrow")
             for b in ("river", "stone", "lantern", "meadow", "harbor", "signal", "orchard", "valley")
             for c in ("ing", "ed", "ly", "er", "ness")]
    long_post = " ".join(words[(i * 7) % len(words)] for i in range(600))
    site.publish(4, long_post)
    site.publish(5, long_post.replace("quietriver", "loudriver", 1))

    def drained() -> None:
        wait_drained(lambda: rt.crawls.outstanding(crawl) == 0, timeout=30, workers=workers)

    def tick() -> int:
        """Wait until something is due, then what Beat's ``crawl.revisit`` does."""
        deadline = time.monotonic() + 10
        while rt.revisits.outlook(crawl, time.time()).due == 0:
            assert time.monotonic() < deadline, "nothing came due"
            time.sleep(0.1)
        sent = revisit.send_due(rt).get(crawl, 0)
        drained()
        return sent

    def record(path: str):
        return open_store(str(store)).get(fingerprint(site.url + path), crawl)

    lst = site.url + "/list/1"
    on_change = f"forum.changed.{token()}"
    assert submit_to(rt, [{"url": lst, "meta": {"revisit_every": 1}}], crawl_id=crawl, revisit=1.0,
                     on_change=on_change) == 1
    drained()
    first = {p: record(p) for p in ("/list/1", "/post/1", "/post/2")}
    assert all(r is not None and r.changed is None and r.signature for r in first.values())
    assert site.fetched("/admin/") == []  # robots.txt disallows it
    assert list_crawls(rt, [crawl])[0]["revisits"]["scheduled"] == 5
    four, five = record("/post/4"), record("/post/5")
    assert {four.near_duplicate_of, five.near_duplicate_of} == {None, four.fingerprint if five.near_duplicate_of
                                                               else five.fingerprint}
    assert rt.stats.read(crawl)[counters.NEAR_DUPLICATE] == 1  # the short posts are not compared

    # A new post and an edited one; the list and every post come due.
    site.publish(3, "Show us your home lab: racks, cables and a noisy fan.")
    site.edit(2, "Which laptop should I buy for travel? Edit: bought the light one, thanks.")
    while rt.revisits.outlook(crawl, time.time()).due < 5:
        time.sleep(0.1)
    assert tick() >= 5
    stats = rt.stats.read(crawl)
    post2, post1 = record("/post/2"), record("/post/1")
    assert record("/post/3") is not None and record("/post/3").changed is None  # found by the rescan
    assert post2.changed is True and "Edit: bought" in post2.text
    assert post2.previous_fetched_at == first["/post/2"].fetched_at and post2.changed_at == post2.fetched_at
    assert site.fetched("/post/1") == [200, 304]  # confirmed by its ETag, not written again
    assert post1.fetched_at == first["/post/1"].fetched_at and post1.changed is None
    assert stats[counters.REVISIT_CHANGED] == 2  # the list (a new post) and post 2
    assert stats[counters.REVISIT_NOT_MODIFIED] == 2  # posts 1 and 5, by their ETags
    changes = change_events(rt, on_change)  # one event per change, once its record is stored
    assert sorted(e["url"] for e in changes) == [lst, site.url + "/post/2"]
    assert {e["crawl_id"] for e in changes} == {crawl} and all(e["signature"] for e in changes)

    # Nothing changes but the view counts and clocks: whatever comes due is found unchanged.
    deadline = time.monotonic() + 20
    while len(site.fetched("/list/1")) < 4:  # the list, pinned to a second, twice more at least
        assert time.monotonic() < deadline, "the list was not rescanned"
        tick()
    stats = rt.stats.read(crawl)
    assert stats[counters.REVISIT_CHANGED] == 2
    assert stats.get(counters.REVISIT_UNCHANGED, 0) >= 1  # the list at least (pinned to a second)
    assert record("/list/1").fetched_at == record("/list/1").changed_at  # last written when it changed
    assert len(change_events(rt, on_change)) == 2  # nothing changed: no event

    # An edit behind an ETag: a 200 instead of a 304, a change and its event.
    site.edit(1, "The new firmware bricked my router. Fixed: a second reset and it boots.")
    deadline = time.monotonic() + 20
    while record("/post/1").changed is not True:
        assert time.monotonic() < deadline, "the edit of post 1 was never found"
        tick()
    assert "Fixed: a second reset" in record("/post/1").text
    assert [e["url"] for e in change_events(rt, on_change)].count(site.url + "/post/1") == 1

    # A cancelled crawl's schedule goes with it at the next tick.
    rt.crawls.set_control(crawl, "cancelled")
    revisit.send_due(rt)
    assert crawl not in rt.revisits.crawls()
