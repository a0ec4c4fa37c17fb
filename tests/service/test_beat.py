"""A real ``celery -A crawler_tasks beat`` (one, then two at once) feeding a real worker.

These tests use their own Redis database (15, as test_feeds.py's idle broker
does): the session worker of the other tests must not take these ticks, since
it runs with other feed settings.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages import feeds
from crawler_tasks.stages.runtime import Runtime
from tests.helpers import REDIS, token

BEAT_DB = 15
INTERVAL = 1.0


class Beats:
    """``celery beat`` processes with the given settings, each with its schedule file and log."""

    def __init__(self, settings: Settings, tmp: Path) -> None:
        self.env = {**os.environ, **settings.to_env()}
        self.tmp = tmp
        self.procs: list[subprocess.Popen] = []

    def start(self, n: int = 1) -> None:
        for i in range(len(self.procs), len(self.procs) + n):
            log = open(self.log(i), "ab")  # noqa: SIM115 (the child holds it)
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "crawler_tasks", "beat",
                 "-s", str(self.tmp / f"schedule-{i}"), "--loglevel", "info"],
                env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
            log.close()

    def log(self, i: int) -> Path:
        return self.tmp / f"beat-{i}.log"

    def sent(self, entry: str) -> list[int]:
        """How many ticks of Beat entry ``entry`` each beat sent, from its log."""
        pattern = re.compile(rf"Sending due task {re.escape(entry)} \(crawl\.feed\)")
        return [len(pattern.findall(self.log(i).read_text(errors="replace"))) for i in range(len(self.procs))]

    def stop(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@dataclass
class Cluster:
    """A worker and beats on database 15 with the test's feed settings."""

    rt: Runtime
    worker: Workers
    beats: Beats

    def stop(self) -> None:
        try:
            self.beats.stop()
        finally:
            self.worker.stop()
            self.rt.close()


@pytest.fixture
def cluster(settings: Settings, tmp_path: Path) -> Iterator[Callable[[list[str]], Cluster]]:
    """cluster(seed-file lines) -> a running worker and beats (not started) with 1 s intervals."""
    url = f"{REDIS}/{BEAT_DB}"
    redis.Redis.from_url(url).flushdb()
    made: list[Cluster] = []

    def make(lines: list[str]) -> Cluster:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(lines) + "\n")
        s = settings.replace(broker_url=url, redis_url=url, store=str(tmp_path / "pages.db"),
                             seed_file=str(seeds), seed_interval=INTERVAL, start_urls_interval=INTERVAL,
                             seed_crawl_id=f"beat{token()}")
        worker = Workers(s, concurrency=4, name="beat-tests@%h", log_path=str(tmp_path / "worker.log"))
        made.append(Cluster(Runtime(s, create_app(s)), worker.start(), Beats(s, tmp_path)))
        return made[-1]

    try:
        yield make
    finally:
        for c in made:
            c.stop()
        redis.Redis.from_url(url).flushdb()


def records(rt: Runtime) -> set[str]:
    return {r.url for r in open_store(rt.settings.store).records(rt.settings.seed_crawl_id)}


def test_beat_feeds_a_seed_file_and_the_start_url_list_into_a_crawl(cluster, site):
    t = token()
    file_urls = [f"{site.url}/page/{t}-f{i}" for i in range(3)]
    c = cluster([*file_urls, "not a url"])
    rt, beats = c.rt, c.beats
    list_urls = [f"{site.url}/page/{t}-l{i}" for i in range(2)]
    rt.redis.rpush(rt.settings.start_urls_key, *list_urls)
    beats.start()

    wait_drained(lambda: len(records(rt)) == 5, timeout=30, workers=c.worker)
    assert records(rt) == {*file_urls, *list_urls}
    assert rt.redis.llen(rt.settings.start_urls_key) == 0
    assert rt.stats.read(rt.settings.seed_crawl_id)["seeds/invalid"] >= 1

    by_name = {f["name"]: f for f in json.loads(crawler_tasks_cli("seeds", "--json", env=beats.env))["feeds"]}
    assert by_name["seed_file"]["enabled"] and by_name["seed_file"]["reads"] == rt.settings.seed_file
    assert by_name["seed_file"]["status"]["admitted"] == 3 and by_name["seed_file"]["status"]["refused"] >= 1
    assert by_name["start_urls"]["status"]["admitted"] == 2
    assert not by_name["sitemaps"]["enabled"]
    text = crawler_tasks_cli("seeds", env=beats.env).splitlines()
    assert f"seed_file   every 1s      reads: {rt.settings.seed_file}" in text
    assert any(line.startswith("  ticks ") and " admitted 3 " in line for line in text), text


def crawler_tasks_cli(*args: str, env: dict[str, str]) -> str:
    """``crawler-tasks ARGS`` as a user runs it; its stdout."""
    done = subprocess.run([sys.executable, "-m", "crawler_tasks.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_two_beats_feed_the_seed_file_once_per_interval(cluster, site):
    t = token()
    file_urls = [f"{site.url}/page/{t}-{i}" for i in range(3)]
    c = cluster(file_urls)
    rt, beats = c.rt, c.beats
    beats.start(2)
    wait_drained(lambda: feeds.status(rt, feeds.SEED_FILE)["ticks"] >= 1, timeout=30, workers=c.worker)
    first = time.monotonic()
    time.sleep(5 * INTERVAL)
    status = feeds.status(rt, feeds.SEED_FILE)
    elapsed = time.monotonic() - first

    sent = beats.sent("feed-seed-file")
    assert all(n >= elapsed / INTERVAL - 1 for n in sent), sent  # both beats ticked every interval
    # One tick fed per interval, not one per beat: the other beat's ticks were skipped.
    assert elapsed / INTERVAL - 1 <= status["ticks"] <= elapsed / INTERVAL + 2, (status, sent)
    assert status["skipped"] >= status["ticks"] - 2, status
    # The file's seeds were admitted once; every later feeding tick found them seen.
    assert status["admitted"] == 3 and status["duplicates"] == 3 * (status["ticks"] - 1)
    wait_drained(lambda: len(records(rt)) == 3, timeout=30, workers=c.worker)
    assert all(len(site.paths(f"/page/{t}-{i}")) == 1 for i in range(3))


def test_entries_of_your_own_in_beat_schedule_py_join_the_crawlers(monkeypatch):
    import beat_schedule
    from crawler_tasks.core.errors import SettingsError
    from crawler_tasks.service.beat import beat_schedule as schedule

    entry = {"task": "crawl.submit", "schedule": 3600.0, "kwargs": {"urls": ["https://example.com/"]}}
    monkeypatch.setattr(beat_schedule, "ENTRIES", {"recrawl-home": entry})
    built = create_app(Settings(broker_url=f"{REDIS}/{BEAT_DB}")).conf.beat_schedule
    assert built["recrawl-home"] == entry and "flush-stats" in built
    monkeypatch.setattr(beat_schedule, "ENTRIES", {"flush-stats": entry})
    with pytest.raises(SettingsError, match="'flush-stats' has the name of one of the crawler's own"):
        schedule(Settings())
