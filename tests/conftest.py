"""Shared fixtures: a real Redis, a real worker process and the local test site.

The environment is set before crawler_tasks is imported, so the app in this
process and the workers it starts share one configuration. The crawl tests
run on the Redis broker and the workers' default pool; to run them on another
broker or pool, as the README's promises require::

    CRAWLER_TEST_BROKER=amqp://guest:guest@127.0.0.1:5672// pytest
    CRAWLER_WORKER_POOL=prefork pytest
    CRAWLER_DEDUP=bloom CRAWLER_BLOOM_CAPACITY=20000 pytest   # every crawl behind a Bloom gate
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

#: CRAWLER_TEST_REDIS lets a run use a Redis of its own (another port) for everything but RabbitMQ.
REDIS = os.environ.get("CRAWLER_TEST_REDIS", "redis://127.0.0.1:6379")
#: CRAWLER_TEST_DB lets a second run (another checkout's) use its own database.
TEST_DB = int(os.environ.get("CRAWLER_TEST_DB", "13"))
os.environ.update({
    "CRAWLER_BROKER_URL": os.environ.get("CRAWLER_TEST_BROKER", f"{REDIS}/{TEST_DB}"),
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

from crawler_tasks.backends import open_store  # noqa: E402
from crawler_tasks.cli.local import Workers, wait_drained  # noqa: E402
from crawler_tasks.core.addresses import AddressPolicy  # noqa: E402
from crawler_tasks.core.models import PageRecord  # noqa: E402
from crawler_tasks.core.settings import Settings  # noqa: E402
from crawler_tasks.service.celery_app import app as celery_app  # noqa: E402
from crawler_tasks.stages.runtime import Runtime, current  # noqa: E402
from crawler_tasks.stages.seed import build_requests, submit_requests  # noqa: E402

from .polite_site import PoliteSite  # noqa: E402
from .site import Site  # noqa: E402

#: The allowlist that lets the tests reach their local sites (as the env above).
LOOPBACK = ("127.0.0.0/8", "::1", "localhost")
#: Settings for tests that build their own and crawl one local host fast (as the env above).
UNTHROTTLED = {"download_delay": 0.0, "host_concurrency": 0, "robotstxt_obey": False,
               "private_allowlist": LOOPBACK}
#: The address policy of a session that fetches from the local test sites.
LOCAL = AddressPolicy(allowlist=LOOPBACK)


def flush(db: int) -> None:
    redis.Redis.from_url(f"{REDIS}/{db}").flushdb()


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings.from_env()


@pytest.fixture(scope="session")
def rt(settings: Settings) -> Runtime:
    flush(TEST_DB)
    return current(celery_app)


@pytest.fixture
def sites() -> Iterator[list[PoliteSite]]:
    """Politeness test sites (one host each) a test made with ``test_hosts.site``; stopped after it."""
    made: list[PoliteSite] = []
    yield made
    for s in made:
        s.stop()


@pytest.fixture(scope="session")
def site() -> Iterator[Site]:
    s = Site().start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def worker(rt: Runtime, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    w = Workers(settings, concurrency=4, name="tests@%h", log_path=str(log)).start()
    yield w
    w.stop()


def token() -> str:
    return uuid.uuid4().hex[:10]


CrawlFn = Callable[..., list[PageRecord]]


@pytest.fixture
def crawl(rt: Runtime, worker: Workers, tmp_path: Path) -> CrawlFn:
    """crawl(urls, max_depth=None, max_pages=None, **seed_options) -> stored records."""
    store = str(tmp_path / "pages.db")

    def run(urls: list[str] | str, *, max_depth: int | None = None, max_pages: int | None = None,
            timeout: float = 60, **options: object) -> list[PageRecord]:
        crawl_id = options.pop("crawl_id", None) or f"t-{token()}"
        requests = build_requests(urls, crawl_id=crawl_id, **options)
        submit_requests(rt, requests, max_depth=max_depth, max_pages=max_pages, store=store)
        wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=timeout, workers=worker)
        run.crawl_id = crawl_id  # type: ignore[attr-defined]
        return list(open_store(store).records(crawl_id))

    return run


def by_url(records: list[PageRecord]) -> dict[str, PageRecord]:
    return {r.url: r for r in records}
