"""Figures summed from a crawl's counters: what the exporter and ``top`` show."""

from __future__ import annotations

from crawler_tasks.core import figures

STATS = {"stored": 9, "status/200": 5, "status/204": 1, "status/301": 2, "status/503": 1, "failures": 4,
         "retry/max_reached/timeout": 2, "retry/max_reached/http_503": 1, "store/failed": 1,
         "store/refused": 2, "retry/reason_count/timeout": 6}


def test_responses_are_summed_by_status_class():
    assert figures.status_classes(STATS) == {"2xx": 6, "3xx": 2, "5xx": 1}
    assert figures.status_classes({}) == {}


def test_failures_by_the_reason_of_their_last_attempt_and_the_rest_as_other():
    assert figures.failure_reasons(STATS) == {"http_503": 1, "other": 1, "timeout": 2}
    assert figures.failure_reasons({"failures": 2, "retry/max_reached/dns": 2}) == {"dns": 2}


def test_store_errors_are_the_refused_and_the_given_up():
    assert figures.store_errors(STATS) == 3
