"""The hosts' waiting rooms on the real Redis, without workers: what waits, in which order,
and how it goes back to the broker, both ways a deployment gets: the mover publishing
(a broker that is not the state Redis) and the scripts handing fetches straight onto their
bands (one Redis for both, the default)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import orjson
import pytest
from kombu.utils import json as kombu_json

from crawler_tasks.broker.lists import redis_list, wake_list
from crawler_tasks.broker.messages import TAG_TAIL, fetch_head, fetch_message
from crawler_tasks.core import routing
from crawler_tasks.core.models import CrawlRequest
from crawler_tasks.core.politeness import LEAD_S, MARGIN_S, Feedback, host_key
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.state.hosts import HostLimiter
from crawler_tasks.state.waiting_room import Handoff, carried, read_entry
from tests.helpers import REDIS, flush
from tests.state.test_hosts import polite_settings

#: A database of its own: the bands' lists have no prefix, and no worker may take these messages.
ROOMS_DB = int(os.environ.get("CRAWLER_ROOMS_TEST_DB", "1"))
HOST = "example.test:80"
BANDS = [redis_list("crawl.fetch", p) for p in range(routing.MAX_BAND + 1)]


def runtime(tmp_path, mode: str, **changes) -> Runtime:
    """A runtime on one Redis for broker and state; ``mover``: its limiter has no handover,
    as with a broker of its own."""
    flush(ROOMS_DB)
    url = f"{REDIS}/{ROOMS_DB}"
    settings = polite_settings(tmp_path, **{"broker_url": url, "redis_url": url, "download_delay": 0,
                                            "host_concurrency": 1, **changes})
    rt = Runtime(settings, create_app(settings))
    assert rt.hosts.handover is not None  # one Redis for both: the scripts hand over
    if mode == "mover":
        rt.hosts = HostLimiter(rt.redis, rt.keys, settings)
    return rt


@pytest.fixture(params=["mover", "handover"])
def room_rt(request, tmp_path) -> Iterator[Runtime]:
    rt = runtime(tmp_path, request.param)
    yield rt
    rt.close()


def sent(rt: Runtime) -> list[dict]:
    """The fetch messages on the broker's bands, highest band first (and taken off)."""
    out = []
    for band in BANDS:
        while (raw := rt.redis.rpop(band)) is not None:
            out.append(kombu_json.loads(raw))
    return out


def went(rt: Runtime) -> list[str]:
    """The task ids that went to the broker since the last look, highest band first: with a
    handover the scripts sent them (the release, or the mover's look here); else the mover
    takes them and publishes them, as its thread does."""
    moved, _ = rt.hosts.take_due()
    if rt.hosts.handover is None:
        rt.hosts.moved([(m.member, m.request.crawl_id) for m in moved])
        return [m.task_id for m in moved]
    assert moved == []  # nothing left for Python to publish
    return [m["headers"]["id"] for m in sent(rt)]


def test_a_waiting_fetch_comes_back_in_its_band_and_highest_band_first(room_rt):
    rt = room_rt
    assert rt.hosts.acquire(HOST, "running").go
    low = CrawlRequest("http://example.test/low", priority=-3)
    high = CrawlRequest("http://example.test/high", priority=2)
    normal = CrawlRequest("http://example.test/normal")
    for tid, req in (("t-low", low), ("t-normal", normal), ("t-high", high)):
        slot = rt.hosts.acquire(HOST, tid)
        assert not slot.go  # one in flight, concurrency 1
        rt.hosts.park(HOST, tid, req, slot.until)
    assert went(rt) == []  # the host is busy: nothing moves
    assert rt.hosts.waiting_by_crawl() == {high.crawl_id: 3}
    rt.hosts.release(HOST, "running", Feedback())
    assert went(rt) == ["t-high"]
    assert rt.hosts.waiting_by_crawl() == {high.crawl_id: 2}
    # The fetch handed over holds a reserved slot: it goes, a newcomer waits behind the others.
    assert not rt.hosts.acquire(HOST, "newcomer").go
    assert rt.hosts.acquire(HOST, "t-high").go
    rt.hosts.release(HOST, "t-high", Feedback())
    assert went(rt) == ["t-normal"]


def test_once_the_waiting_room_is_empty_a_newcomer_goes_straight_away(room_rt):
    rt = room_rt
    rt.hosts.park(HOST, "t-a", CrawlRequest("http://example.test/a"), 0)
    assert not rt.hosts.acquire(HOST, "newcomer").go  # t-a waits: it goes first
    assert went(rt) == ["t-a"]
    assert rt.hosts.acquire(HOST, "t-a").go
    rt.hosts.release(HOST, "t-a", Feedback())
    assert went(rt) == []  # the room is empty
    assert rt.hosts.acquire(HOST, "newcomer").go


