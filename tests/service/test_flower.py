"""Flower sees the workers, the tasks and the queue depth of the crawl."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import requests

from crawler_tasks.cli.local import free_port

from ..conftest import token


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
    proc, url = start_flower(tmp_path, {"FLOWER_UNAUTHENTICATED_API": "true"})
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{url}/healthcheck", timeout=1).text == "OK":
                    break
            except requests.ConnectionError:
                time.sleep(0.2)
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
