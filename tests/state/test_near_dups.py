"""The near-duplicate index in a real Redis: the nearest stored page within the distance,
never the page itself, in buckets of bounded size."""

from __future__ import annotations

import hashlib

from crawler_tasks.state import near_dups
from tests.helpers import token


def fp(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()


def page(name: str) -> dict[str, str]:
    return {"fingerprint": fp(name), "url": f"http://a.test/{name}", "fetched_at": "2026-01-01T00:00:00+00:00"}


def test_the_nearest_other_page_within_the_distance(rt):
    crawl = "nd-" + token()
    base = 0x0123_4567_89AB_CDEF
    def look(crawl_id: str, name: str, value: int) -> near_dups.Match | None:
        return rt.near_dups.look_and_add(crawl_id, page(name), value, 3).near

    assert look(crawl, "a", base) is None  # the first page: nothing yet
    assert look(crawl, "a", base) is None  # itself again (a revisit)
    assert look(crawl, "b", base ^ 0b1111) is None  # four bits away
    assert look(crawl, "c", base ^ 0b11 << 40) == near_dups.Match(fp("a"), 2)
    assert look("other-" + token(), "d", base) is None  # per crawl


def test_a_bucket_keeps_its_newest_entries(rt, monkeypatch):
    crawl = "nd-" + token()
    monkeypatch.setattr(near_dups, "BUCKET_CAP", 3)
    for i in range(5):
        rt.near_dups.look_and_add(crawl, page(str(i)), 42 + (i << 60), 3)
    stored = rt.redis.hget(rt.keys.near_dups(crawl, 0), 42)
    assert len(stored) == 3 * near_dups.ENTRY
    assert stored[-near_dups.ENTRY + 8:] == bytes.fromhex(fp("4"))


def test_a_body_seen_before_names_the_first_page_with_it(rt):
    crawl = "nd-" + token()
    a = {"fingerprint": fp("a"), "url": "http://a.test/a", "fetched_at": "2026-01-01T00:00:00+00:00"}
    b = {"fingerprint": fp("b"), "url": "http://a.test/b", "fetched_at": "2026-01-01T00:00:01+00:00"}
    assert rt.near_dups.look_and_add(crawl, a, None, 3, digest="sha1:X").same_body is None
    assert rt.near_dups.look_and_add(crawl, a, None, 3, digest="sha1:X").same_body is None  # itself
    assert rt.near_dups.look_and_add(crawl, b, 7, 3, digest="sha1:X").same_body == a
    assert rt.near_dups.look_and_add(crawl, b, 7, 3, digest="sha1:Y").same_body is None
