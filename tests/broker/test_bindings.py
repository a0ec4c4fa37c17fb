"""A plain Celery app on the crawler's Redis broker: both apps' control commands work, neither
side logs a traceback, and bindings an earlier version wrote with ``:`` are rewritten at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from crawler_tasks.broker.bindings import kombu_form
from tests.helpers import REDIS, flush, token

ROOT = Path(__file__).resolve().parents[2]
BINDINGS_DB = int(os.environ.get("CRAWLER_BINDINGS_TEST_DB", "9"))
BROKER = f"{REDIS}/{BINDINGS_DB}"


def test_a_binding_written_with_colons_is_put_in_kombus_form():
    assert kombu_form("crawl.fetch::crawl.fetch") == "crawl.fetch\x06\x16\x06\x16crawl.fetch"
    assert kombu_form("crawl.fetch\x06\x16\x06\x16crawl.fetch") is None
    assert kombu_form("#::celeryev.1234") == "#\x06\x16\x06\x16celeryev.1234"
    assert kombu_form("odd") is None and kombu_form("a:b:c:d") is None


def _celery(app: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "celery", "-A", app, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def two_apps(tmp_path: Path) -> Iterator[tuple[dict[str, str], dict[str, str], str, str, list[Path]]]:
    flush(BINDINGS_DB)
    client = redis.Redis.from_url(BROKER)
    old = "crawl.fetch::crawl.fetch"  # as an earlier version of the crawler wrote it
    client.sadd("_kombu.binding.crawl.fetch", old)
    base = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLER_")}
    crawler_env = {**base, "CRAWLER_BROKER_URL": BROKER, "CRAWLER_REDIS_URL": BROKER,
                   "CRAWLER_KEY_PREFIX": f"bind{token()}", "CRAWLER_STORE": str(tmp_path / "pages.db")}
    plain_env = {**base, "PLAIN_BROKER": BROKER, "PYTHONPATH": str(ROOT)}
    crawler, plain = f"crawler-{token()}@test", f"plain-{token()}@test"
    logs = [tmp_path / "crawler.log", tmp_path / "plain.log"]
    procs = [
        subprocess.Popen([sys.executable, "-m", "celery", "-A", "crawler_tasks", "worker", "-n", crawler,
                          "-P", "threads", "-c", "2", "-l", "INFO"], cwd=ROOT, env=crawler_env,
                         stdout=open(logs[0], "wb"), stderr=subprocess.STDOUT),
        subprocess.Popen([sys.executable, "-m", "celery", "-A", "tests.programs.plain_app", "worker", "-n", plain,
                          "-P", "threads", "-c", "1", "-l", "INFO"], cwd=ROOT, env=plain_env,
                         stdout=open(logs[1], "wb"), stderr=subprocess.STDOUT)]
    try:
        deadline = time.monotonic() + 60
        while not all("ready" in log.read_text(errors="replace") for log in logs):
            assert time.monotonic() < deadline, [log.read_text(errors="replace")[-2000:] for log in logs]
            assert all(p.poll() is None for p in procs), [log.read_text(errors="replace")[-2000:] for log in logs]
            time.sleep(0.2)
        yield crawler_env, plain_env, crawler, plain, logs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
        flush(BINDINGS_DB)


def test_a_plain_app_and_the_crawler_see_each_others_workers(two_apps):
    crawler_env, plain_env, crawler, plain, logs = two_apps
    members = redis.Redis.from_url(BROKER).smembers("_kombu.binding.crawl.fetch")
    assert members == {b"crawl.fetch\x06\x16\x06\x16crawl.fetch"}  # the old binding, rewritten at start
    for app, env in (("tests.programs.plain_app", plain_env), ("crawler_tasks", crawler_env)):
        done = _celery(app, "inspect", "ping", "--json", "-t", "5", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert set(json.loads(done.stdout.strip().splitlines()[-1])) == {crawler, plain}, (app, done.stdout)
    # A task of the plain app still runs on its own worker.
    sent = _celery("tests.programs.plain_app", "call", "plain.add", "--args", "[2, 3]", env=plain_env)
    assert sent.returncode == 0, sent.stderr
    deadline = time.monotonic() + 30
    while "succeeded" not in logs[1].read_text(errors="replace"):
        assert time.monotonic() < deadline, logs[1].read_text(errors="replace")[-2000:]
        time.sleep(0.2)
    time.sleep(1)  # a late traceback from a control reply would show by now
    for log in logs:
        text = log.read_text(errors="replace")
        assert "Traceback" not in text and "ValueError" not in text, text[-3000:]
