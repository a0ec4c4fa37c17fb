"""The progress line and the end summary of ``crawler-tasks crawl``, as text (no I/O)."""

from __future__ import annotations

import time

from crawler_tasks.cli.progress import (
    BUDGET,
    CANCELLED,
    DRAINED,
    Progress,
    Rate,
    ending,
    eta_seconds,
    progress_line,
    status_mix,
    summary_rows,
)
from crawler_tasks.core.figures import duration

WHEN = time.mktime((2026, 11, 27, 10, 5, 3, 0, 0, -1))


def test_the_rate_is_over_the_last_seconds_not_since_the_start():
    rate = Rate(window=10)
    assert rate.add(0, 0) == 0
    assert rate.add(5, 50) == rate.add(10, 100) == 10
    assert rate.add(15, 100) == 5
    assert rate.add(20, 100) == 0  # stalled: an average since the start would still say 5


def test_the_line_says_when_which_crawl_the_current_rate_and_where_the_work_is():
    p = Progress("crawl-1", stored=72, failed=1, rate=3.44, fetching=2, waiting=120, outstanding=128, budget=500)
    assert progress_line(p, WHEN) == ("2026-11-27 10:05:03 crawl-1  stored 72/500 · 3.4 pages/s · fetching 2"
                                      " · waiting 120 · outstanding 128 · failed 1 · eta 2m 04s")
    # No budget: the time until the outstanding tasks are done at the pace they shrink.
    frontier = Progress("crawl-1", stored=72, failed=0, rate=2.0, fetching=2, waiting=20, outstanding=30,
                        shrinking=1.5)
    assert progress_line(frontier, WHEN).endswith("stored 72 · 2.0 pages/s · fetching 2 · waiting 20 · "
                                                  "outstanding 30 · failed 0 · eta 20s (frontier)")
    growing = Progress("crawl-1", stored=72, failed=0, rate=2.0, fetching=2, waiting=20, outstanding=30,
                       shrinking=-3.0)  # it finds links faster than it fetches them
    assert progress_line(growing, WHEN).endswith(" · failed 0 · frontier growing")
    still = Progress("crawl-1", stored=0, failed=0, rate=0.0, fetching=0, waiting=5, outstanding=5, budget=10)
    assert "eta" not in progress_line(still, WHEN) and eta_seconds(still) is None


def test_durations_read_as_a_person_writes_them():
    assert [duration(s) for s in (4.4, 65, 3599, 7440)] == ["4s", "1m 05s", "59m 59s", "2h 04m"]


def test_the_summary_says_why_the_crawl_ended_the_statuses_and_how_to_export():
    stats = {"stored": 63, "status/200": 60, "status/404": 2, "status/500": 1, "failures": 1,
             "retry/max_reached/http_500": 1, "gate/over_budget": 4}
    assert status_mix(stats) == "200: 60, 404: 2, 500: 1" and status_mix({}) == "-"
    assert ending(stats, "finished") == BUDGET
    assert ending({"stored": 3}, "finished") == DRAINED == "drained: nothing left to fetch"
    assert ending(stats, "cancelled") == CANCELLED
    rows = dict(summary_rows({"crawl_id": "c", "stats": stats, "elapsed": 10.0, "ended": BUDGET,
                              "store": "pages.db", "log": "logs/c.log", "redis": "redis://127.0.0.1:6379/0",
                              "export": "crawler-tasks export --store pages.db --crawl-id c"}))
    assert rows["ended"] == "page budget reached" and rows["statuses"] == "200: 60, 404: 2, 500: 1"
    assert rows["failure reasons"] == "http_500: 1" and rows["pages/s"] == "6.3"
    assert rows["export"] == "crawler-tasks export --store pages.db --crawl-id c"