@pytest.mark.parametrize("mode", ["mover", "handover"])
def test_a_waiting_fetch_is_handed_over_just_before_its_hosts_time_and_sent_at_that_time(tmp_path, mode):
    rt = runtime(tmp_path, mode, download_delay=1.0, host_concurrency=2)
    try:
        assert rt.hosts.acquire(HOST, "first").go
        rt.hosts.release(HOST, "first", Feedback())
        rt.hosts.park(HOST, "t-a", CrawlRequest("http://example.test/a"), 0)
        nxt = float(rt.redis.hget(rt.keys.host(HOST), "next"))
        taken, wait = rt.hosts.take_due()
        assert taken == [] and 1.0 - LEAD_S - 0.1 < wait <= 1.0 - LEAD_S  # due LEAD_S early
        assert sent(rt) == []
        time.sleep(wait)
        assert went(rt) == ["t-a"]
        slot = rt.hosts.acquire(HOST, "t-a")  # early, with its reserved slot: it goes at nxt
        assert slot.go and 0 < slot.wait <= LEAD_S + MARGIN_S
        assert float(rt.redis.hget(rt.keys.host(HOST), "next")) == pytest.approx(nxt + MARGIN_S + 1.0)
        assert not rt.hosts.acquire(HOST, "newcomer").go  # no reservation: waits its turn
    finally:
        rt.close()


def test_a_mover_killed_before_publishing_loses_nothing(tmp_path, monkeypatch):
    from crawler_tasks.state import hosts
    monkeypatch.setattr(hosts, "MOVE_LEASE_S", 0.3)
    rt = runtime(tmp_path, "mover")
    req = CrawlRequest("http://example.test/a")
    rt.hosts.park(HOST, "t-a", req, 0)
    taken, _ = rt.hosts.take_due()
    assert [m.task_id for m in taken] == ["t-a"]  # ...and the mover dies here
    time.sleep(0.4)
    rt.redis.delete(rt.keys.host_slots(HOST))  # its reservation ran out too
    again, _ = rt.hosts.take_due()
    assert [(m.task_id, m.request) for m in again] == [("t-a", req)]
    assert rt.hosts.waiting_by_crawl() == {req.crawl_id: 1}  # counted once through it all
    rt.hosts.moved([(m.member, m.request.crawl_id) for m in again])
    assert rt.hosts.waiting_by_crawl() == {}
    rt.close()


def test_a_fetch_that_must_wait_again_gives_its_reserved_slot_back(room_rt):
    """E.g. the mover sent it, but its robots.txt is not known yet: parked again, it must not
    keep the slot reserved for it, or the host would stall until the reservation ends."""
    rt = room_rt
    rt.hosts.park(HOST, "t-a", CrawlRequest("http://example.test/a"), 0)
    rt.hosts.park(HOST, "t-b", CrawlRequest("http://example.test/b"), 0)
    assert went(rt) == ["t-a"]  # concurrency 1: one slot reserved
    rt.hosts.park(HOST, "t-a", CrawlRequest("http://example.test/a"), 0)
    assert rt.redis.zcard(rt.keys.host_slots(HOST)) == 0
    assert went(rt) == ["t-b"]


def test_a_parked_fetch_delivered_twice_waits_once(room_rt):
    rt = room_rt
    host = host_key("http://example.test/a")
    req = CrawlRequest("http://example.test/a")
    rt.hosts.park(host, "t-a", req, 0)
    rt.hosts.park(host, "t-a", req, 0)
    assert rt.redis.zcard(rt.keys.host_wait(host)) == 1
    other = CrawlRequest("http://example.test/b", crawl_id="other", meta={"n": 2**70})
    rt.hosts.park(host, "t-b", other, 0)
    assert rt.hosts.waiting_by_crawl() == {req.crawl_id: 1, "other": 1}
    [entry] = [w for w in rt.hosts.waiting_of("other")]
    assert (entry.task_id, CrawlRequest.from_dict(entry.request)) == ("t-b", other)
    assert rt.hosts.unwait([entry]) == [True] and rt.hosts.unwait([entry]) == [False]
    assert rt.hosts.waiting_by_crawl() == {req.crawl_id: 1}


