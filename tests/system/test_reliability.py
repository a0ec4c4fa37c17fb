"""Faults against real processes: each crawl ends with every page stored exactly once and
the counters equal to what the store holds.

A worker SIGKILLed (RabbitMQ broker), three nodes with one SIGKILLed and one stopped warm
mid-crawl, the state Redis down past the retry budget, RabbitMQ restarted (durable
queues), the store locked for 8 s, and a broker that is down when seeds are submitted.
A worker SIGKILLed and the one Redis killed and restarted with the Redis broker are
crawled with the defaults on in ``test_realweb_faults``.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import Workers, free_port, wait_drained
from crawler_tasks.core.errors import BrokerUnavailable
from crawler_tasks.core.politeness import host_key
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests, submit_to
from tests.cli.test_cli import assert_one_line_error, cli
from tests.helpers import REDIS, SUFFIX, UNTHROTTLED, flush, rabbitmq_lock, token
from tests.holds import assert_nothing_held

FAULT_DB = 11
PAGES = 40


def rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=120)


@pytest.fixture
def amqp_vhost() -> Iterator[str]:
    """A RabbitMQ vhost of the test's own, new (so no other test's messages are in the way)
    and deleted after it. RabbitMQ deletes a vhost in the background: one name used again
    right after its deletion may not be created yet, so each test's name is new."""
    vhost = f"crawlerfaults{SUFFIX}-{token()}"
    rabbitmqctl("add_vhost", vhost)
    rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    yield f"amqp://guest:guest@127.0.0.1:5672/{vhost}"
    subprocess.run(["rabbitmqctl", "-q", "delete_vhost", vhost], capture_output=True, timeout=120)


class FaultCrawl:
    """A tree crawl of ``PAGES`` slow pages with its own settings, store and workers."""

    def __init__(self, site, tmp_path: Path, *, broker: str, redis_url: str = f"{REDIS}/{FAULT_DB}",
                 **overrides: object) -> None:
        self.store = str(tmp_path / "pages.db")
        self.tmp_path = tmp_path
        self.settings = Settings(broker_url=broker, redis_url=redis_url, key_prefix=f"fault{token()}",
                                 store=self.store,
                                 **{"visibility_timeout": 5, "retry_backoff": 0.1, **UNTHROTTLED, **overrides})
        self.rt = Runtime(self.settings, create_app(self.settings))
        self.crawl_id = f"fault-{token()}"
        self.seed = f"{site.url}/tree/{token()}/0?size={PAGES}&delay=0.3"
        self.workers: list[Workers] = []

    def submit(self) -> None:
        submit_requests(self.rt, build_requests(self.seed, crawl_id=self.crawl_id))

    def start_workers(self) -> Workers:
        n = len(self.workers) + 1
        w = Workers(self.settings, concurrency=4, name=f"{self.crawl_id}-{n}@%h",
                    log_path=str(self.tmp_path / f"w{n}.log"), loglevel="INFO").start()
        self.workers.append(w)
        return w

    def stored(self) -> int:
        try:
            return int(self.rt.stats.read(self.crawl_id).get("stored", 0))
        except redis.RedisError:
            return 0

    def wait_stored(self, n: int, timeout: float = 60) -> None:
        wait_drained(lambda: self.stored() >= n, timeout=timeout, workers=self.workers[-1])

    def wait_drained(self, timeout: float = 120) -> None:
        try:
            wait_drained(lambda: self.rt.crawls.outstanding(self.crawl_id) == 0, timeout=timeout,
                         workers=self.workers[-1])
        finally:
            for w in self.workers:
                w.stop()

    def assert_exact(self) -> dict[str, int]:
        """Every page stored once, all 200, and the counters equal to what the store holds."""
        records = list(open_store(self.store).records(self.crawl_id))
        urls = [r.url for r in records]
        assert len(urls) == len(set(urls)) == PAGES
        assert {u.split("?")[0].rsplit("/", 1)[-1] for u in urls} == {str(n) for n in range(PAGES)}
        assert all(r.status == 200 for r in records), [r.description for r in records if r.status != 200]
        stats = self.rt.stats.read(self.crawl_id)
        assert stats["stored"] == stats["gate/admitted"] == stats["status/200"] == PAGES, stats
        assert stats.get("errors", 0) == stats.get("failures", 0) == stats.get("store/failed", 0) == 0, stats
        # The workers are stopped by now: the slots are checked, the permits went with them.
        assert_nothing_held(self.rt, [host_key(self.seed)], workers=False)
        return stats

    def close(self) -> None:
        for w in self.workers:
            w.stop()
        self.rt.close()


