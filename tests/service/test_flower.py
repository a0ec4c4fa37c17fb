"""Flower sees the workers, the tasks and the queue depth of the crawl."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import requests

from crawler_tasks.cli.local import Workers, free_port, wait_drained
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.helpers import REDIS, UNTHROTTLED, flush, token
from tests.service.test_metrics import scrape, serving, stats_json

#: The Redis database of the test that starts Flower before its own workers.
FLOWER_DB = int(os.environ.get("CRAWLER_FLOWER_TEST_DB", "2"))


def start_flower(tmp_path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = open(tmp_path / "flower.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "crawler_tasks", "flower", "--address=127.0.0.1",
         f"--port={port}", f"--db={tmp_path / 'flower.db'}"],
        env={**os.environ, **env}, stdout=log, stderr=log)
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture
def flower(worker, tmp_path) -> Iterator[str]:
    with flower_running(tmp_path, {"FLOWER_UNAUTHENTICATED_API": "true"}) as url:
        yield url


@contextlib.contextmanager
def flower_running(tmp_path, env: dict[str, str]) -> Iterator[str]:
    """A Flower process, answering its health check; its URL."""
    proc, url = start_flower(tmp_path, env)
    try:
        assert poll(lambda: _status(f"{url}/healthcheck") == 200, 30)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


PAGE_TASKS = {"crawl.fetch"}  # the default local pipeline parses and stores inside the fetch task


def poll(fn, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.5)


def test_flower_shows_workers_crawl_tasks_and_queues(flower, crawl, site, settings):
    workers = poll(lambda: requests.get(f"{flower}/api/workers?refresh=1", timeout=10).json())
    assert any(name.startswith("tests@") for name in workers)
    # Task events are off until Flower switches them on in the workers (every
    # few seconds): crawl one new page at a time until Flower has seen a page's tasks.
    def crawl_and_look() -> set[str]:
        t = token()
        crawl(f"{site.url}/page/{t}")
        time.sleep(0.5)
        tasks = requests.get(f"{flower}/api/tasks", timeout=10).json().values()
        names = {task["name"] for task in tasks if t in (task.get("args") or "")}
        return names if names >= PAGE_TASKS else set()

    assert poll(crawl_and_look, timeout=40) == PAGE_TASKS
    if not settings.broker_is_redis:
        return  # Flower reads RabbitMQ queue lengths only through --broker-api (management plugin)
    queues = requests.get(f"{flower}/api/queues/length", timeout=10).json()["active_queues"]
    assert {q["name"] for q in queues} >= {"crawl.fetch", "crawl.parse", "crawl.store"}


def test_flower_as_docker_runs_it_requires_a_password(worker, tmp_path):
    from pathlib import Path

    compose = (Path(__file__).resolve().parents[2] / "docker" / "compose.yml").read_text()
    assert "FLOWER_BASIC_AUTH: ${FLOWER_BASIC_AUTH:?" in compose  # compose refuses to start without it
    proc, url = start_flower(tmp_path, {"FLOWER_BASIC_AUTH": "admin:s3cret-pw"})
    try:
        assert poll(lambda: _status(f"{url}/api/workers") not in (None,), 30)
        assert _status(f"{url}/api/workers") == 401 and _status(f"{url}/") == 401
        assert requests.get(f"{url}/api/workers", auth=("admin", "s3cret-pw"), timeout=10).ok
        assert _status(f"{url}/api/workers", auth=("admin", "wrong")) == 401
    finally:
        proc.terminate()
        proc.wait(10)


def _status(url: str, **kwargs) -> int | None:
    try:
        return requests.get(url, timeout=5, **kwargs).status_code
    except requests.ConnectionError:
        return None


@pytest.mark.slow
def test_flower_started_first_names_every_task_and_the_metrics_equal_stats(site, tmp_path):
    """As a new user runs it: Flower first, then the workers, then a crawl. Flower lists every
    task by name with its URL, and the exporter's counts are what ``crawler-tasks stats`` says."""
    flush(FLOWER_DB)
    assert Settings().task_events == "auto"  # what a user gets (this suite turns them off elsewhere)
    s = Settings.from_env(broker_url=f"{REDIS}/{FLOWER_DB}", redis_url=f"{REDIS}/{FLOWER_DB}",
                          key_prefix=f"fl{token()}", store=str(tmp_path / "pages.db"), task_events="auto",
                          **UNTHROTTLED)
    t, pages = token(), 24
    with flower_running(tmp_path, {**s.to_env(), "FLOWER_UNAUTHENTICATED_API": "true"}) as flower, \
            serving(s) as exporter:
        workers = Workers(s, concurrency=4, name=f"flower{t}@%h", log_path=str(tmp_path / "w.log")).start()
        rt = Runtime(s, create_app(s))
        try:
            crawl_id = f"fl-{t}"
            submit_requests(rt, build_requests(f"{site.url}/tree/{t}/0?size={pages}", crawl_id=crawl_id))
            wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=60, workers=workers)
            urls = {r.url for r in rt.store(s.store).records(crawl_id)}
            assert len(urls) == pages

            def seen() -> dict:  # Flower has had every task's last event
                tasks = requests.get(f"{flower}/api/tasks", params={"limit": 10000}, timeout=10).json()
                done = [x for x in tasks.values() if x["state"] == "SUCCESS"]
                return tasks if sum(x["name"] == "crawl.fetch" for x in done) >= pages else {}

            page = requests.get(f"{flower}/tasks", timeout=10).text  # the list, as a person opens it
            assert '<th data-column="args">' in page  # no flag needed for a page's URL to show
            tasks = poll(seen, 30)
            assert tasks and all(x["name"] for x in tasks.values()), [x for x in tasks.values() if not x["name"]]
            fetches = [x for x in tasks.values() if x["name"] == "crawl.fetch"]
            assert {eval(x["args"])[0] for x in fetches} == urls  # noqa: S307 - Flower shows a repr
            assert {x["name"] for x in tasks.values()} == {"crawl.fetch", "crawl.store_batch"}
            # Each shows its crawl, and what became of it; a store batch, what it wrote for whom.
            assert {x["kwargs"] for x in fetches} == {repr({"crawl": crawl_id})}
            assert {x["result"] for x in fetches} == {repr("fetched 200")}
            batches = [x for x in tasks.values() if x["name"] == "crawl.store_batch" and x["result"] != "'no records'"]
            assert batches and all(crawl_id in x["result"] for x in batches)
            assert sum(int(x["result"].strip("'").split()[0]) for x in batches) == pages
            # The fetches of a cancelled crawl end as such, not as fetched pages.
            cancelled = f"fl-cancelled-{t}"
            rt.crawls.set_control(cancelled, "cancelled")
            submit_requests(rt, build_requests([f"{site.url}/page/{t}-{i}" for i in range(3)], crawl_id=cancelled))
            wait_drained(lambda: rt.crawls.outstanding(cancelled) == 0, timeout=60, workers=workers)

            def ended() -> list:
                tasks = requests.get(f"{flower}/api/tasks", params={"limit": 10000}, timeout=10).json()
                mine = [x for x in tasks.values() if x.get("kwargs") == repr({"crawl": cancelled})]
                return mine if len(mine) == 3 and all(x["state"] == "SUCCESS" for x in mine) else []
            assert {x["result"] for x in poll(ended, 30)} == {repr("cancelled")}

            stats = stats_json(s, crawl_id)["crawls"][crawl_id]
            got = scrape(exporter)
            labels = tuple(sorted({"crawl": crawl_id, "status_class": "2xx"}.items()))
            assert got[("crawler_pages_total", labels)] == stats["status/200"] == pages
            assert got[("crawler_stored_total", (("crawl", crawl_id),))] == stats["stored"] == pages
            assert got[("crawler_outstanding", (("crawl", crawl_id),))] == 0
        finally:
            workers.stop()
            rt.close()
