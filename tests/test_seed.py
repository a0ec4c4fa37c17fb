"""Seeds from the Redis start-URL list: good items crawled, hostile ones refused with a reason."""

from __future__ import annotations

import json
import random

from crawler_tasks import routing
from crawler_tasks.local import wait_drained
from crawler_tasks.seed import feed

from .conftest import token
from .test_tasks import _junk


def test_the_start_url_list_feeds_good_items_and_refuses_fuzzed_ones(rt, worker, site, tmp_path):
    keys = rt.keys
    rt.redis.delete(keys.start_urls(), keys.start_urls_rejected())
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
    rt.redis.rpush(keys.start_urls(), *[i.encode("utf-8", "surrogatepass") for i in items])
    rt.redis.rpush(keys.start_urls(), b"\xff\xfe\x00 raw bytes")

    enqueued, rejected = feed(rt, batch=1000)
    assert enqueued == 3 and rejected == len(items) - 3 + 1
    assert rt.redis.llen(keys.start_urls()) == 0
    reasons = [json.loads(r) for r in rt.redis.lrange(keys.start_urls_rejected(), 0, -1)]
    assert len(reasons) == rejected and all(r["error"] and "\n" not in r["error"] for r in reasons)

    # The good seeds are crawled: the plain URL in the default crawl, the objects in theirs.
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=30, workers=worker)
    assert rt.stats.read(crawl_id)["stored"] == 2
    assert feed(rt) == (0, 0)  # an empty list feeds nothing


def test_beat_s_feed_task_runs_on_the_worker(rt, worker, site):
    keys = rt.keys
    crawl_id, t = f"feedtask{token()}", token()
    rt.redis.rpush(keys.start_urls(), json.dumps({"url": f"{site.url}/page/{t}", "crawl_id": crawl_id}))
    rt.app.send_task(routing.FEED_TASK, **routing.ROUTES[routing.FEED_TASK])
    wait_drained(lambda: rt.stats.read(crawl_id).get("stored") == 1, timeout=30, workers=worker)
    assert rt.redis.llen(keys.start_urls()) == 0
