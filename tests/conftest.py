"""Shared fixtures: a real Redis, a real worker process and the local test site.

The test environment (and the helpers tests import) is :mod:`tests.helpers`, imported
first so that it is set before crawler_tasks is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# isort: off
from tests.helpers import TEST_DB, flush, rabbitmq_lock, token  # first: the test environment
# isort: on

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.core.models import PageRecord
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import app as celery_app
from crawler_tasks.stages.runtime import Runtime, current
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.fakes.polite_site import PoliteSite
from tests.fakes.site import Site


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that use RabbitMQ: a vhost of their own, or an ``amqp`` parameter."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        uses = "amqp_vhost" in getattr(item, "fixturenames", ()) or "amqp" in list(params.values())
        if uses and item.get_closest_marker("rabbitmq_restart") is None:
            item.add_marker(pytest.mark.rabbitmq)


@pytest.fixture(autouse=True)
def _rabbitmq_shared(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked ``rabbitmq`` holds RabbitMQ shared, so none restarts it under the test."""
    if request.node.get_closest_marker("rabbitmq") is None:
        yield
        return
    with rabbitmq_lock(exclusive=False):
        yield


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
