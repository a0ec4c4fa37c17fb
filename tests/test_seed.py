"""Seeds from the Redis start-URL list: good items crawled, hostile ones refused with a reason."""

from __future__ import annotations

import json
import random

import pytest

from crawler_tasks import routing
from crawler_tasks.local import wait_drained
from crawler_tasks.seed import feed

from .conftest import token
from .test_tasks import _junk


def test_the_start_url_list_feeds_good_items_and_refuses_fuzzed_ones(rt, worker, site, tmp_path):
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

    enqueued, rejected = feed(rt, batch=1000)
    assert enqueued == 3 and rejected == len(items) - 3 + 1
    assert rt.redis.llen(key) == 0
    reasons = [json.loads(r) for r in rt.redis.lrange(f"{key}:rejected", 0, -1)]
    assert len(reasons) == rejected and all(r["error"] and "\n" not in r["error"] for r in reasons)

    # The good seeds are crawled: the plain URL in the default crawl, the objects in theirs.
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=30, workers=worker)
    assert rt.stats.read(crawl_id)["stored"] == 2
    assert feed(rt) == (0, 0)  # an empty list feeds nothing


def test_beat_s_feed_task_runs_on_the_worker(rt, worker, site):
    key = rt.settings.start_urls_key
    crawl_id, t = f"feedtask{token()}", token()
    rt.redis.rpush(key, json.dumps({"url": f"{site.url}/page/{t}", "crawl_id": crawl_id}))
    rt.app.send_task(routing.FEED_TASK, **routing.ROUTES[routing.FEED_TASK])
    wait_drained(lambda: rt.stats.read(crawl_id).get("stored") == 1, timeout=30, workers=worker)
    assert rt.redis.llen(key) == 0


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
    accepted, rejected = feed(rt, batch=4)
    assert accepted + rejected == 4  # one batch
    if kind == "zset":
        assert (accepted, rejected) == (4, 0)  # lowest scores first: the bad entry scores 9
    while rt.redis.exists(key):
        feed(rt, batch=4)
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=30, workers=worker)
    assert rt.stats.read(crawl_id)["stored"] == 5
    assert rt.redis.llen(f"{key}:rejected") == 1

