"""Past one Redis: the state Redis may be a Redis Cluster (three masters on loopback here).

Every per-crawl key carries the crawl id as a hash tag, so the gate's single
Lua call stays on one slot; different crawls spread over the masters.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.helpers import REDIS, flush, token

CLUSTER_BROKER_DB = 7
REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")

pytestmark = pytest.mark.skipif(not (REDIS_SERVER and REDIS_CLI),
                                reason="redis-server and redis-cli are needed to start a cluster")


@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Three master nodes with no replicas, created with ``redis-cli --cluster create``."""
    root = tmp_path_factory.mktemp("cluster")
    ports = cluster_ports(3)
    procs = [subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
         "--cluster-config-file", str(root / f"nodes-{port}.conf"), "--save", "",
         "--appendonly", "no", "--dir", str(root), "--loglevel", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for port in ports]
    try:
        for port in ports:
            _wait(lambda p=port: redis.Redis(port=p).ping())
        subprocess.run([REDIS_CLI, "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
                        "--cluster-replicas", "0", "--cluster-yes"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        _wait(lambda: all(redis.Redis(port=p).cluster("info")["cluster_state"] == "ok"
                          for p in ports))
        yield f"redis+cluster://127.0.0.1:{ports[0]}"
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


def cluster_ports(n: int) -> list[int]:
    """Free ports below 55536 whose cluster-bus port (+10000) is free too."""
    ports: list[int] = []
    for port in range(21000 + random.randrange(0, 4000), 30000):
        if len(ports) == n:
            break
        try:
            for p in (port, port + 10000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", p))
        except OSError:
            continue
        ports.append(port)
    return ports


def _wait(check, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("the Redis Cluster did not come up")
        time.sleep(0.1)


def test_a_crawl_with_its_state_on_a_redis_cluster_stores_every_page_once(cluster_url, site,
                                                                          tmp_path: Path):
    flush(CLUSTER_BROKER_DB)
    settings = Settings.from_env(broker_url=f"{REDIS}/{CLUSTER_BROKER_DB}", redis_url=cluster_url,
                                 key_prefix=f"cl{token()}", store=str(tmp_path / "pages.db"),
                                 robotstxt_obey=True)  # robots.txt state kept on the cluster too
    rt = Runtime(settings, create_app(settings))
    assert isinstance(rt.redis, RedisCluster)
    t, pages = token(), 30
    crawls = [f"a{t}", f"b{t}", f"c{t}", f"d{t}"]
    for crawl_id in crawls:
        submit_requests(rt, build_requests(f"{site.url}/tree/{t}{crawl_id}/0?size={pages}",
                                           crawl_id=crawl_id))
    submit_requests(rt, build_requests(f"{site.url}/tree/{t}a{t}/0?size={pages}",
                                       crawl_id=crawls[0]))  # seen: refused by the gate
    workers = Workers(settings, name=f"cl{t}@%h", concurrency=8,
                      log_path=str(tmp_path / "worker.log")).start()
    try:
        wait_drained(lambda: all(rt.crawls.outstanding(c) == 0 for c in crawls), timeout=60,
                     workers=workers)
    finally:
        workers.stop()
    store = open_store(settings.store)
    for crawl_id in crawls:
        urls = [r.url for r in store.records(crawl_id)]
        assert len(urls) == len(set(urls)) == pages
        assert rt.stats.read(crawl_id)["stored"] == pages
    assert rt.stats.read(crawls[0])["duplicates"] >= 1
    assert rt.keys.gate_shards == 16  # the default on a cluster
    for crawl_id in crawls:  # each crawl's gate spreads over every master
        shards = [rt.keys.seen(crawl_id, k) for k in range(16)]
        assert len({rt.redis.get_node_from_key(key).port for key in shards}) == 3
        assert sum(int(rt.redis.scard(key)) for key in shards) == pages
        assert sum(1 for key in shards if rt.redis.scard(key)) > 8
    assert rt.robots.state_of(site.url.split("://", 1)[1]) == "allow"  # the site has none: 404
    rt.close()


def test_every_master_s_pool_is_the_lean_pool(cluster_url):
    from crawler_tasks.state.connection import redis_from_url
    from crawler_tasks.state.pool import LeanPool

    client = redis_from_url(cluster_url)
    nodes = client.get_nodes()
    assert len(nodes) == 3
    assert all(isinstance(n.redis_connection.connection_pool, LeanPool) for n in nodes)
    client.close()


def test_node_pipelines_and_scripts_answer_in_order_and_follow_a_moved_slot(cluster_url):
    from crawler_tasks.state.connection import redis_from_url
    from crawler_tasks.state.round_trip import NodePipeline, pipeline
    from crawler_tasks.state.scripts import NodeScript

    client = redis_from_url(cluster_url)
    keys = [f"np{token()}:{{t{n}}}" for n in range(12)]  # tags on every master
    assert len({client.get_node_from_key(k).name for k in keys}) == 3
    pipe = pipeline(client)
    assert isinstance(pipe, NodePipeline)
    for n, key in enumerate(keys):
        pipe.sadd(key, n, n + 100)
    for key in keys:
        pipe.srem(key, 111)  # only the last key holds it
    assert pipe.execute() == [2] * 12 + [0] * 11 + [1]
    with pipeline(client) as pipe:
        for n, key in enumerate(keys):
            pipe.smismember(key, [n, n + 100])
        assert pipe.execute() == [[1, 1] for _ in range(11)] + [[1, 0]]
    scard = NodeScript(client, client.register_script("return redis.call('SCARD', KEYS[1])"))
    assert [scard(keys=[k]) for k in keys] == [2] * 11 + [1]
    # A stale view of the slots sends a key to a master that does not serve it; its MOVED
    # answer sends the command again through the cluster client.
    other = next(n for n in client.get_nodes() if n.name != client.get_node_from_key(keys[0]).name)
    real = client.get_node_from_key
    client.get_node_from_key = lambda key, *a, **kw: other
    try:
        assert NodePipeline(client).scard(keys[0]).execute() == [2]
        assert scard(keys=[keys[0]]) == 2
    finally:
        client.get_node_from_key = real
    for key in keys:
        client.delete(key)
    client.close()


def test_the_store_queue_gives_back_a_dead_workers_batch_on_a_redis_cluster(cluster_url, tmp_path):
    from crawler_tasks.stages.dispatcher import flush_once
    from tests.state.test_store_queue import finish_pages

    settings = Settings.from_env(broker_url=f"{REDIS}/{CLUSTER_BROKER_DB}", redis_url=cluster_url,
                                 key_prefix=f"cq{token()}", store=str(tmp_path / "pages.db"),
                                 store_lease_s=0.5)
    rt = Runtime(settings, create_app(settings))
    try:
        finish_pages(rt, 5)
        assert rt.keys.store_shards == 16  # the default on a cluster
        dead = rt.store_queue.writer()
        assert len(rt.store_queue.take(dead, 5, 1.0, 0.5, now=True)) == 5  # then SIGKILLed
        time.sleep(0.6)
        assert flush_once(rt, rt.store_queue.writer()) == 5
        assert rt.stats.read("c1")["stored"] == 5 and rt.crawls.outstanding("c1") == 0
        assert len(list(open_store(settings.store).records("c1"))) == 5
    finally:
        rt.close()


def test_purge_removes_each_crawl_s_keys_from_the_cluster_and_nothing_else(cluster_url, tmp_path):
    flush(CLUSTER_BROKER_DB)
    settings = Settings.from_env(broker_url=f"{REDIS}/{CLUSTER_BROKER_DB}", redis_url=cluster_url,
                                 key_prefix=f"cp{token()}", store=str(tmp_path / "pages.db"),
                                 dedup="bloom", bloom_capacity=10_000)
    rt = Runtime(settings, create_app(settings))
    try:
        stem = rt.keys.crawl_stem

        def node(crawl_id: str) -> int:
            return rt.redis.get_node_from_key(stem(crawl_id)).port

        def keys_of(crawl_id: str) -> list[bytes]:  # its own keys and its gate shards'
            stems = {stem(crawl_id), *rt.keys.gate_stems(crawl_id)}
            return sorted(k for s in stems for k in rt.redis.scan_iter(match=f"{s}*"))

        crawls = [f"p{i}{token()}" for i in range(4)]
        while len({node(c) for c in crawls}) == 1:  # the test needs crawls on two masters at least
            crawls[-1] = f"p3{token()}"
        for crawl_id in crawls:  # gated and queued: a Bloom filter, stats, config, outstanding
            submit_requests(rt, build_requests([f"http://127.0.0.1:9/{crawl_id}/{i}" for i in range(3)],
                                               crawl_id=crawl_id))
        before = {c: keys_of(c) for c in crawls}
        assert all(len(keys) >= 4 for keys in before.values())
        for crawl_id in crawls[:2]:
            assert rt.crawls.purge(crawl_id) == len(before[crawl_id])
        after = {c: keys_of(c) for c in crawls}
        assert after[crawls[0]] == after[crawls[1]] == []
        assert after[crawls[2]] == before[crawls[2]]
        assert rt.crawls.all_ids() == sorted(crawls[2:])
    finally:
        rt.close()


def test_keys_the_scripts_name_themselves_stay_in_their_slot_on_a_redis_cluster(cluster_url, tmp_path,
                                                                               monkeypatch):
    """A Bloom gate's generations and strings, and the host keys of the mover, are named in Lua
    (from Python's templates): a name out of the slot of the script's KEYS would fail here."""
    from crawler_tasks.core.models import CrawlRequest
    from crawler_tasks.state import hosts
    from crawler_tasks.state.gate import Candidate

    monkeypatch.setattr(hosts, "MOVE_LEASE_S", 0.2)
    settings = Settings.from_env(broker_url=f"{REDIS}/{CLUSTER_BROKER_DB}", redis_url=cluster_url,
                                 key_prefix=f"cs{token()}", store=str(tmp_path / "pages.db"),
                                 dedup="bloom", bloom_capacity=1000, recrawl_after=1000,
                                 download_delay=0, host_concurrency=1)
    rt = Runtime(settings, create_app(settings))
    try:
        fps = [f"{i:040x}" for i in range(20)]
        assert all(rt.gate.admit("g", [Candidate(fp, f"t{i}") for i, fp in enumerate(fps)]))
        assert not any(rt.gate.admit("g", [Candidate(fp, f"u{i}") for i, fp in enumerate(fps)]))
        stem = rt.keys.bloom("g")
        assert rt.redis.exists(rt.gate.seen.stems("g")[0])
        assert len(list(rt.redis.scan_iter(match=f"{stem}:*"))) >= 2  # a generation, its bits

        host = "example.test:80"
        shard = rt.keys.host_shard(host)
        assert rt.hosts.shards == 16  # the politeness state's default shards on a cluster
        rt.hosts.park(host, "t-a", CrawlRequest("http://example.test/a"), 0)
        assert [m.task_id for m in rt.hosts.take_due(shard)[0]] == ["t-a"]
        time.sleep(0.3)  # the mover died: the fetch goes back to its host's waiting room
        rt.redis.delete(rt.keys.host_slots(host))
        assert [m.task_id for m in rt.hosts.take_due(shard)[0]] == ["t-a"]
        assert rt.redis.zscore(rt.keys.host_slots(host), "t-a")
    finally:
        rt.close()


def test_a_polite_crawl_spreads_its_hosts_over_the_shards_and_keeps_every_rule(cluster_url, tmp_path):
    """The defaults on (robots.txt obeyed, two requests per host, the guard), the delay
    shortened: the politeness state in its 16 shards on the cluster's masters."""
    from crawler_tasks.core import counters
    from tests.fakes.realweb import RealWeb
    from tests.holds import assert_nothing_held
    from tests.system.test_realweb import defaults

    flush(CLUSTER_BROKER_DB)
    settings = defaults(tmp_path, broker_url=f"{REDIS}/{CLUSTER_BROKER_DB}", redis_url=cluster_url)
    rt = Runtime(settings, create_app(settings))
    web = RealWeb(hosts=6, first_ip=110).start()
    workers = Workers(settings, processes=2, concurrency=8, name=f"cw{token()}@%h",
                      log_path=str(tmp_path / "workers.log")).start()
    try:
        crawl_id = f"w{token()}"
        submit_requests(rt, build_requests(web.seeds, crawl_id=crawl_id), store=settings.store)
        wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=90, workers=workers)
        web.assert_crawled_politely([r.url for r in open_store(settings.store).records(crawl_id)],
                                    rt.stats.read(crawl_id).get(counters.ROBOTS_DISALLOWED, 0))
        assert_nothing_held(rt, web.hosts)
        for host in web.hosts:  # each host's keys on the master of its shard's tag
            assert rt.redis.exists(rt.keys.host(host), rt.keys.robots(f"http://{host}")) == 2
        assert sum(h.deferred for h in rt.hosts.busiest(10)) > 0  # fetches did wait in the rooms
        assert rt.hosts.waiting_by_crawl() == {}
    finally:
        workers.stop()
        web.stop()
        rt.close()
