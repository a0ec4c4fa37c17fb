"""The links a worker remembers the gate answered for: per crawl, for a while, bounded."""

from __future__ import annotations

from crawler_tasks.core.known_links import KnownLinks
from crawler_tasks.core.settings import Settings


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_known_for_its_crawl_until_the_window_ends():
    clock = Clock()
    known = KnownLinks(5.0, 100, clock)
    known.add("a", ["http://x/1", "http://x/2"])
    assert "http://x/1" in known.known("a")
    assert "http://x/1" not in known.known("b")
    clock.now += 4.9
    known.add("a", ["http://x/3"])  # joins the window: forgotten with it
    assert {"http://x/1", "http://x/3"} <= set(known.known("a"))
    clock.now += 0.1
    assert not known.known("a")
    known.add("a", ["http://x/4"])
    assert set(known.known("a")) == {"http://x/4"}


def test_at_most_max_urls_a_crawl_and_none_with_zero():
    known = KnownLinks(5.0, 2, Clock())
    known.add("a", ["u1", "u1", "u2", "u3"])
    assert set(known.known("a")) == {"u1", "u2"}
    off = KnownLinks(5.0, 0, Clock())
    off.add("a", ["u1"])
    assert not off.known("a")


def test_windows_of_finished_crawls_are_dropped():
    clock = Clock()
    known = KnownLinks(1.0, 10, clock)
    for crawl in ("a", "b", "c"):
        known.add(crawl, ["u"])
    clock.now += 2
    known.add("d", ["u"])
    assert set(known._windows) == {"d"}


def test_the_window_is_no_longer_than_the_recrawl_window():
    assert KnownLinks.of(Settings(crawl_refresh_s=5.0)).ttl == 5.0
    assert KnownLinks.of(Settings(crawl_refresh_s=5.0, recrawl_after=2.0)).ttl == 2.0
    assert KnownLinks.of(Settings(known_links=0)).max_urls == 0
