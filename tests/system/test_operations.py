"""What an operator watches during a real crawl with the defaults on (robots.txt obeyed, two
requests per host, the guard; a long delay so that a backlog waits in the host's waiting
room): every per-crawl metric of the exporter (counters, backlog, held, state) equals ``stats``
and ``crawls`` mid-crawl, and a scrape still answers, ``crawler_up`` 0, with Redis away."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import time
from collections.abc import Iterator

from crawler_tasks.cli.local import free_port
from crawler_tasks.core import figures
from crawler_tasks.service.metrics import SIMPLE
from tests.fakes.polite_site import PoliteSite
from tests.service.test_metrics import scrape
from tests.system.test_programs import CRAWLER_TASKS, env, run


@contextlib.contextmanager
def exporter(**extra: str) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([CRAWLER_TASKS, "metrics", "--port", str(port)], env=env(**extra),
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("serving Prometheus metrics")
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        proc.terminate()
        proc.wait(10)


def crawl_stats(crawl_id: str) -> dict:
    """``stats --json`` of the crawl, with the busiest hosts as ``hosts`` (by name)."""
    done = run("stats", "--json", "--crawl-id", crawl_id)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    return {**report["crawls"][crawl_id], "hosts": {h["host"]: h for h in report["hosts"]["busiest"]}}


def steady(crawl_id: str, url: str, check) -> tuple[dict, dict]:
    """``stats`` and a scrape taken while nothing moved (stats the same before and after)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        before = crawl_stats(crawl_id)
        got = scrape(url)
        if crawl_stats(crawl_id) == before and check(before):
            return before, got
        time.sleep(0.3)
    raise AssertionError(f"no steady moment where {check} held")


def assert_counters_as_stats(got: dict, mine: dict, crawl_id: str) -> None:
    """Each counter family of the crawl in a scrape ``got`` equals its ``stats`` ``mine``."""
    def value(name: str, **labels: str) -> float:
        return got.get((name, tuple(sorted({"crawl": crawl_id, **labels}.items()))), 0)

    for cls in ("2xx", "3xx", "4xx", "5xx"):
        assert value("crawler_pages_total", status_class=cls) == sum(
            n for k, n in mine.items() if k.startswith(f"status/{cls[0]}")), cls
    for metric, (counter, _) in SIMPLE.items():
        assert value(f"{metric}_total") == mine.get(counter, 0), metric
    for reason, n in figures.failure_reasons(mine).items():
        assert value("crawler_failures_total", reason=reason) == n, reason
    assert value("crawler_store_errors_total") == figures.store_errors(mine)
    assert value("crawler_bytes_total", direction="in") == mine.get("total_response_size", 0)
    assert value("crawler_bytes_total", direction="out") == mine.get("total_request_size", 0)
    assert value("crawler_gate_items") == mine["gate"]["items"] and value("crawler_gate_bytes") == mine["gate"]["bytes"]


def test_the_backlog_held_fetches_and_state_as_stats_shows_them():
    site = PoliteSite(pages=60, latency=0.05)
    site.extra_links = [f"/p/{n}" for n in range(3, 40)]
    crawl_id = f"ops-{int(time.time() * 1000)}"
    proc = subprocess.Popen([CRAWLER_TASKS, "crawl", "--crawl-id", crawl_id, "--delay", "4", "--workers", "1",
                             f"{site.url}/p/0"], env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        with exporter() as url:
            def value(got: dict, name: str, **labels: str) -> float:
                return got[(name, tuple(sorted({"crawl": crawl_id, **labels}.items())))]

            mine, got = steady(crawl_id, url, lambda s: s["waiting"] >= 10)
            assert value(got, "crawler_waiting") == mine["waiting"] >= 10
            assert_counters_as_stats(got, mine, crawl_id)
            assert value(got, "crawler_stored_total") == mine["stored"] >= 1  # some pages went, the rest wait
            assert got[("crawler_waiting_total", ())] >= mine["waiting"]
            assert value(got, "crawler_outstanding") == mine["in_flight"] >= mine["waiting"]
            assert value(got, "crawler_crawl_state", state="running") == 1
            assert value(got, "crawler_crawl_state", state="paused") == 0
            host, shown = ("host", site.host), mine["hosts"][site.host]
            assert got[("crawler_host_waiting", (host,))] == shown["waiting"] == mine["waiting"]
            assert got[("crawler_host_in_flight", (host,))] == shown["in_flight"] <= 2  # the default cap
            assert got[("crawler_host_delay_seconds", (host,))] == shown["delay"] == 4
            assert got[("crawler_host_backoff_seconds", (host,))] == shown["backoff"] == 0
            assert got[("crawler_up", ())] == 1

            assert run("pause", crawl_id).returncode == 0
            mine, got = steady(crawl_id, url, lambda s: s["held"] >= 10 and s["waiting"] == 0)
            assert value(got, "crawler_held") == mine["held"] and value(got, "crawler_waiting") == 0
            assert_counters_as_stats(got, mine, crawl_id)
            assert value(got, "crawler_crawl_state", state="paused") == 1
            assert value(got, "crawler_crawl_state", state="running") == 0
            assert run("cancel", crawl_id).returncode == 0
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        # Off a terminal, a progress line every 5 s: the time, the crawl, and what waits.
        shape = re.compile(rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d {crawl_id}  stored (\d+) · [\d.]+ pages/s · "
                           r"fetching \d+ · waiting (\d+) · outstanding (\d+) · failed 0")
        lines = [shape.match(line) for line in err.splitlines() if crawl_id in line]
        assert lines and all(lines), err
        assert any(int(m[3]) >= 10 for m in lines if m), err  # the backlog outstanding
        assert "cancelled" in out  # the summary's ending
    finally:
        if proc.poll() is None:
            proc.kill()
        site.stop()
    with exporter() as url:
        got = scrape(url)
        assert got[(("crawler_crawl_state"), (("crawl", crawl_id), ("state", "cancelled")))] == 1
        assert got[("crawler_waiting", (("crawl", crawl_id),))] == 0
    assert run("purge", "--crawl-id", crawl_id).returncode == 0


def test_with_redis_away_a_scrape_answers_crawler_up_0(tmp_path):
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"

    def redis_server() -> subprocess.Popen:
        proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                 "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                return proc
            time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    server = redis_server()
    try:
        with exporter(CRAWLER_BROKER_URL=url, CRAWLER_REDIS_URL=url) as metrics:
            assert scrape(metrics)[("crawler_up", ())] == 1
            server.terminate()
            server.wait(10)
            started = time.monotonic()
            got = scrape(metrics)  # answers (no HTTP 500), at once
            assert time.monotonic() - started < 15
            assert got[("crawler_up", ())] == 0
            assert {name for name, _ in got} == {"crawler_up", "crawler_scrape_seconds"}
            server = redis_server()
            assert scrape(metrics)[("crawler_up", ())] == 1
    finally:
        server.terminate()
        server.wait(10)
