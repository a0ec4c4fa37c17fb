"""A crawl's gate over several shards: each URL admitted once, a redelivery answered the same,
the page budget exact under racing workers (:mod:`crawler_tasks.state.gate_parts`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest
import redis

from crawler_tasks.core.shards import shard_of, task_shard
from crawler_tasks.state.crawls import Crawls
from crawler_tasks.state.gate import Admission, Candidate, Fate, Gate, Settlement, Verdict
from crawler_tasks.state.keys import Keys
from crawler_tasks.state.seen import make_filter
from crawler_tasks.state.stats import Stats
from tests.helpers import REDIS, token

DB = 12
SHARDS = 4


@dataclass(frozen=True)
class Link:
    fingerprint: str
    dont_filter: bool = False


def gate(dedup: str = "set", prefix: str = "") -> Gate:
    from crawler_tasks.core.settings import Settings

    keys = Keys(prefix or f"gp{token()}", gate_shards=SHARDS)
    client = redis.Redis.from_url(f"{REDIS}/{DB}")
    seen = make_filter(Settings(dedup=dedup, bloom_capacity=1000), keys)
    return Gate(client, keys, replay_ttl=60, seen=seen)


def stats(g: Gate) -> dict[str, int]:
    return Stats(g.client, g.keys).read("c")


def outstanding(g: Gate) -> set[str]:
    return {m.decode() for k in range(SHARDS) for m in g.client.smembers(g.keys.outstanding("c", k))}


def start(g: Gate, fingerprint: str) -> str:
    """A task admitted as a seed: its id, made in its URL's shard."""
    [candidate] = g.candidates([Link(fingerprint)])
    assert g.admit("c", [candidate]) == [candidate.task_id]
    return candidate.task_id


@pytest.mark.parametrize("dedup", ["set", "bloom"])
def test_links_are_admitted_once_each_in_the_shard_of_their_url(dedup):
    g = gate(dedup)
    links = [Link(f"{i:040x}") for i in range(200)]
    first = g.candidates(links)
    assert all(task_shard(c.task_id, SHARDS) == shard_of(c.fingerprint, SHARDS) for c in first)
    assert g.admit("c", first) == [c.task_id for c in first]
    again = g.candidates([*links[:50], Link("new" * 13 + "x")])
    assert g.admit("c", again)[:50] == [None] * 50
    assert len(outstanding(g)) == 201
    assert g.info("c").items == 201
    assert stats(g) == {"gate/admitted": 201, "duplicates": 50}
    per_shard = [g.client.scard(g.keys.outstanding("c", k)) for k in range(SHARDS)]
    assert all(n > 30 for n in per_shard)  # spread, not on one key


def test_a_redelivered_completion_gets_the_same_children_and_counts_once():
    g = gate()
    parent = start(g, "p" * 40)
    children = [Link(f"{i:040x}") for i in range(40)]
    first = g.complete("c", g.candidates(children), task_id=parent, counts={"stored": 1})
    again = g.complete("c", g.candidates(children), task_id=parent, counts={"stored": 1})
    assert (first.verdict, again.verdict) == (Verdict.OK, Verdict.REPLAY)
    assert first.task_ids == again.task_ids and None not in first.task_ids
    assert stats(g) == {"gate/admitted": 41, "stored": 1}
    g.finish("c", parent, shards=first.shards)
    assert outstanding(g) == set(first.task_ids)
    late = g.complete("c", g.candidates([Link("z" * 40)]), task_id=parent, counts={"stored": 1})
    assert late.verdict is Verdict.STALE
    assert stats(g)["stored"] == 1 and len(outstanding(g)) == 40
    left = [k.decode() for k in g.client.scan_iter(match=f"{g.keys.prefix}:*part:*")]
    assert left == []  # the finish cleared every shard's record of the completion


def test_a_worker_killed_after_the_first_step_loses_no_child():
    g = gate()
    parent = start(g, "p" * 40)
    children = [Link(f"{i:040x}") for i in range(20)]
    assert g._parts is not None and g._parts.begin("c", parent, [("stored", 1)]) == "ok"  # then it died
    done = g.complete("c", g.candidates(children), task_id=parent, counts={"stored": 1})
    assert done.verdict is Verdict.REPLAY and None not in done.task_ids
    assert stats(g) == {"gate/admitted": 21, "stored": 1}


def test_the_page_budget_is_exact_and_a_redelivery_takes_the_same_share():
    g = gate()
    first = g.admit("c", g.candidates([Link(f"a{i:039x}") for i in range(3)]), max_pages=10)
    assert None not in first
    parent = first[0]
    assert parent is not None
    links = [Link(f"b{i:039x}") for i in range(12)]
    done = g.complete("c", g.candidates(links), task_id=parent, max_pages=10)
    again = g.complete("c", g.candidates(links), task_id=parent, max_pages=10)
    assert done.task_ids == again.task_ids
    assert done.admissions == [Admission.ADMITTED] * 7 + [Admission.OVER_BUDGET] * 5
    assert stats(g) == {"gate/admitted": 10, "gate/over_budget": 5}
    assert len(outstanding(g)) == 10  # the refused ones left the outstanding sets again


