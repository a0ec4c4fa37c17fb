"""What the tests share besides fixtures: the test environment, set before crawler_tasks is
imported (so the app in the test process and the workers it starts share one configuration),
and small helpers.

The crawl tests run on the Redis broker and the workers' default pool; to run them
on another broker or pool, as the README's promises require::

    CRAWLER_TEST_BROKER=amqp://guest:guest@127.0.0.1:5672// pytest
    CRAWLER_WORKER_POOL=prefork pytest
    CRAWLER_DEDUP=bloom CRAWLER_BLOOM_CAPACITY=20000 pytest   # every crawl behind a Bloom gate
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import redis

#: The pytest-xdist worker this process is ("gw0", "gw1", ...; "" when the suite runs in one process).
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
#: Appended to the names of what the suite's processes share beyond Redis (RabbitMQ vhosts).
SUFFIX = "" if WORKER in ("", "gw0") else f"-{WORKER}"


def _private_redis() -> str:
    """A redis-server of this test process's own (the machine's, as the first process
    uses), stopped when the process ends: each parallel worker but the first crawls on
    one of its own, databases and all."""
    from crawler_tasks.cli.local import EmbeddedRedis  # reads no setting

    server = EmbeddedRedis(binary="redis-server").start()
    atexit.register(server.stop)
    return f"redis://127.0.0.1:{server.port}"


def _own_vhost(url: str) -> str:
    """``url`` (an AMQP broker) on a vhost of this test process's own, created when missing:
    the parallel processes' workers must not take each other's messages."""
    vhost = f"crawlertest{SUFFIX}"
    subprocess.run(["rabbitmqctl", "-q", "add_vhost", vhost], capture_output=True, timeout=120)
    subprocess.run(["rabbitmqctl", "-q", "set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"],
                   check=True, capture_output=True, timeout=120)
    return urlunsplit(urlsplit(url)._replace(path=f"/{vhost}"))


#: CRAWLER_TEST_REDIS lets a run use a Redis of its own (another port) for everything but RabbitMQ;
#: a parallel worker but the first starts its own.
REDIS = os.environ.get("CRAWLER_TEST_REDIS") or (_private_redis() if SUFFIX else "redis://127.0.0.1:6379")
#: CRAWLER_TEST_DB lets a second run (another checkout's) use its own database.
TEST_DB = int(os.environ.get("CRAWLER_TEST_DB", "13"))
#: CRAWLER_TEST_BROKER runs the crawl tests on another broker (RabbitMQ: a vhost per process).
BROKER = os.environ.get("CRAWLER_TEST_BROKER") or f"{REDIS}/{TEST_DB}"
if BROKER.startswith("amqp") and SUFFIX:
    BROKER = _own_vhost(BROKER)
os.environ.update({
    "CRAWLER_BROKER_URL": BROKER,
    "CRAWLER_REDIS_URL": f"{REDIS}/{TEST_DB}",
    "CRAWLER_KEY_PREFIX": "crawlertest",
    "CRAWLER_DOWNLOAD_TIMEOUT": "1",
    "CRAWLER_RETRY_BACKOFF": "0.1",
    "CRAWLER_DOWNLOAD_MAXSIZE": str(1024 * 1024),
    "CRAWLER_VISIBILITY_TIMEOUT": "60",
    "CRAWLER_RETRY_BACKOFF_MAX": "5",
    "CRAWLER_ALLOWED_DOMAINS": "",
    "CRAWLER_MAX_DEPTH": "0",
    # A crawl ends once its last records are written: do not wait a second for a batch.
    "CRAWLER_STORE_FLUSH_S": "0.2",
    # Politeness has tests of its own (tests/test_hosts.py, tests/test_robots.py); the rest
    # crawl one local host fast, with the limiter in the path but never holding them back.
    "CRAWLER_DOWNLOAD_DELAY": "0",
    "CRAWLER_HOST_CONCURRENCY": "0",
    "CRAWLER_ROBOTSTXT_OBEY": "0",
    # Task events ("auto" by default: on while a monitor listens) cost a crawl about 15 % of its CPU; the tests
    # that watch a crawl in Flower turn them on.
    "CRAWLER_TASK_EVENTS": "0",
    # Every test site is on loopback, which the private-network guard refuses by default.
    "CRAWLER_PRIVATE_ALLOWLIST": "127.0.0.0/8,::1,localhost",
})

from crawler_tasks.core.addresses import AddressPolicy  # noqa: E402
from crawler_tasks.core.models import PageRecord  # noqa: E402

#: The allowlist that lets the tests reach their local sites (as the env above).
LOOPBACK = ("127.0.0.0/8", "::1", "localhost")
#: Settings for tests that build their own and crawl one local host fast (as the env above).
UNTHROTTLED = {"download_delay": 0.0, "host_concurrency": 0, "robotstxt_obey": False,
               "private_allowlist": LOOPBACK}
#: The address policy of a session that fetches from the local test sites.
LOCAL = AddressPolicy(allowlist=LOOPBACK)


def flush(db: int) -> None:
    """Empty Redis database ``db`` of the test Redis."""
    redis.Redis.from_url(f"{REDIS}/{db}").flushdb()


def token() -> str:
    """A short random name: a crawl id or a path no other test uses."""
    return uuid.uuid4().hex[:10]


def by_url(records: list[PageRecord]) -> dict[str, PageRecord]:
    """``records`` by URL."""
    return {r.url: r for r in records}


#: The lock the parallel test processes (and two suites at once) share RabbitMQ by.
RABBITMQ_LOCK = os.path.join(tempfile.gettempdir(), "crawler-tasks-tests-rabbitmq.lock")


@contextlib.contextmanager
def rabbitmq_lock(*, exclusive: bool) -> Iterator[None]:
    """RabbitMQ as the test processes share it: a test that uses it holds it shared, the one
    that stops and starts it holds it alone (its restart would cut the others' connections)."""
    with open(RABBITMQ_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
