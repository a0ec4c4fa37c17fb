"""Fetch messages written straight onto the bands of a Redis broker: read back by kombu as
Celery's own, in band order, at 40 % of their size."""

from __future__ import annotations

import orjson
import redis

from crawler_tasks.broker.fetch_queue import FetchQueue
from crawler_tasks.core import routing
from crawler_tasks.core.models import CrawlRequest
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from tests.helpers import REDIS, flush

#: A database no worker of the suite consumes from.
DB = 12


def settings(**over: str) -> Settings:
    return Settings.from_env(**{"broker_url": f"{REDIS}/{DB}", "redis_url": f"{REDIS}/{DB}", **over})


def test_messages_are_read_back_by_kombu_in_band_order_with_their_request_and_task_id():
    flush(DB)
    s = settings()
    client = redis.Redis.from_url(s.redis_url)
    queue = FetchQueue.of(s, client)
    assert queue is not None and queue.shared
    fetches = [(CrawlRequest(url=f"http://a.test/{p}", crawl_id="c1", priority=p), f"task{p}") for p in (-1, 3, 0, 3)]
    queue.push(fetches)
    # One list per band, as send_task writes them (a band of 8 is Redis priority 1), and one
    # token for a worker waiting on the queue.
    assert {k.decode(): client.llen(k) for k in client.keys("crawl.fetch*") if client.type(k) == b"list"} == \
        {"crawl.fetch:5": 1, "crawl.fetch:1": 2, "crawl.fetch:4": 1, "crawl.fetch:wake": 1}
    app = create_app(s)
    with app.connection_for_read() as conn:
        channel = conn.default_channel
        taken = []
        while (message := channel.basic_get(routing.FETCH_QUEUE)) is not None:
            args, kwargs, _embed = message.decode()
            taken.append((message.headers["id"], message.headers["task"], args[0]["url"], message.headers["argsrepr"],
                          message.headers[routing.TRACKED_HEADER]))
            message.ack()
    assert taken == [  # higher band first; within a band, in the order pushed
        ("task3", "crawl.fetch", "http://a.test/3", "['http://a.test/3']", 1),
        ("task3", "crawl.fetch", "http://a.test/3", "['http://a.test/3']", 1),
        ("task0", "crawl.fetch", "http://a.test/0", "['http://a.test/0']", 1),
        ("task-1", "crawl.fetch", "http://a.test/-1", "['http://a.test/-1']", 1),
    ]
    assert client.hlen("unacked") == 0


def test_requests_to_render_go_onto_the_bands_of_the_render_queue():
    flush(DB)
    s = settings()
    client = redis.Redis.from_url(s.redis_url)
    queue = FetchQueue.of(s, client)
    assert queue is not None
    queue.push([(CrawlRequest(url=f"http://a.test/r{p}", crawl_id="c1", priority=p, render=True), f"r{p}")
                for p in (0, 2, -1)] + [(CrawlRequest(url="http://a.test/plain", crawl_id="c1"), "plain")])
    assert {k.decode(): client.llen(k) for k in client.keys("crawl.*") if client.type(k) == b"list"} == \
        {"crawl.render:4": 1, "crawl.render:2": 1, "crawl.render:5": 1, "crawl.fetch:4": 1,
         "crawl.render:wake": 1, "crawl.fetch:wake": 1}
    with create_app(s).connection_for_read() as conn:
        channel = conn.default_channel
        taken = []
        while (message := channel.basic_get(routing.RENDER_QUEUE)) is not None:
            taken.append((message.headers["id"], message.headers["task"], message.decode()[0][0]))
            message.ack()
    assert taken == [("r2", "crawl.render", {"url": "http://a.test/r2", "crawl_id": "c1", "priority": 2, "render": True}),
                     ("r0", "crawl.render", {"url": "http://a.test/r0", "crawl_id": "c1", "render": True}),
                     ("r-1", "crawl.render", {"url": "http://a.test/r-1", "crawl_id": "c1", "priority": -1,
                                              "render": True})]


def test_a_message_is_under_half_what_send_task_writes():
    flush(DB)
    s = settings()
    client = redis.Redis.from_url(s.redis_url)
    request = CrawlRequest(url="http://127.0.0.1:8000/p/12", crawl_id="abc", depth=2)
    FetchQueue.of(s, client).push([(request, "t" * 25)])
    [ours] = client.lrange("crawl.fetch:4", 0, -1)
    flush(DB)
    create_app(s).send_task(routing.FETCH_TASK, args=[request.to_dict()], task_id="t" * 25,
                            queue=routing.FETCH_QUEUE, priority=4, argsrepr=repr([request.url]),
                            kwargsrepr=repr({"crawl": request.crawl_id}),
                            headers={routing.TRACKED_HEADER: 1})
    [celery] = client.lrange("crawl.fetch:4", 0, -1)
    assert len(ours) * 2.3 < len(celery), (len(ours), len(celery))  # 473 against 1,135 bytes
    message = orjson.loads(ours)
    assert "body_encoding" not in message["properties"]  # the body is plain JSON
    assert orjson.loads(message["body"]) == [[request.to_dict()], {}, {}]


def test_the_fetch_queue_is_the_state_s_only_when_both_urls_are_one():
    client = redis.Redis.from_url(f"{REDIS}/{DB}")
    assert FetchQueue.of(settings(), client).shared
    other = FetchQueue.of(settings(redis_url=f"{REDIS}/{DB - 1}"), client)
    assert other is not None and not other.shared and other.redis is not client
    other.redis.close()
    assert FetchQueue.of(settings(broker_url="amqp://guest:guest@127.0.0.1:5672//"), client) is None