def test_the_budget_holds_across_shards_under_two_racing_workers():
    prefix, budget = f"gr{token()}", 137
    gates = [gate(prefix=prefix), gate(prefix=prefix)]  # two workers: clients of their own
    seeds = gates[0].candidates([Link(f"s{i:039x}") for i in range(2)])
    assert None not in gates[0].admit("c", seeds, max_pages=budget)
    parents = [[gates[0].candidates([Link(f"t{w}{i:038x}")])[0].task_id for i in range(60)] for w in range(2)]
    for ids in parents:  # each worker's pages are outstanding, as if delivered
        for task_id in ids:
            gates[0].client.sadd(gates[0].keys.outstanding("c", gates[0].keys.task_shard(task_id)), task_id)
    admitted: list[list[str]] = [[], []]
    barrier = threading.Barrier(2)

    def work(w: int) -> None:
        g = gates[w]
        barrier.wait()
        for n, parent in enumerate(parents[w]):
            # pages of both workers link overlapping URLs: racing on the same fingerprints
            links = [Link(f"u{(n * 3 + j) % 250:039x}") for j in range(5)]
            done = g.complete("c", g.candidates(links), task_id=parent, max_pages=budget)
            admitted[w] += [t for t in done.task_ids if t]
            g.finish("c", parent, shards=done.shards)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    every = admitted[0] + admitted[1]
    assert len(every) + 2 == budget  # exactly the budget, the seeds included
    assert stats(gates[0])["gate/admitted"] == budget
    assert len(set(every)) == len(every)
    crawls = Crawls(gates[0].client, gates[0].keys, cache_seconds=1)
    assert crawls.outstanding("c") == budget  # the admitted links, and the two seeds (never run)


def test_an_abandoned_task_releases_children_in_every_shard_once():
    g = gate()
    parent = start(g, "p" * 40)
    done = g.complete("c", g.candidates([Link(f"{i:040x}") for i in range(12)]), task_id=parent)
    published, unpublished = done.task_ids[:4], [t for t in done.task_ids[4:] if t]
    assert g.abandon("c", parent, "KeyError: boom (http://x/)", {"errors": 1}, children=unpublished)
    assert not g.abandon("c", parent, "again", {"errors": 1}, children=published)
    assert outstanding(g) == set(published)
    assert stats(g)["gate/released"] == 8 and stats(g)["errors"] == 1
    assert Crawls(g.client, g.keys, cache_seconds=1).errors("c") == ["KeyError: boom (http://x/)"]


def test_tokens_settle_in_their_shards_once():
    g = gate()
    tokens = [f"r{i}.write" for i in range(8)]
    g.admit("c", [Candidate(f"stage:{t}", t, dont_filter=True, stage=True) for t in tokens])
    assert len({task_shard(t, SHARDS) for t in tokens}) > 1
    first = g.settle("c", [Settlement(t, Fate.END, {"stored": 1}) for t in tokens])
    again = g.settle("c", [Settlement(t, Fate.END, {"stored": 1}) for t in tokens])
    assert first == [True] * 8 and again == [False] * 8
    assert stats(g)["stored"] == 8 and outstanding(g) == set()


def test_a_task_id_given_from_outside_is_gated_in_its_url_s_shard():
    g = gate()
    fp = "f" * 40
    outside = next(f"x{i}" for i in range(100) if task_shard(f"x{i}", SHARDS) != shard_of(fp, SHARDS))
    assert g.admit("c", [Candidate(fp, outside)]) == [outside]
    assert g.admit("c", g.candidates([Link(fp)])) == [None]  # a link to the same URL: seen
    assert g.pending("c", [outside]) == [True]


def test_a_process_with_other_shard_counts_than_its_redis_s_keys_is_refused():
    from crawler_tasks.core.errors import SettingsError
    from crawler_tasks.state.crawls import check_layout

    client, prefix = redis.Redis.from_url(f"{REDIS}/{DB}"), f"ly{token()}"
    check_layout(client, Keys(prefix))  # nothing noted yet: nothing to differ from, nothing written
    assert not client.exists(f"{prefix}:layout")
    check_layout(client, Keys(prefix, gate_shards=4), note=True)  # a worker notes its counts
    check_layout(client, Keys(prefix, gate_shards=4))
    with pytest.raises(SettingsError, match="CRAWLER_GATE_SHARDS=1, but the keys on this Redis are laid out for 4"):
        check_layout(client, Keys(prefix))
    with pytest.raises(SettingsError, match="CRAWLER_HOST_SHARDS=16"):
        check_layout(client, Keys(prefix, host_shards=16, gate_shards=4))
    with pytest.raises(SettingsError, match="CRAWLER_STORE_SHARDS=2, but the keys on this Redis are laid out for 1"):
        check_layout(client, Keys(prefix, gate_shards=4, store_shards=2))
    client.delete(f"{prefix}:layout")
