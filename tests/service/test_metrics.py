"""``crawler-tasks metrics``: the Prometheus exporter, scraped over HTTP after a real crawl and
parsed with prometheus-client's own parser; its figures are what ``crawler-tasks stats`` says."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import token


@pytest.fixture
def exporter(settings) -> Iterator[str]:
    with serving(settings) as url:
        yield url


@contextlib.contextmanager
def serving(settings) -> Iterator[str]:
    """``crawler-tasks metrics`` running with ``settings``; its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, **settings.to_env()}
    proc = subprocess.Popen([sys.executable, "-m", "crawler_tasks.cli.main", "metrics", "--port", str(port)],
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith(f"serving Prometheus metrics on http://127.0.0.1:{port}/metrics")
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        proc.terminate()
        proc.wait(10)


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def stats_json(settings, crawl_id: str) -> dict:
    env = {**os.environ, **settings.to_env()}
    done = subprocess.run([sys.executable, "-m", "crawler_tasks.cli.main", "stats", "--json", "--crawl-id", crawl_id],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_exporter_shows_what_stats_shows(crawl, site, settings, exporter, rt):
    t = token()
    crawl([f"{site.url}/tree/{t}/0?size=12", f"{site.url}/broken/{t}", f"{site.url}/redirect/{t}/1"],
          meta={"max_retry_times": 0})
    crawl_id = crawl.crawl_id  # type: ignore[attr-defined]
    report = stats_json(settings, crawl_id)
    mine = report["crawls"][crawl_id]
    got = scrape(exporter)

    def value(name: str, **labels: str) -> float:
        return got[(name, tuple(sorted({"crawl": crawl_id, **labels}.items())))]

    twos = sum(n for k, n in mine.items() if k.startswith("status/2"))
    assert value("crawler_pages_total", status_class="2xx") == twos == 13
    assert value("crawler_pages_total", status_class="3xx") == sum(
        n for k, n in mine.items() if k.startswith("status/3")) == 1
    assert value("crawler_pages_total", status_class="5xx") == mine["status/500"] == 1
    assert value("crawler_stored_total") == mine["stored"] == 15
    assert value("crawler_redirects_total") == mine["redirects"] == 1
    assert value("crawler_failures_total", reason="http_500") == mine["retry/max_reached/http_500"] == 1
    assert value("crawler_bytes_total", direction="in") == mine["total_response_size"]
    assert value("crawler_bytes_total", direction="out") == mine["total_request_size"]
    assert value("crawler_outstanding") == mine["in_flight"] == 0
    assert value("crawler_crawl_state", state="finished") == 1
    assert value("crawler_crawl_state", state="running") == value("crawler_crawl_state", state="paused") == 0
    assert value("crawler_waiting") == mine["waiting"] == 0 and value("crawler_held") == mine["held"] == 0
    assert got[("crawler_up", ())] == 1
    assert value("crawler_gate_items") == mine["gate"]["items"] == 15
    assert value("crawler_gate_bytes") == mine["gate"]["bytes"]
    # Every crawl's, and other tests' crawls may have left some in this database.
    assert got[("crawler_dead_letters", ())] == rt.dead_letters.count()
    bands = {dict(labels)["band"] for (name, labels) in got if name == "crawler_queue_depth"}
    assert bands == {str(b) for b in range(10)}
    assert got[("crawler_scrape_seconds", ())] < 5


def test_a_cancelled_crawl_is_cancelling_while_a_task_of_it_runs_then_cancelled(exporter, rt):
    crawl_id, running = f"cx{token()}", f"task-{token()}"
    rt.crawls.register(crawl_id, domains=["a.test"])
    rt.crawls.client.sadd(rt.keys.outstanding(crawl_id), running)  # a fetch still downloading
    from crawler_tasks.service import control

    def state() -> dict[str, float]:
        got = scrape(exporter)
        return {name: got[("crawler_crawl_state", (("crawl", crawl_id), ("state", name)))]
                for name in control.CRAWL_STATES}

    assert state()["running"] == 1
    control.cancel(crawl_id, rt)
    assert state() == {"running": 0, "paused": 0, "cancelling": 1, "cancelled": 0, "finished": 0}
    rt.crawls.client.srem(rt.keys.outstanding(crawl_id), running)  # it came up and was dropped
    assert state() == {"running": 0, "paused": 0, "cancelling": 0, "cancelled": 1, "finished": 0}
    control.purge(crawl_id, rt)


def test_a_port_in_use_is_one_line_and_exit_2(settings):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        env = {**os.environ, **settings.to_env()}
        done = subprocess.run([sys.executable, "-m", "crawler_tasks.cli.main", "metrics", "--port", str(port)],
                              env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"crawler-tasks: error: cannot listen on 127.0.0.1:{port}: Address already in use"]
