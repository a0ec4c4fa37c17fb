"""Kafka in and out, with real processes: ``crawler-tasks feed kafka`` consuming seeds from a
topic in its consumer group, a real worker crawling them, records written to SQLite and to a
Kafka topic at once (librdkafka's mock cluster speaks the protocol on loopback)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.core.politeness import host_key
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages import feeds
from crawler_tasks.stages.runtime import Runtime
from tests.fakes.kafka_mock import MockKafka, read_topic
from tests.helpers import REDIS, flush, token
from tests.holds import assert_nothing_held
from tests.service.test_beat import crawler_tasks_cli

KAFKA_DB = 15  # as the Beat tests: no session worker takes these crawls


@pytest.fixture(scope="module")
def kafka() -> Iterator[MockKafka]:
    cluster = MockKafka()
    yield cluster
    cluster.close()


class Feed:
    """``crawler-tasks feed kafka`` as a user runs it, with its log."""

    def __init__(self, env: dict[str, str], log: Path, *args: str) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "crawler_tasks.cli.main", "feed", "kafka", *args],
                                         env=env, stdout=out, stderr=subprocess.STDOUT)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(30)


class KafkaCrawl:
    """A worker and feed processes on their own Redis database, seeds from topic ``seeds``,
    records to SQLite and to topic ``pages``."""

    def __init__(self, kafka: MockKafka, base: Settings, tmp: Path, **overrides: object) -> None:
        t = token()
        self.kafka, self.tmp = kafka, tmp
        self.seeds, self.pages = f"seeds-{t}", f"pages-{t}"
        kafka.create_topic(self.seeds, 3)
        self.sqlite = str(tmp / "pages.db")
        url = f"{REDIS}/{KAFKA_DB}"
        self.settings = base.replace(broker_url=url, redis_url=url, key_prefix=f"kafka{t}", seed_crawl_id=f"k{t}",
                                     store=f"{self.sqlite},kafka://{kafka.bootstrap}/{self.pages}",
                                     kafka_seeds=f"kafka://{kafka.bootstrap}/{self.seeds}?group=feed-{t}",
                                     **overrides)
        self.env = {**os.environ, **self.settings.to_env()}
        self.rt = Runtime(self.settings, create_app(self.settings))
        self.worker = Workers(self.settings, concurrency=4, name=f"kafka{t}@%h", log_path=str(tmp / "worker.log"))
        self.feeds: list[Feed] = []

    @property
    def crawl_id(self) -> str:
        return self.settings.seed_crawl_id

    def produce(self, *values: str) -> None:
        producer = Producer({"bootstrap.servers": self.kafka.bootstrap})
        for value in values:
            producer.produce(self.seeds, value=value.encode())
        assert producer.flush(10) == 0

    def feed(self, *args: str) -> Feed:
        self.feeds.append(Feed(self.env, self.tmp / f"feed-{len(self.feeds)}.log", *args))
        return self.feeds[-1]

    def stored(self) -> int:
        return int(self.rt.stats.read(self.crawl_id).get("stored", 0))

    def wait_stored(self, n: int, timeout: float = 90) -> None:
        wait_drained(lambda: self.stored() >= n and self.rt.crawls.outstanding(self.crawl_id) == 0,
                     timeout=timeout, workers=self.worker)

    def close(self) -> None:
        for feed in self.feeds:
            feed.stop()
        self.worker.stop()
        self.rt.close()


@pytest.fixture
def kafka_crawl(kafka, settings, tmp_path) -> Iterator:
    flush(KAFKA_DB)
    made: list[KafkaCrawl] = []

    def make(**overrides: object) -> KafkaCrawl:
        made.append(KafkaCrawl(kafka, settings, tmp_path, **overrides))
        return made[-1]

    yield make
    for crawl in made:
        crawl.close()
    flush(KAFKA_DB)


def test_a_crawl_fed_from_a_kafka_topic_is_written_to_sqlite_and_to_kafka_once_each(kafka_crawl, site):
    c = kafka_crawl()
    t = token()
    tree = f"{site.url}/tree/{t}/0?size=12"
    head = {"url": f"{site.url}/page/{t}-head", "method": "HEAD", "meta": {"url_id": "7", "NotExtract": True},
            "_encoding": "utf-8"}
    leaf = {"url": f"{site.url}/tree/{t}-leaf/0?size=5", "meta": {"url_id": "8", "NotExtract": True}}
    c.produce(tree, json.dumps(head), json.dumps(leaf), "not a url", "{\"url\": ")
    c.worker.start()
    feed = c.feed()
    c.wait_stored(14)
    assert feed.proc.poll() is None  # a malformed seed does not stop the feed

    local = {r.url: r for r in open_store(c.sqlite).records(c.crawl_id)}
    assert len(local) == 14  # the tree's 12 pages, the HEAD page, the leaf without its children
    assert local[head["url"]].method == "HEAD" and local[head["url"]].meta["url_id"] == "7"
    assert leaf["url"] in local and not any(u.startswith(f"{site.url}/tree/{t}-leaf/1") for u in local)
    messages = read_topic(c.kafka.bootstrap, c.pages, expect=14)
    in_kafka = {m.key().decode(): json.loads(m.value()) for m in messages}
    assert len(messages) == len(in_kafka) == 14  # once each
    assert {key: d["url"] for key, d in in_kafka.items()} == {f"{c.crawl_id}:{r.fingerprint}": r.url
                                                         for r in local.values()}
    assert {d["url"]: d.get("body") for d in in_kafka.values()} == {u: r.body for u, r in local.items()}

    stats = c.rt.stats.read(c.crawl_id)
    assert stats["seeds/invalid"] == 2 and stats["stored"] == 14
    [status] = [f for f in json.loads(crawler_tasks_cli("seeds", "--json", env=c.env))["feeds"] if f["name"] == "kafka"]
    assert status["enabled"] and status["status"]["admitted"] == 3 and status["status"]["refused"] == 2
    assert_nothing_held(c.rt, [host_key(site.url)])
    assert feed.stop() == 0  # SIGTERM: it leaves its group and exits cleanly
    log = feed.log.read_text()
    assert "refused message" in log and "Traceback" not in log


def test_a_feed_killed_while_consuming_leaves_every_seed_crawled_once(kafka_crawl, site):
    c = kafka_crawl(max_queued=4)  # the feed pauses while the workers catch up
    t = token()
    urls = [f"{site.url}/page/{t}-{i}?delay=0.02" for i in range(120)]
    c.produce(*urls)
    c.worker.start()
    first = c.feed("--batch", "20")
    wait_drained(lambda: c.rt.stats.read(c.crawl_id).get("gate/admitted", 0) >= 30, timeout=60, workers=c.worker)
    first.stop(signal.SIGKILL)
    admitted = c.rt.stats.read(c.crawl_id)["gate/admitted"]
    assert admitted < len(urls)  # killed half-way
    c.feed("--batch", "20")
    c.wait_stored(len(urls))
    records = [r.url for r in open_store(c.sqlite).records(c.crawl_id)]
    assert sorted(records) == sorted(urls)  # each once
    stats = c.rt.stats.read(c.crawl_id)
    assert stats["stored"] == stats["gate/admitted"] == len(urls)
    status = feeds.status(c.rt, "kafka")
    assert status["skipped"] >= 1  # paused at least once for the full queue
    assert len({m.key() for m in read_topic(c.kafka.bootstrap, c.pages, expect=len(urls))}) == len(urls)
    assert_nothing_held(c.rt, [host_key(site.url)])


def test_feed_kafka_without_its_setting_or_its_cluster_is_one_line(tmp_path):
    env = {**os.environ, "CRAWLER_KAFKA_SEEDS": ""}
    run = [sys.executable, "-m", "crawler_tasks.cli.main", "feed", "kafka"]
    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "CRAWLER_KAFKA_SEEDS is not set" in done.stderr
    env["CRAWLER_KAFKA_SEEDS"] = "kafka://app:secret@127.0.0.1:1/seeds"
    started = time.monotonic()
    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "kafka feed 'kafka://app:***@127.0.0.1:1/seeds'" in done.stderr, done.stderr
    assert "secret" not in done.stderr and "Traceback" not in done.stderr and time.monotonic() - started < 30
    env["CRAWLER_KAFKA_SEEDS"] = "kafka://127.0.0.1:1/"
    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "CRAWLER_KAFKA_SEEDS 'kafka://127.0.0.1:1/': no topic" in done.stderr


def _wait_shared(c, feeds_, timeout: float = 60) -> None:
    """Until the group's rebalance is over: each feed's latest assignment names some of the
    topic's three partitions and together they name each once (a seed produced before then
    may be read again by the feed a partition moves to)."""
    deadline = time.monotonic() + timeout
    while True:
        latest = [[line for line in f.log.read_text().splitlines() if "kafka feed: reading" in line][-1:]
                  for f in feeds_]
        shares = [line[0].count(f"{c.seeds}[") if line else 0 for line in latest]
        if all(shares) and sum(shares) == 3:
            return
        assert time.monotonic() < deadline, f"the two feeds did not share the topic: {latest}"
        time.sleep(0.2)


def test_two_feeds_in_one_group_share_the_topic_and_feed_each_seed_once(kafka_crawl, site):
    c = kafka_crawl()
    t = token()
    urls = [f"{site.url}/page/{t}-{i}" for i in range(60)]
    c.worker.start()
    feeds_ = [c.feed("--batch", "5"), c.feed("--batch", "5")]
    _wait_shared(c, feeds_)  # both joined: the group gave each of them partitions of the three
    c.produce(*urls)
    c.wait_stored(len(urls))
    assert sorted(r.url for r in open_store(c.sqlite).records(c.crawl_id)) == sorted(urls)
    status = feeds.status(c.rt, "kafka")
    assert status["admitted"] == len(urls) and status["duplicates"] == 0  # no seed read by both
    assert all(f.proc.poll() is None for f in feeds_)
    reading = [[line for line in f.log.read_text().splitlines() if "kafka feed: reading" in line][-1] for f in feeds_]
    assert all(f"{c.seeds}[" in line for line in reading), reading  # each reads a share of the partitions