@pytest.fixture
def make_crawl(site, tmp_path) -> Iterator:
    made: list[FaultCrawl] = []

    def make(**kwargs: object) -> FaultCrawl:
        flush(FAULT_DB)
        crawl = FaultCrawl(site, tmp_path, **kwargs)
        made.append(crawl)
        return crawl

    yield make
    for crawl in made:
        crawl.close()


@pytest.mark.slow
def test_sigkilled_worker_on_rabbitmq_loses_no_page_and_counts_none_twice(make_crawl, amqp_vhost):
    crawl = make_crawl(broker=amqp_vhost)
    crawl.submit()
    first = crawl.start_workers()
    crawl.wait_stored(8)
    first.kill()  # tasks in flight die with it: their messages are redelivered
    assert 8 <= open_store(crawl.store).count(crawl.crawl_id) < PAGES
    killed_at = time.monotonic()
    crawl.start_workers()
    crawl.wait_drained()
    assert time.monotonic() - killed_at < 60  # the visibility timeout (10 s) plus the rest
    crawl.assert_exact()


@pytest.mark.slow
def test_three_nodes_one_sigkilled_one_stopped_warm_store_every_page_once(make_crawl, tmp_path):
    crawl = make_crawl(broker=f"{REDIS}/{FAULT_DB}")
    crawl.submit()
    killed, stopped, last = (crawl.start_workers() for _ in range(3))  # three node names, one Redis
    crawl.wait_stored(8)
    killed.kill()  # its tasks in flight, and any batch it was writing, come back to the others
    stopped.stop()  # warm: its running tasks finish, and it writes the records that wait
    assert not killed.alive() and not stopped.alive() and last.alive()
    assert crawl.stored() < PAGES
    crawl.wait_drained()
    crawl.assert_exact()
    logs = [(tmp_path / f"w{n}.log").read_text() for n in (1, 2, 3)]
    assert all("crawl.fetch" in log for log in logs)  # each node took part


