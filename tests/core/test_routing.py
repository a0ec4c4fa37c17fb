"""The routing table and the broker configuration every process must share."""

from __future__ import annotations

import pytest

from crawler_tasks.broker import lists
from crawler_tasks.core import routing
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import celery_config, create_app
from tests.helpers import REDIS

REDIS_SETTINGS = Settings(broker_url=f"{REDIS}/13")
AMQP_SETTINGS = Settings(broker_url="amqp://guest:guest@127.0.0.1:5672//")


def test_every_crawl_task_has_a_route_to_a_declared_queue():
    app = create_app(REDIS_SETTINGS)
    app.loader.import_default_modules()
    tasks = {name for name in app.tasks if name.startswith("crawl.")}
    declared = {q.name for q in app.conf.task_queues}
    assert tasks == set(routing.ROUTES)
    # Every declared queue but Celery's default (what apps with only the broker URL send
    # to) is a route's.
    assert {route["queue"] for route in routing.ROUTES.values()} == declared - {routing.DEFAULT_QUEUE}


def test_crawl_queues_are_priority_queues_and_the_default_queue_is_plain():
    # A plain Celery app declares ``celery`` with no arguments: declaring it otherwise on
    # RabbitMQ would make one of the two declarations fail.
    args = {q.name: q.queue_arguments for q in routing.queues()}
    assert args.pop(routing.DEFAULT_QUEUE) is None
    assert all(a == {"x-max-priority": routing.MAX_BAND} for a in args.values())


def test_messages_are_json_only():
    config = celery_config(REDIS_SETTINGS)
    assert config["accept_content"] == ["json"] and config["task_serializer"] == "json"
    assert "pickle" not in config["result_accept_content"]


@pytest.mark.parametrize("priority,band", [(0, 5), (2, 7), (-1, 4), (-2, 3), (40, 9), (-40, 0)])
def test_crawl_priority_maps_to_a_band(priority, band):
    assert routing.band(priority) == band


def test_higher_priority_is_served_first_on_both_brokers():
    # Redis serves the lowest number first, RabbitMQ the highest.
    assert routing.broker_priority(2, redis=True) < routing.broker_priority(0, redis=True) \
        < routing.broker_priority(-1, redis=True)
    assert routing.broker_priority(2, redis=False) > routing.broker_priority(0, redis=False) \
        > routing.broker_priority(-1, redis=False)


@pytest.mark.parametrize("settings", [REDIS_SETTINGS, AMQP_SETTINGS])
def test_a_message_without_priority_lands_in_the_normal_band(settings):
    config = celery_config(settings)
    assert config["task_default_priority"] == routing.broker_priority(0, redis=settings.broker_is_redis)


def test_redis_transport_keeps_one_list_per_band_and_strict_order():
    options = celery_config(REDIS_SETTINGS)["broker_transport_options"]
    assert options["priority_steps"] == list(range(10))
    assert options["sep"] == lists.BAND_SEP and options["queue_order_strategy"] == "priority"
    assert all(lists.BAND_SEP not in q for q in routing.QUEUE_ORDER)


def test_late_acks_and_prefetch_one_keep_dispatch_in_priority_order():
    config = celery_config(REDIS_SETTINGS)
    assert config["task_acks_late"] and config["worker_prefetch_multiplier"] == 1
    assert config["task_retry_on_worker_lost"] and not config["task_reject_on_worker_lost"]


def test_small_visibility_timeout_gets_a_fast_restore_sweep():
    options = celery_config(Settings(visibility_timeout=20, retry_backoff_max=10))["broker_transport_options"]
    sweep = options["unacked_restore_interval"] * options["unacked_restore_throttle"]
    assert options["visibility_timeout"] + sweep <= 60


def test_a_producer_still_delivers_after_the_redis_broker_lost_its_bindings():
    import redis

    settings = Settings(broker_url=f"{REDIS}/8")
    client = redis.Redis.from_url(settings.broker_url)
    client.flushdb()
    app = create_app(settings)
    for _ in range(2):  # the second send reuses the producer that declared the queue once
        app.send_task(routing.FETCH_TASK, args=[{"url": "http://127.0.0.1:9/"}],
                      **routing.ROUTES[routing.FETCH_TASK],
                      priority=routing.broker_priority(0, redis=True))
        for key in client.keys("_kombu.binding*"):  # what a Redis restart without AOF does
            client.delete(key)
    assert client.llen(lists.redis_list(routing.FETCH_QUEUE, 4)) == 2
    client.flushdb()
