"""A page's end: the links a worker knows the gate answered for lately are counted as
duplicates without being offered again, and a replay of the page offers them all again."""

from __future__ import annotations

import pytest

from crawler_tasks.core import counters
from crawler_tasks.core.models import CrawlRequest, PageRecord
from crawler_tasks.stages import enqueue
from crawler_tasks.stages.parse.page import parse_page
from crawler_tasks.state.gate import Candidate
from tests.helpers import token

BASE = "http://127.0.0.1:9"  # never fetched: what is published is watched on its way out
BODY = (f'<html><body><a href="{BASE}/a">a</a> <a href="/b">b</a> <a href="/c">c</a>'
        f'<a href="https://elsewhere.example/x">x</a></body></html>').encode()


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs of the children a task's end publishes (the functions called through)."""
    urls: list[str] = []
    joined, alone = enqueue._queue_children, enqueue._send_children

    def queue(rt, pipe, children):
        urls.extend(c.url for c, _ in children)
        return joined(rt, pipe, children)

    def send(rt, req, task_id, children):
        urls.extend(c.url for c, _ in children)
        return alone(rt, req, task_id, children)

    monkeypatch.setattr(enqueue, "_queue_children", queue)
    monkeypatch.setattr(enqueue, "_send_children", send)
    return urls


def _page(rt, crawl: str) -> tuple[CrawlRequest, str, PageRecord]:
    """A page of ``crawl`` whose task is outstanding, and its record."""
    req = CrawlRequest(url=f"{BASE}/", crawl_id=crawl)
    task_id = "t-" + token()
    assert rt.gate.complete(crawl, [Candidate(req.fingerprint, task_id)]).task_ids == [task_id]
    record = PageRecord(url=req.url, fingerprint=req.fingerprint, crawl_id=crawl, depth=0,
                        fetched_at="2026-01-01T00:00:00Z", status=200,
                        headers={"content-type": "text/html"}, content_type="text/html")
    return req, task_id, record


def test_known_links_are_counted_as_duplicates_and_not_offered(rt, published):
    crawl = "known-" + token()
    req, task_id, record = _page(rt, crawl)
    rt.known_links.add(crawl, [f"{BASE}/a", f"{BASE}/b"])
    end = parse_page(rt, req, record, BODY, rt.limits(crawl))
    assert [c.url for c in end.children] == [f"{BASE}/c"]
    assert end.counts[counters.DUPLICATES] == 2
    assert enqueue.complete(rt, req, task_id, end)
    assert published == [f"{BASE}/c"]
    assert f"{BASE}/c" in rt.known_links.known(crawl)  # answered for now
    assert rt.stats.read(crawl)[counters.DUPLICATES] == 2


def test_a_replay_offers_the_known_links_again_under_their_first_task_ids(rt, published):
    crawl = "known-" + token()
    req, task_id, record = _page(rt, crawl)
    # An earlier run of the page gated its three links, then died before publishing them.
    first = [CrawlRequest(url=f"{BASE}/{p}", crawl_id=crawl) for p in "abc"]
    ids = [f"{task_id}-{p}" for p in "abc"]
    gated = rt.gate.complete(crawl, [Candidate(r.fingerprint, i) for r, i in zip(first, ids)], task_id=task_id)
    assert gated.task_ids == ids
    rt.known_links.add(crawl, [f"{BASE}/a", f"{BASE}/b"])  # another page found them seen meanwhile
    end = parse_page(rt, req, record, BODY, rt.limits(crawl))
    assert [c.url for c in end.children] == [f"{BASE}/c"]
    assert enqueue.complete(rt, req, task_id, end)
    assert sorted(published) == [f"{BASE}/a", f"{BASE}/b", f"{BASE}/c"]
    assert rt.redis.smembers(rt.keys.outstanding(crawl)) == {i.encode() for i in ids}