def test_a_handed_over_fetch_is_the_message_celery_would_read_with_a_tag_of_its_own(tmp_path):
    rt = runtime(tmp_path, "handover")
    try:
        req = CrawlRequest("http://example.test/ü?q=1", crawl_id="c1", meta={"k": "tab\there"}, priority=3)
        assert rt.hosts.acquire(HOST, "running").go
        tags = []
        for _ in range(2):  # handed over, delivered, parked again (its robots.txt not known yet)
            rt.hosts.park(HOST, "t-a", req, 0)
            rt.hosts.release(HOST, "running", Feedback())
            [message] = sent(rt)
            tags.append(message["properties"]["delivery_tag"])
            priority = routing.broker_priority(req.priority, redis=True)
            expected = kombu_json.loads(fetch_message(req.to_dict(), "t-a", url=req.url, priority=priority,
                                                      delivery_tag=tags[-1]))
            assert message == expected
            assert rt.redis.lrange(wake_list("crawl.fetch"), 0, -1) == [b"1"]  # a waiting worker wakes
            assert rt.hosts.acquire(HOST, "running").go is False  # t-a's slot is reserved
            assert rt.redis.zscore(rt.keys.host_slots(HOST), "t-a")
            rt.redis.zrem(rt.keys.host_slots(HOST), "t-a")
            assert rt.hosts.acquire(HOST, "running").go
        assert tags[0] != tags[1] and all(t.startswith("t-a.") for t in tags)
        assert rt.hosts.waiting_by_crawl() == {}
        assert not rt.redis.exists(rt.keys.host_wait(HOST))
        assert rt.redis.zscore(rt.keys.hosts_due(0), HOST) is None  # the mover has nothing to look at
    finally:
        rt.close()


def test_a_fetch_parked_by_a_worker_with_no_handover_still_goes_through_the_mover(tmp_path):
    """A worker with a broker of its own parked it (the request only): a worker whose broker is
    this Redis frees the slot, and its mover publishes the fetch."""
    rt = runtime(tmp_path, "handover")
    try:
        plain = HostLimiter(rt.redis, rt.keys, rt.settings)
        req = CrawlRequest("http://example.test/a")
        assert rt.hosts.acquire(HOST, "running").go
        plain.park(HOST, "t-a", req, 0)
        rt.hosts.release(HOST, "running", Feedback())
        assert sent(rt) == []
        moved, _ = rt.hosts.take_due()
        assert [(m.task_id, m.request) for m in moved] == [("t-a", req)]
    finally:
        rt.close()


def _routed(rt: Runtime, fetches: list[tuple[CrawlRequest, str]]) -> None:
    with rt.round_trip(atomic=True) as pipe:  # as a page's last round trip queues them
        rt.hosts.route(pipe, fetches)


def test_a_new_fetch_of_a_busy_host_waits_in_its_room_and_one_of_a_free_host_goes_to_the_broker(tmp_path):
    rt = runtime(tmp_path, "handover", download_delay=5.0)
    try:
        assert rt.hosts.holds
        busy, free = "busy.test:80", "free.test:80"
        assert rt.hosts.acquire(busy, "t-first").go  # its next request may start 5 s from now
        fetches = [(CrawlRequest(url=f"http://{host.split(':')[0]}/{i}", crawl_id="c"), f"t-{host[0]}{i}")
                   for host in (busy, free) for i in range(2)]
        _routed(rt, fetches)
        waiting = [read_entry(m.decode())[0] for m in rt.redis.zrange(rt.keys.host_wait(busy), 0, -1)]
        assert waiting == ["t-b0", "t-b1"]  # in arrival order, no broker message for them
        assert rt.hosts.waiting_by_crawl() == {"c": 2}
        assert rt.redis.zscore(rt.keys.hosts_due(0), busy) is not None  # the mover will look at it
        assert rt.redis.lrange(wake_list("crawl.fetch"), 0, -1) == [b"1"]
        messages = [orjson.loads(m) for m in rt.redis.lrange("crawl.fetch:4", 0, -1)]
        assert sorted(m["headers"]["id"] for m in messages) == ["t-f0", "t-f1"]
        assert len({m["properties"]["delivery_tag"] for m in messages}) == 2
        assert rt.redis.zcard(rt.keys.host_wait(free)) == 0
    finally:
        rt.close()


@pytest.mark.parametrize("meta", [{}, {"big": 2**70, "text": "tab\there \"quoted\" é"}])
def test_a_message_head_and_a_tag_make_the_message_and_its_request_reads_back(meta):
    request = CrawlRequest("http://a.test/p?q=1", crawl_id="c-1", meta=meta, priority=2)
    head = fetch_head(request.to_dict(), "t-1", url=request.url, priority=3)
    assert head + b"t-1.42" + TAG_TAIL == fetch_message(request.to_dict(), "t-1", url=request.url, priority=3,
                                                       delivery_tag="t-1.42")
    entry = carried("t-1", "c-1", Handoff("crawl.fetch:3", "crawl.fetch:wake", head))
    task_id, crawl_id, read = read_entry(entry.decode())
    assert (task_id, crawl_id, CrawlRequest.from_dict(read)) == ("t-1", "c-1", request)
