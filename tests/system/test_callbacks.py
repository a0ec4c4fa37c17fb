"""Callbacks into the calling app: ``on_page`` once per stored page and ``on_done`` once
per drained crawl, received by the tasks of another Celery app (which does not import
this package) through the real broker, with real worker processes on both sides."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from crawler_tasks.core.errors import BadInput
from crawler_tasks.stages.seed import submit_to
from tests.helpers import REDIS
from tests.system.test_reliability import FAULT_DB, PAGES, amqp_vhost, make_crawl  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]
NOTES = f"{REDIS}/{FAULT_DB}"


class Receiver:
    """``celery -A tests.programs.receiver worker -Q crawl.callbacks``: the other app."""

    def __init__(self, broker: str, log: Path, notes: str = NOTES) -> None:
        self.notes = redis.Redis.from_url(notes)
        env = {"RECEIVER_BROKER": broker, "RECEIVER_REDIS": notes, "PATH": str(Path(sys.executable).parent)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.programs.receiver", "worker", "-Q", "crawl.callbacks",
             "-P", "threads", "-c", "2", "--without-mingle", "--without-gossip", "-l", "INFO"],
            cwd=ROOT, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)

    def pages(self, tag: str) -> dict[str, int]:
        return {k.decode(): int(v) for k, v in self.notes.hgetall(f"receiver:{tag}:pages").items()}

    def done(self, tag: str) -> list[dict]:
        return [json.loads(raw) for raw in self.notes.lrange(f"receiver:{tag}:done", 0, -1)]

    def wait(self, what, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not what():
            assert self.proc.poll() is None, "the receiver's worker exited"
            assert time.monotonic() < deadline, "the callbacks did not all arrive"
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture
def receiver_for(tmp_path) -> Iterator:
    made: list[Receiver] = []

    def make(broker: str) -> Receiver:
        made.append(Receiver(broker, tmp_path / "receiver.log"))
        return made[-1]

    yield make
    for r in made:
        r.stop()


def submit_with_callbacks(crawl, *, follow: bool = True) -> None:
    tag = crawl.crawl_id
    submit_to(crawl.rt, crawl.seed, crawl_id=crawl.crawl_id,
              on_page={"task": "receiver.page", "kwargs": {"tag": tag}}, on_page_follow=follow,
              on_done={"task": "receiver.done", "kwargs": {"tag": tag}})


def assert_each_page_once(crawl, receiver: Receiver) -> None:
    receiver.wait(lambda: len(receiver.pages(crawl.crawl_id)) >= PAGES and receiver.done(crawl.crawl_id))
    time.sleep(1.0)  # a duplicate would arrive about now
    pages = receiver.pages(crawl.crawl_id)
    assert len(pages) == PAGES and set(pages.values()) == {1}, pages
    [done] = receiver.done(crawl.crawl_id)
    assert done["crawl_id"] == crawl.crawl_id and done["stats"]["stored"] == PAGES
    summary = json.loads(receiver.notes.lindex(f"receiver:{crawl.crawl_id}:summaries", 0))
    assert set(summary) == {"url", "status", "fingerprint", "crawl_id", "depth", "items", "store", "description"}
    assert summary["status"] == 200 and summary["store"] == crawl.store and summary["items"] == 0


@pytest.mark.parametrize("broker", ["redis", "amqp"])
def test_each_page_and_the_end_are_told_once_to_another_app(broker, make_crawl, receiver_for, request):  # noqa: F811  (the fixture)
    url = f"{REDIS}/{FAULT_DB}" if broker == "redis" else request.getfixturevalue("amqp_vhost")
    crawl = make_crawl(broker=url)
    receiver = receiver_for(url)
    submit_with_callbacks(crawl)
    crawl.start_workers()
    crawl.wait_drained()
    crawl.assert_exact()
    assert_each_page_once(crawl, receiver)


@pytest.mark.slow
def test_a_sigkilled_worker_neither_loses_nor_repeats_a_page_callback(make_crawl, receiver_for):  # noqa: F811  (the fixture)
    url = f"{REDIS}/{FAULT_DB}"
    crawl = make_crawl(broker=url)
    receiver = receiver_for(url)
    submit_with_callbacks(crawl)
    first = crawl.start_workers()
    crawl.wait_stored(8)
    first.kill()  # tasks and a store batch in flight die with it
    crawl.start_workers()
    crawl.wait_drained()
    crawl.assert_exact()
    assert_each_page_once(crawl, receiver)


def test_without_follow_only_the_submitted_pages_are_told(make_crawl, receiver_for):  # noqa: F811  (the fixture)
    url = f"{REDIS}/{FAULT_DB}"
    crawl = make_crawl(broker=url)
    receiver = receiver_for(url)
    submit_with_callbacks(crawl, follow=False)
    crawl.start_workers()
    crawl.wait_drained()
    receiver.wait(lambda: receiver.done(crawl.crawl_id))
    time.sleep(1.0)
    assert receiver.pages(crawl.crawl_id) == {crawl.seed: 1}


def test_a_callback_that_is_not_a_task_is_refused_before_anything_is_sent(make_crawl):  # noqa: F811  (the fixture)
    crawl = make_crawl(broker=f"{REDIS}/{FAULT_DB}")
    for bad in ({"args": []}, 42, {"task": "t", "args": [object()]}):
        with pytest.raises(BadInput):
            submit_to(crawl.rt, crawl.seed, crawl_id=crawl.crawl_id, on_page=bad)
        with pytest.raises(BadInput):
            submit_to(crawl.rt, crawl.seed, crawl_id=crawl.crawl_id, on_done=bad)
    assert crawl.rt.crawls.outstanding(crawl.crawl_id) == 0
