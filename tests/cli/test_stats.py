"""`crawler-tasks stats` as printed: every counter name stands apart from its value."""

from __future__ import annotations

from crawler_tasks.cli.stats import _print_stats


def test_a_long_counter_name_keeps_a_gap_before_its_value(capsys):
    crawl = {"stored": 3, "retry/reason_count/http_5031": 1, "in_flight": 0, "last_errors": [],
             "gate": {"mode": "set", "items": 3, "bytes": 100, "recrawl_after": 0}}
    _print_stats({"queues": {}, "hosts": {"waiting": 0, "busiest": []},
                  "store_queue": {"pending": 0, "delayed": 0, "taken": 0, "writers": 0},
                  "overall": {"stored": 3, "retry/reason_count/http_5031": 1}, "crawls": {"c1": crawl}})
    lines = capsys.readouterr().out.splitlines()
    long = [line.split() for line in lines if "http_5031" in line]
    assert long == [["retry/reason_count/http_5031", "1"]] * 2
    assert ["stored", "3"] in [line.split() for line in lines]
