"""Strict, observable fetch order on both brokers: promoted first, demoted last."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest
import redis
from kombu import Connection

from crawler_tasks.broker.queues import queue_depths
from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.helpers import REDIS, SUFFIX, UNTHROTTLED, token

ORDER_DB = int(os.environ.get("CRAWLER_ORDER_TEST_DB", "5"))  # of its own: test files run side by side
#: Its own vhost on RabbitMQ, so the suite's shared worker (on "/" when the suite runs on
#: RabbitMQ) never takes this test's fetches.
ORDER_VHOST = f"crawlerorder{SUFFIX}"
BROKERS = {"redis": f"{REDIS}/{ORDER_DB}", "amqp": f"amqp://guest:guest@127.0.0.1:5672/{ORDER_VHOST}"}


def ensure_vhost(url: str) -> None:
    """Create the RabbitMQ vhost of ``url`` when it is missing."""
    try:
        with Connection(url, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
            return
    except Exception:
        pass
    for args in (["add_vhost", ORDER_VHOST], ["set_permissions", "-p", ORDER_VHOST, "guest", ".*", ".*", ".*"]):
        subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=120)


def fresh_queues(app, settings: Settings) -> None:
    """Empty queues declared with this app's arguments (x-max-priority on RabbitMQ)."""
    if settings.broker_is_redis:
        redis.Redis.from_url(settings.broker_url).flushdb()
        return
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in app.amqp.queues.values():
            channel.queue_delete(queue.name)
            queue.bind(channel).declare()


@pytest.fixture(params=sorted(BROKERS))
def cluster(request, tmp_path) -> Iterator[tuple[Runtime, Settings]]:
    settings = Settings(broker_url=BROKERS[request.param], redis_url=f"{REDIS}/{ORDER_DB}",
                        key_prefix=f"order{token()}", retry_backoff=0.1, download_timeout=5,
                        store=str(tmp_path / "pages.db"), **UNTHROTTLED)
    if not settings.broker_is_redis:
        ensure_vhost(settings.broker_url)
    app = create_app(settings)
    fresh_queues(app, settings)
    rt = Runtime(settings, app)
    yield rt, settings
    rt.close()


def test_promoted_fetches_go_first_and_demoted_last_under_a_backlog(cluster, site, tmp_path):
    rt, settings = cluster
    t = token()
    page = f"{site.url}/page/{t}"
    plan = [  # (url, priority), submitted in this order before any worker runs
        (f"{page}-n1", 0), (f"{page}-d1", -1), (f"{page}-p1", 2), (f"{page}-n2", 0),
        (f"{site.url}/flaky/{t}", 0), (f"{page}-d2", -1), (f"{page}-p2", 2),
        (f"{site.url}/redirect/{t}/1", 0), (f"{page}-n3", 0),
    ]
    for url, priority in plan:
        submit_requests(rt, build_requests(url, priority=priority, crawl_id=f"o{t}"))

    if settings.broker_is_redis:
        fetch = queue_depths(rt.app, settings)["crawl.fetch"]
        assert (fetch["band 7"], fetch["band 5"], fetch["band 4"], fetch["total"]) == (2, 5, 2, 9)

    workers = Workers(settings, concurrency=1, name=f"order{t}@%h",
                      log_path=str(tmp_path / "worker.log")).start()
    try:
        wait_drained(lambda: rt.crawls.outstanding(f"o{t}") == 0, timeout=60, workers=workers)
    finally:
        workers.stop()
    fetched = ["flaky" if "/flaky/" in p else p.rsplit("/", 1)[-1].replace(f"{t}-", "")
               for p in site.paths() if t in p]
    assert fetched == [
        "p1", "p2",                        # promoted (+2) before the backlog
        "n1", "n2", "flaky", "1", "0",     # normal band in FIFO order; the redirect
        "n3",                              # target "0" (+2) jumps ahead of n3
        "d1", "d2",                        # demoted (-1) after the backlog
        "flaky",                           # first retry (-1): behind d1, d2
        "flaky",                           # second retry (-2): last
    ]
