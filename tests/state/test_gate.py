"""The gate: each URL reaches the broker once, even with producers racing."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time

import pytest
import redis

from crawler_tasks.broker.lists import redis_list
from crawler_tasks.cli.local import EmbeddedRedis
from crawler_tasks.core.routing import FETCH_QUEUE, MAX_BAND
from crawler_tasks.state.gate import Candidate, Fate, Gate, Settlement, Verdict
from crawler_tasks.state.keys import Keys
from tests.helpers import REDIS, token

RACE_DB = 12


def gate() -> tuple[Gate, redis.Redis]:
    client = redis.Redis.from_url(f"{REDIS}/{RACE_DB}")
    return Gate(client, Keys(f"g{token()}"), replay_ttl=60), client


def test_second_admission_of_a_fingerprint_is_refused():
    g, _ = gate()
    assert g.admit("c", [Candidate("fp1", "t1")]) == ["t1"]
    assert g.admit("c", [Candidate("fp1", "t2"), Candidate("fp2", "t3")]) == [None, "t3"]


def test_dont_filter_bypasses_the_gate():
    g, _ = gate()
    g.admit("c", [Candidate("fp1", "t1")])
    assert g.admit("c", [Candidate("fp1", "t2", dont_filter=True)]) == ["t2"]


def outstanding(g: Gate, client: redis.Redis, *task_ids: str) -> None:
    client.sadd(g.keys.outstanding("c"), *task_ids)


def test_redelivered_parent_gets_its_children_back_under_the_same_ids_counted_once():
    g, client = gate()
    outstanding(g, client, "p", "q")
    first = g.complete("c", [Candidate("a", "t1"), Candidate("b", "t2")], task_id="p",
                       counts={"stored": 1})
    again = g.complete("c", [Candidate("a", "x1"), Candidate("b", "x2")], task_id="p",
                       counts={"stored": 1})
    other = g.complete("c", [Candidate("a", "y1")], task_id="q")
    assert (first.verdict, again.verdict) == (Verdict.OK, Verdict.REPLAY)
    assert first.task_ids == again.task_ids == ["t1", "t2"] and other.task_ids == [None]
    assert client.hget(g.keys.stats("c"), "stored") == b"1"


def test_settled_tokens_are_counted_once_each_even_twice_in_one_batch():
    g, client = gate()
    outstanding(g, client, "r1", "r2", "r3", "r4")
    first = g.settle("c", [Settlement("r1", Fate.END, {"stored": 1}),
                           Settlement("r2", Fate.KEEP, {"store/retries": 1}),
                           Settlement("r3", Fate.FAILED, {"store/failed": 1}, "r3: the store refused it"),
                           Settlement("r1", Fate.END, {"stored": 1}),  # a second copy
                           Settlement("gone", Fate.END, {"stored": 1})])
    assert first == [True, True, True, False, False]
    again = g.settle("c", [Settlement("r1", Fate.END, {"stored": 1}),
                           Settlement("r2", Fate.END, {"stored": 1}),
                           Settlement("r4", Fate.KEEP, {"store/retries": 1}),
                           Settlement("r4", Fate.END, {"stored": 1})])
    assert again == [False, True, True, True]
    assert client.smembers(g.keys.outstanding("c")) == set()
    stats = {k.decode(): int(v) for k, v in client.hgetall(g.keys.stats("c")).items()}
    assert stats == {"stored": 3, "store/retries": 2, "store/failed": 1}
    assert client.lrange(g.keys.errors("c"), 0, -1) == [b"r3: the store refused it"]


def test_a_finished_task_delivered_again_is_stale_and_changes_nothing():
    g, client = gate()
    outstanding(g, client, "p")
    g.complete("c", [Candidate("a", "t1")], task_id="p", counts={"stored": 1})
    g.finish("c", "p")
    late = g.complete("c", [Candidate("z", "t9")], task_id="p", counts={"stored": 1})
    assert late.verdict is Verdict.STALE
    assert not client.sismember(g.keys.outstanding("c"), "t9")
    assert client.hget(g.keys.stats("c"), "stored") == b"1"
    assert set(client.smembers(g.keys.outstanding("c"))) == {b"t1"}


def test_the_page_budget_admits_exactly_max_pages():
    g, _ = gate()
    first = g.admit("c", [Candidate(f"fp{i}", f"t{i}") for i in range(3)], max_pages=5)
    second = g.admit("c", [Candidate(f"fq{i}", f"u{i}") for i in range(4)], max_pages=5)
    assert first == ["t0", "t1", "t2"] and second == ["u0", "u1", None, None]


def test_an_abandoned_task_is_released_and_counted_once():
    g, client = gate()
    outstanding(g, client, "p")
    assert g.abandon("c", "p", "ValueError: boom (http://x/)", {"errors": 1})
    assert not g.abandon("c", "p", "ValueError: boom (http://x/)", {"errors": 1})
    assert client.hget(g.keys.stats("c"), "errors") == b"1"
    assert client.scard(g.keys.outstanding("c")) == 0


def test_all_links_of_a_page_are_gated_in_one_round_trip():
    private = EmbeddedRedis().start()  # its command counts are this test's alone
    try:
        client = redis.Redis.from_url(private.url)
        g = Gate(client, Keys("g"), replay_ttl=60)
        g.admit("c", [Candidate("warm", "w")])  # loads the script
        before = client.info("commandstats")["cmdstat_evalsha"]["calls"]
        g.admit("c", [Candidate(f"fp{i}", f"t{i}") for i in range(200)])
        after = client.info("commandstats")["cmdstat_evalsha"]["calls"]
        assert after - before == 1
    finally:
        private.stop()


def queued_urls(client: redis.Redis) -> list[str]:
    urls = []
    for prio in range(MAX_BAND + 1):
        for raw in client.lrange(redis_list(FETCH_QUEUE, prio), 0, -1):
            message = json.loads(raw)  # Celery's (base64) or the bands' own (plain JSON)
            body = message["body"]
            is_b64 = message.get("properties", {}).get("body_encoding") == "base64"
            args = json.loads(base64.b64decode(body) if is_b64 else body)[0]
            urls.append(args[0]["url"])
    return urls


SUBMITTER = """
import json, sys, time
from crawler_tasks import submit
urls = json.loads(sys.argv[1])
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
print(submit(urls, crawl_id="race"))
"""


@pytest.mark.parametrize("dedup", ["set", "bloom"])
def test_racing_submitters_publish_each_url_exactly_once(dedup):
    client = redis.Redis.from_url(f"{REDIS}/{RACE_DB}")
    client.flushdb()
    env = {**os.environ, "CRAWLER_BROKER_URL": f"{REDIS}/{RACE_DB}",
           "CRAWLER_REDIS_URL": f"{REDIS}/{RACE_DB}", "CRAWLER_KEY_PREFIX": "race",
           "CRAWLER_DEDUP": dedup, "CRAWLER_BLOOM_CAPACITY": "1000"}
    a = [f"http://127.0.0.1:9/p/{i}" for i in range(0, 600)]
    b = [f"http://127.0.0.1:9/p/{i}" for i in range(300, 900)]
    start = time.time() + 2.0
    procs = [subprocess.Popen([sys.executable, "-c", SUBMITTER, json.dumps(urls), str(start)],
                              env=env, stdout=subprocess.PIPE, text=True) for urls in (a, b)]
    accepted = [int(p.communicate(timeout=60)[0]) for p in procs]
    urls = queued_urls(client)
    assert sorted(urls) == sorted(set(a) | set(b))
    assert sum(accepted) == 900
    client.flushdb()


def test_a_pipeline_stage_is_tracked_but_neither_counted_nor_budgeted():
    g, _ = gate()
    g.admit("c", [Candidate("fp1", "t1")], max_pages=2)
    done = g.complete("c", [Candidate("stage:t1.store", "t1.store", dont_filter=True, stage=True),
                            Candidate("fp2", "t2")], task_id="t1", max_pages=2)
    assert done.task_ids == ["t1.store", "t2"]
    assert g.client.hget(g.keys.stats("c"), "gate/admitted") == b"2"
    assert g.client.sismember(g.keys.outstanding("c"), "t1.store")


def test_a_step_counts_once_and_only_while_its_task_is_outstanding():
    g, _ = gate()
    g.admit("c", [Candidate("fp1", "t1")])
    assert g.count_once("c", "t1", "retry:1", {"retries": 1})
    assert not g.count_once("c", "t1", "retry:1", {"retries": 1})  # a redelivery repeats the step
    assert g.count_once("c", "t1", "retry:2", {"retries": 1})
    g.finish("c", "t1")
    assert not g.count_once("c", "t1", "retry:3", {"retries": 1})  # a late duplicate delivery
    assert g.client.hget(g.keys.stats("c"), "retries") == b"2"


def test_an_abandoned_task_releases_the_children_it_admitted_but_never_published():
    # A task whose completion admitted two children, then failed before publishing the
    # second: without the release, the crawl would wait for that child forever.
    g, client = gate()
    outstanding(g, client, "p")
    g.complete("c", [Candidate("a", "t1"), Candidate("b", "t2")], task_id="p")
    assert g.abandon("c", "p", "KeyError: boom (http://x/)", {"errors": 1}, children=["t2"])
    assert client.smembers(g.keys.outstanding("c")) == {b"t1"}  # the published one still runs
    stats = {k.decode(): int(v) for k, v in client.hgetall(g.keys.stats("c")).items()}
    assert stats["gate/released"] == 1 and stats["errors"] == 1
    assert not g.abandon("c", "p", "again", {"errors": 1}, children=["t1"])  # once only
    assert client.smembers(g.keys.outstanding("c")) == {b"t1"}


def test_an_adopted_fetch_joins_its_crawl_once():
    from crawler_tasks.state.gate import Adoption

    g, client = gate()
    assert g.adopt("c", "x1") is Adoption.ADOPTED
    assert g.adopt("c", "x1") is Adoption.TRACKED  # a redelivery while it is outstanding
    g.finish("c", "x1")
    assert g.adopt("c", "x1") is Adoption.STALE  # a late duplicate after it finished
    assert client.scard(g.keys.outstanding("c")) == 0
    assert client.hget(g.keys.stats("c"), "fetch/direct") == b"1"
