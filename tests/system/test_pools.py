"""A deployment with a pool per stage: fetch, parse and store nodes apart, on one Redis.

Each node is a plain ``celery -A crawler_tasks worker -Q ...``: fetch nodes serve
``crawl.fetch`` (and the seeds), parse nodes ``crawl.parse`` (the split pipeline),
store nodes ``crawl.store``. The crawl ends with every page stored once, and each
node ran only its own stage's tasks: only the store node wrote to the store.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import uuid

import pytest

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import Workers
from crawler_tasks.core import routing
from crawler_tasks.core.settings import Settings
from tests.helpers import REDIS
from tests.system.test_reliability import FAULT_DB, make_crawl  # noqa: F401  (the fixture)

GEVENT = importlib.util.find_spec("gevent") is not None


def tasks_run(log: str) -> set[str]:
    """The names of the tasks a worker's log shows it ran (a fetch by its own response line,
    which stands in for Celery's)."""
    ran = set(re.findall(r"Task (crawl\.[a-z_]+)\[[^\]]+\] succeeded", log))
    return ran | ({routing.FETCH_TASK} if re.search(r"\] fetched \d{3} GET ", log) else set())


@pytest.mark.slow
@pytest.mark.parametrize("fetch_pool", ["threads", pytest.param("gevent", marks=pytest.mark.skipif(
    not GEVENT, reason="gevent is not installed"))])
def test_fetch_parse_and_store_nodes_apart_store_every_page_once(make_crawl, tmp_path, fetch_pool):  # noqa: F811
    crawl = make_crawl(broker=f"{REDIS}/{FAULT_DB}", pipeline="split")
    nodes = {
        "fetch": ((routing.FETCH_QUEUE, routing.SEED_QUEUE), fetch_pool, 16),
        "parse": ((routing.PARSE_QUEUE,), "prefork", 2),
        "store": ((routing.STORE_QUEUE,), "threads", 2),
    }
    for role, (queues, pool, concurrency) in nodes.items():
        crawl.workers.append(Workers(crawl.settings, name=f"{role}-{crawl.crawl_id}@%h", queues=queues,
                                     pool=pool, concurrency=concurrency, loglevel="INFO",
                                     log_path=str(tmp_path / f"{role}.log")).start())
    crawl.submit()
    crawl.wait_drained(timeout=120)
    crawl.assert_exact()
    ran = {role: tasks_run((tmp_path / f"{role}.log").read_text()) for role in nodes}
    assert ran == {"fetch": {routing.FETCH_TASK}, "parse": {routing.PARSE_TASK},
                   "store": {routing.STORE_BATCH_TASK}}, ran
    # One line per fetch: the crawler's own (``fetched 200 GET ...``), not Celery's as well.
    assert not re.search(r"Task crawl\.fetch\[[^\]]+\] succeeded", (tmp_path / "fetch.log").read_text())
    # -P prefork runs prefork although CRAWLER_WORKER_POOL says threads (Celery would let it win).
    assert "ForkPoolWorker" in (tmp_path / "parse.log").read_text()
    assert "ForkPoolWorker" not in (tmp_path / "store.log").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("pool", ["threads", pytest.param("gevent", marks=pytest.mark.skipif(
    not GEVENT, reason="gevent is not installed")), "prefork", "solo"])
def test_a_crawl_runs_to_the_end_on_each_pool_at_its_default_concurrency(site, tmp_path, pool):
    """``CRAWLER_WORKER_POOL=<pool> crawler-tasks crawl`` on the embedded Redis, as a user runs it."""
    store, pages = tmp_path / "pages.db", 20
    env = {**os.environ, "CRAWLER_WORKER_POOL": pool, "CRAWLER_REDIS_URL": "", "CRAWLER_BROKER_URL": ""}
    env.pop("CRAWLER_WORKER_CONCURRENCY", None)
    assert Workers(Settings.from_env(env), name="w@%h").cmds[0][6:10] == \
        ["-P", pool, "-c", str({"threads": 128, "gevent": 256, "prefork": os.cpu_count(), "solo": 1}[pool])]
    done = subprocess.run([sys.executable, "-m", "crawler_tasks.cli.main", "crawl",
                           f"{site.url}/tree/{uuid.uuid4().hex[:8]}/0?size={pages}", "--store", str(store),
                           "--workers", "1", "--quiet", "--embedded-redis"], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    urls = [r.url for r in open_store(str(store)).records()]
    assert len(urls) == len(set(urls)) == pages