class AofRedis:
    """A redis-server of the test's own, persisting every write (AOF, fsync always), or
    nothing with ``persist=False`` (a restart then comes back empty)."""

    def __init__(self, directory: Path, *, persist: bool = True) -> None:
        self.dir, self.port, self.persist = directory, free_port(), persist
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> AofRedis:
        self.proc = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--appendonly", "yes" if self.persist else "no", "--appendfsync", "always", "--save", "",
             "--dir", str(self.dir),
             "--maxmemory-policy", "noeviction"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(self.url).ping()
                return self
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)

    def crash(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.mark.slow
@pytest.mark.parametrize("broker", ["redis", "amqp"])
def test_state_redis_down_longer_than_the_retry_budget_loses_no_page_and_no_seed(
        broker, make_crawl, request, tmp_path, site):
    # The state Redis (gate, outstanding sets, counters, store queue) is a server of its
    # own; the broker stays up. The outage (6 s) outlasts the whole retry budget (one
    # run again, 0.1 s backoff) and, on the Redis broker, the hold (half the 4 s
    # visibility timeout), so messages go back to the broker and come again.
    server = AofRedis(tmp_path).start()
    try:
        url = f"{REDIS}/{FAULT_DB}" if broker == "redis" else request.getfixturevalue("amqp_vhost")
        crawl = make_crawl(broker=url, redis_url=server.url, state_max_retries=1, visibility_timeout=4)
        crawl.submit()
        crawl.start_workers()
        crawl.wait_stored(8)
        server.crash()
        # A seed another app sends meanwhile (crawl.submit) is not dropped either.
        seeded = f"seeded-{token()}"
        crawl.rt.app.send_task("crawl.submit", kwargs={"urls": [f"{site.url}/page/{seeded}"],
                                                       "crawl_id": seeded})
        time.sleep(6)
        assert crawl.workers[-1].alive()
        server.start()
        wait_drained(lambda: crawl.rt.stats.read(seeded).get("stored", 0) == 1, timeout=60,
                     workers=crawl.workers[-1])
        crawl.wait_drained()
        stats = crawl.assert_exact()
        assert stats.get("worker_lost", 0) == 0, stats
        print(f"\nstate Redis down 6 s ({broker} broker): {PAGES} pages expected, "
              f"{open_store(crawl.store).count(crawl.crawl_id)} records, stored {stats['stored']}, "
              f"status/200 {stats['status/200']}, errors {stats.get('errors', 0)}, "
              f"duplicates {stats.get('duplicates', 0)}, retries {stats.get('retries', 0)}")
        assert [r.url for r in open_store(crawl.store).records(seeded)] == [f"{site.url}/page/{seeded}"]
        log = "".join((tmp_path / f"w{n}.log").read_text() for n in range(1, len(crawl.workers) + 1))
        # On Redis the hold ran out (the message went back and came again); on RabbitMQ the
        # tasks held their messages all along.
        assert ("message back to the broker" if broker == "redis" else "waiting for it") in log
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.rabbitmq_restart
def test_rabbitmq_restarted_mid_crawl(make_crawl, amqp_vhost):
    crawl = make_crawl(broker=amqp_vhost)
    crawl.submit()
    crawl.start_workers()
    crawl.wait_stored(8)
    with rabbitmq_lock(exclusive=True):  # no other test's RabbitMQ is cut under it
        try:
            rabbitmqctl("stop_app")
            time.sleep(2)
        finally:
            rabbitmqctl("start_app")
    crawl.wait_drained()
    crawl.assert_exact()


@pytest.mark.slow
def test_store_locked_for_8s_mid_crawl_drops_nothing(make_crawl):
    """Longer than a writer's busy wait (5 s) and its first backoff: the records wait and retry."""
    crawl = make_crawl(broker=f"{REDIS}/{FAULT_DB}")
    crawl.submit()
    crawl.start_workers()
    crawl.wait_stored(8)
    locker = sqlite3.connect(crawl.store, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")  # every writer now fails: the store is down
    try:
        time.sleep(8)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    crawl.wait_drained()
    stats = crawl.assert_exact()
    assert stats["store/retries"] >= 1


def test_broker_down_at_submit_is_one_line_and_leaves_no_gate_state(tmp_path):
    flush(FAULT_DB)
    dead = f"redis://127.0.0.1:{free_port()}/0"
    state = redis.Redis.from_url(f"{REDIS}/{FAULT_DB}")
    env = {"CRAWLER_BROKER_URL": dead, "CRAWLER_REDIS_URL": f"{REDIS}/{FAULT_DB}"}
    assert_one_line_error(cli("submit", "http://127.0.0.1:9/a", env=env), 3)
    env["CRAWLER_BROKER_URL"] = f"amqp://guest:guest@127.0.0.1:{free_port()}//"
    assert_one_line_error(cli("submit", "http://127.0.0.1:9/a", env=env), 3)
    assert state.dbsize() == 0

    # submit() from another app: the publish fails after the gate admitted the seeds;
    # the admissions are undone, so a later submit enqueues them again.
    settings = Settings(broker_url=dead, redis_url=f"{REDIS}/{FAULT_DB}", key_prefix=f"down{token()}",
                        **UNTHROTTLED)
    rt = Runtime(settings, create_app(settings))
    with pytest.raises(BrokerUnavailable, match="did not take the seeds"):
        submit_to(rt, ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"], crawl_id="down")
    assert rt.gate.seen_count("down") == 0 and rt.crawls.outstanding("down") == 0
    rt.close()


def test_a_bloom_gate_keeps_seeds_the_broker_did_not_take_and_publishes_them_next_time():
    flush(FAULT_DB)
    dead = f"redis://127.0.0.1:{free_port()}/0"
    settings = Settings(broker_url=dead, redis_url=f"{REDIS}/{FAULT_DB}", key_prefix=f"down{token()}",
                        dedup="bloom", bloom_capacity=1000, **UNTHROTTLED)
    rt = Runtime(settings, create_app(settings))
    seeds = ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]
    with pytest.raises(BrokerUnavailable, match="did not take the seeds"):
        submit_to(rt, seeds, crawl_id="down")
    # A Bloom filter cannot forget: the seeds stay seen, and are kept to publish later.
    assert rt.gate.seen_count("down") == 2 and rt.crawls.outstanding("down") == 0
    assert rt.redis.llen(rt.keys.unpublished("down")) == 2
    with pytest.raises(BrokerUnavailable):  # still no broker: taken back, and kept again
        submit_to(rt, seeds, crawl_id="down")
    assert rt.redis.llen(rt.keys.unpublished("down")) == 2
    rt.close()

    live = settings.replace(broker_url=f"{REDIS}/{FAULT_DB}")
    rt = Runtime(live, create_app(live))
    assert submit_to(rt, ["http://127.0.0.1:9/c"], crawl_id="down") == 3
    assert rt.redis.llen(rt.keys.unpublished("down")) == 0
    assert rt.crawls.outstanding("down") == 3 and rt.stats.read("down")["gate/admitted"] == 3
    rt.close()
    flush(FAULT_DB)
