"""The near-duplicate index in a real Redis: the nearest stored page within the distance,
never the page itself, in buckets of bounded size."""

from __future__ import annotations

import hashlib

from crawler_tasks.state import near_dups
from tests.helpers import token


def fp(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()


def test_the_nearest_other_page_within_the_distance(rt):
    crawl = "nd-" + token()
    base = 0x0123_4567_89AB_CDEF
    assert rt.near_dups.look_and_add(crawl, fp("a"), base, 3) is None  # the first page: nothing yet
    assert rt.near_dups.look_and_add(crawl, fp("a"), base, 3) is None  # itself again (a revisit)
    far = rt.near_dups.look_and_add(crawl, fp("b"), base ^ 0b1111, 3)  # four bits away
    assert far is None
    near = rt.near_dups.look_and_add(crawl, fp("c"), base ^ 0b11 << 40, 3)
    assert near == near_dups.Match(fp("a"), 2)
    assert rt.near_dups.look_and_add("other-" + token(), fp("d"), base, 3) is None  # per crawl


def test_a_bucket_keeps_its_newest_entries(rt, monkeypatch):
    crawl = "nd-" + token()
    monkeypatch.setattr(near_dups, "BUCKET_CAP", 3)
    for i in range(5):
        rt.near_dups.look_and_add(crawl, fp(str(i)), 42 + (i << 60), 3)
    stored = rt.redis.hget(rt.keys.near_dups(crawl, 0), 42)
    assert len(stored) == 3 * near_dups.ENTRY
    assert stored[-near_dups.ENTRY + 8:] == bytes.fromhex(fp("4"))
