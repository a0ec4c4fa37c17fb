"""Signals to ``crawler-tasks crawl`` and ``demo``: warm stop, a second signal stops at once,
nothing the command started outlives it, and a stopped crawl resumes without loss."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from crawler_tasks.backends import open_store
from crawler_tasks.core.politeness import host_key
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.runtime import Runtime
from tests.cli.test_cli import CLI_DB, cli, cli_env
from tests.helpers import REDIS, token
from tests.holds import slots_held

pytestmark = pytest.mark.slow


def start_cli(*args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "crawler_tasks.cli.main", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def slots_held_at(redis_url: str, url: str) -> dict[str, list[str]]:
    """The slots of ``url``'s host still held in the state Redis at ``redis_url``."""
    settings = Settings.from_env(redis_url=redis_url, broker_url=redis_url)
    rt = Runtime(settings, create_app(settings))
    try:
        return slots_held(rt, [host_key(url)])
    finally:
        rt.close()


def assert_no_slot_held(redis_url: str, url: str) -> None:
    assert slots_held_at(redis_url, url) == {}


def stored(store: str) -> list[str]:
    out = cli("export", "--store", store).stdout.splitlines()
    return [json.loads(line)["url"] for line in out]


def stored_now(store: str, crawl_id: str) -> int:
    """How many records the crawl has in its SQLite store, read in this process (a check
    that spawns no process, so it keeps up with the crawl on a busy machine)."""
    if not Path(store).exists():
        return 0
    return sum(1 for _ in open_store(store).records(crawl_id))


def wait_for(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.fixture
def env() -> dict[str, str]:
    redis.Redis.from_url(f"{REDIS}/{CLI_DB}").flushdb()
    return {**cli_env(), "CRAWLER_DOWNLOAD_TIMEOUT": "30", "CRAWLER_WORKER_CONCURRENCY": "4"}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_crawl_warm_and_it_resumes_without_loss(signum, site, tmp_path, env):
    t, size = token(), 60
    store, crawl_id = str(tmp_path / "pages.db"), f"sig-{token()}"
    url = f"{site.url}/tree/{t}/0?size={size}&delay=1"  # 8 at a time: 7 s at least
    proc = start_cli("crawl", url, "--store", store, "--workers", "2", "--crawl-id", crawl_id, env=env)
    wait_for(lambda: stored_now(store, crawl_id) >= 3, 60)
    assert proc.poll() is None, "the crawl ended before the signal"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert f"resume with --crawl-id {crawl_id}" in err and "Traceback" not in err
    assert processes_mentioning(crawl_id) == []
    before = stored(store)
    assert 3 <= len(before) < size  # stopped part-way
    if signum != signal.SIGTERM:
        return  # the same warm stop: the resume is crawled once, after SIGTERM

    # Held for it: another crawl on the same Redis runs to its end and runs none of them.
    assert "the rest is held for it" in err
    other = cli("crawl", f"{site.url}/tree/{token()}/0?size=3", "--store", str(tmp_path / "other.db"),
                "--workers", "1", env=env, timeout=120)
    assert other.returncode == 0, other.stderr
    assert len(stored(str(tmp_path / "other.db"))) == 3 and stored(store) == before
    resumed = cli("crawl", url, "--store", store, "--workers", "1", "--crawl-id", crawl_id,
                  env=env, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    urls = stored(store)
    assert len(urls) == len(set(urls)) == size  # every page once: none lost, none twice
    assert_no_slot_held(f"{REDIS}/{CLI_DB}", site.url)  # nor any slot the stopped workers held


def test_a_second_signal_stops_the_workers_at_once(site, tmp_path, env):
    store, crawl_id = str(tmp_path / "pages.db"), f"sig2-{token()}"
    t = token()
    url = f"{site.url}/tree/{t}/0?size=40&delay=25"  # a fetch that runs for 25 s
    proc = start_cli("crawl", url, "--store", store, "--workers", "1", "--crawl-id", crawl_id, env=env)
    wait_for(lambda: any(path.startswith(f"/tree/{t}/0") for path, _ in site.hits), 60)
    proc.send_signal(signal.SIGTERM)
    time.sleep(1)
    assert proc.poll() is None  # the warm stop waits for the running fetch
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert time.monotonic() - started < 10
    assert proc.returncode == 130, err
    assert processes_mentioning(crawl_id) == []


def test_sigterm_to_demo_leaves_no_process(tmp_path, env):
    crawl_id = f"demo-{token()}"
    proc = start_cli("demo", "--pages", "5000", "--store", str(tmp_path / "d.db"), "--workers", "1",
                     "--crawl-id", crawl_id, env=env)
    wait_for(lambda: len(processes_mentioning(crawl_id)) >= 2, 60)  # the CLI and its worker
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert processes_mentioning(crawl_id) == []


@pytest.mark.parametrize("persist", [True, False], ids=["with-aof", "without-persistence"])
def test_crawl_rides_out_a_redis_restart_or_says_in_one_line_that_its_state_is_gone(
        persist, site, tmp_path):
    from tests.system.test_reliability import AofRedis

    server = AofRedis(tmp_path, persist=persist).start()
    tok = token()
    crawl_id, store = f"restart-{tok}", str(tmp_path / "pages.db")
    env = {"CRAWLER_BROKER_URL": server.url, "CRAWLER_REDIS_URL": server.url,
           "CRAWLER_VISIBILITY_TIMEOUT": "10", "CRAWLER_WORKER_CONCURRENCY": "4",
           "CRAWLER_DOWNLOAD_TIMEOUT": "5", "CRAWLER_STALL_TIMEOUT": "60"}
    proc = start_cli("crawl", f"{site.url}/tree/{tok}/0?size=40&delay=0.3", "--crawl-id", crawl_id,
                     "--workers", "1", "--store", store, env=env)
    try:
        state = redis.Redis.from_url(server.url)
        stats_key = f"{os.environ['CRAWLER_KEY_PREFIX']}:{{{crawl_id}}}:stats"
        wait_for(lambda: int(state.hget(stats_key, "stored") or 0) >= 5, 60)
        server.crash()
        time.sleep(2)
        server.start()
        out, err = proc.communicate(timeout=240)
        held_after_restart = slots_held_at(server.url, site.url)
    finally:
        if proc.poll() is None:
            proc.kill()
        server.stop()
    assert "Traceback" not in err, err
    assert "is unavailable" in err or persist is False, err
    if persist:
        assert proc.returncode == 0, err
        urls = stored(store)
        assert len(urls) == len(set(urls)) == 40
        assert held_after_restart == {}
    else:
        assert proc.returncode != 0
        last = err.strip().splitlines()[-1]
        assert last.startswith("crawler-tasks: error: ") and f"--crawl-id {crawl_id}" in last, err
        assert "stored in" in last and "restarted without persistence" in last
    wait_for(lambda: not processes_mentioning(crawl_id), 15)  # no worker left behind
