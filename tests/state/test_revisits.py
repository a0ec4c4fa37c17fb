"""The revisit schedule in a real Redis: due pages taken once, leased, and dropped with their crawl."""

from __future__ import annotations

import time

from crawler_tasks.core.revisit import Slot
from tests.helpers import token


def test_due_pages_are_taken_once_and_come_back_after_their_lease(rt):
    crawl = "rv-" + token()
    now = time.time()
    rt.revisits.schedule(crawl, "http://a.test/1", Slot(now - 5, 600.0, False, 2))
    rt.revisits.schedule(crawl, "http://a.test/2", Slot(now - 1, 60.0, True, 0))
    rt.revisits.schedule(crawl, "http://a.test/3", Slot(now + 3600, 60.0))
    assert crawl in rt.revisits.crawls()
    outlook = rt.revisits.outlook(crawl, now)
    assert (outlook.scheduled, outlook.due) == (3, 2) and outlook.next_due == int(now - 5)
    taken = dict(rt.revisits.take_due(crawl, batch=10, lease_s=1.0))
    assert set(taken) == {"http://a.test/1", "http://a.test/2"}
    assert taken["http://a.test/1"].depth == 2 and taken["http://a.test/2"].pinned
    assert abs(taken["http://a.test/1"].interval - 600) < 7
    assert rt.revisits.take_due(crawl, batch=10, lease_s=1.0) == []  # leased: not sent twice
    time.sleep(2.1)
    again = dict(rt.revisits.take_due(crawl, batch=1, lease_s=60.0))
    assert len(again) == 1 and set(again) <= set(taken)  # a lost revisit goes again, in batches
    kept = again.popitem()[1]
    assert kept.depth in (0, 2) and kept.interval in (taken["http://a.test/1"].interval,
                                                       taken["http://a.test/2"].interval)


def test_a_dropped_schedule_is_gone(rt):
    crawl = "rv-" + token()
    rt.revisits.schedule(crawl, "http://a.test/1", Slot(time.time(), 60.0))
    rt.revisits.drop(crawl)
    assert crawl not in rt.revisits.crawls() and rt.revisits.outlook(crawl, time.time()).scheduled == 0


def test_a_purged_crawl_takes_its_schedule_with_it(rt):
    crawl = "rv-" + token()
    rt.crawls.register(crawl, domains=["a.test"], revisit=60.0)
    rt.revisits.schedule(crawl, "http://a.test/1", Slot(time.time(), 60.0))
    assert rt.crawls.purge(crawl) >= 2
    assert crawl not in rt.revisits.crawls() and rt.revisits.outlook(crawl, time.time()).scheduled == 0
