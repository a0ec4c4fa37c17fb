"""The Redis transport: one list per band for crawl.fetch only, plain acks, and kombu's own
behaviour for any other app in the process."""

from __future__ import annotations

import contextlib
import os
import socket
import time

import pytest
import redis
from celery import Celery

from crawler_tasks.broker import acks, transport
from crawler_tasks.broker.lists import wake_list
from crawler_tasks.broker.queues import monitor_listening
from crawler_tasks.core import routing
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from tests.helpers import REDIS, flush

#: A database no worker of the suite consumes from.
DB = 12


def settings() -> Settings:
    return Settings.from_env(broker_url=f"{REDIS}/{DB}", redis_url=f"{REDIS}/{DB}")


def lists(client: redis.Redis) -> dict[str, int]:
    """The queue lists (not the wake lists) and their lengths."""
    return {k.decode(): client.llen(k) for k in client.keys("crawl.*") + client.keys("mine*")
            if client.type(k) == b"list" and not k.endswith(b":wake")}


def test_only_the_fetch_queue_has_a_list_per_band_and_every_message_is_read_back():
    flush(DB)
    client = redis.Redis.from_url(f"{REDIS}/{DB}")
    app = create_app(settings())
    for prio in (0, 4, 9):  # whatever priority a sender names
        app.send_task(routing.SUBMIT_TASK, args=[f"http://a.test/{prio}"], queue=routing.SEED_QUEUE, priority=prio)
        app.send_task(routing.FETCH_TASK, args=[{}], queue=routing.FETCH_QUEUE, priority=prio)
    assert lists(client) == {"crawl.seed": 3, "crawl.fetch": 1, "crawl.fetch:4": 1, "crawl.fetch:9": 1}
    with app.connection_for_read() as conn:
        channel = conn.default_channel
        assert channel.queue_declare(routing.SEED_QUEUE, passive=True).message_count == 3  # not 3 × 10
        taken = []
        for _ in range(6):
            message = channel.basic_get(routing.FETCH_QUEUE) or channel.basic_get(routing.SEED_QUEUE)
            taken.append((message.delivery_info["routing_key"], message.properties["priority"]))
            message.ack()
    # Fetches in band order (Redis priority 0 first), then the seeds.
    assert [p for q, p in taken if q == routing.FETCH_QUEUE] == [0, 4, 9]
    assert len([q for q, _ in taken if q == routing.SEED_QUEUE]) == 3
    assert lists(client) == {} and client.hlen("unacked") == 0 and client.zcard("unacked_index") == 0


def test_another_app_in_the_same_process_keeps_kombu_s_lists_per_priority():
    flush(DB)
    client = redis.Redis.from_url(f"{REDIS}/{DB}")
    create_app(settings())  # the crawler's transport is registered for redis:// now
    other = Celery("other", broker=f"{REDIS}/{DB}")
    other.conf.broker_transport_options = {"priority_steps": list(range(10)), "sep": ":",
                                           "queue_order_strategy": "priority"}
    other.send_task("mine.task", queue="mine", priority=5)
    other.send_task("mine.task", queue="mine", priority=0)
    assert lists(client) == {"mine": 1, "mine:5": 1}


def test_a_monitor_bound_to_the_events_is_seen_and_gone_when_it_leaves():
    flush(DB)
    s = settings()
    app = create_app(s)
    assert not monitor_listening(s)
    with app.connection_for_read() as conn:
        receiver = app.events.Receiver(conn, handlers={"*": lambda event: None})
        with receiver.consumer_context():  # as Flower and `celery events` bind their queue
            assert monitor_listening(s)
    assert not monitor_listening(s)


def _taken(app: Celery) -> tuple[object, object]:
    """A fetch message taken from the broker (noted in kombu's unacked copy), and its channel."""
    app.send_task(routing.FETCH_TASK, args=[{}], queue=routing.FETCH_QUEUE)
    conn = app.connection_for_read()
    channel = conn.default_channel
    return channel.basic_get(routing.FETCH_QUEUE), conn


def test_a_message_acked_in_a_task_s_round_trip_is_not_acked_again():
    flush(DB)
    client = redis.Redis.from_url(f"{REDIS}/{DB}")
    message, conn = _taken(create_app(settings()))
    tag = message.delivery_tag
    assert client.hexists("unacked", tag) and client.zscore("unacked_index", tag) is not None
    ack = acks.in_band_ack(tag)
    assert ack is not None
    with client.pipeline(transaction=True) as pipe:  # as the page's last round trip
        ack(pipe)
        pipe.execute()
    assert client.hlen("unacked") == 0 and client.zcard("unacked_index") == 0
    hdels = client.info("commandstats").get("cmdstat_hdel", {}).get("calls", 0)
    message.ack()  # what Celery does after the task: nothing more reaches Redis
    assert client.info("commandstats").get("cmdstat_hdel", {}).get("calls", 0) == hdels
    conn.release()


def test_a_message_taken_but_not_acked_in_band_is_acked_by_kombu_and_a_requeue_restores_it():
    flush(DB)
    client = redis.Redis.from_url(f"{REDIS}/{DB}")
    app = create_app(settings())
    message, conn = _taken(app)
    message.ack()
    assert client.hlen("unacked") == 0
    message, conn2 = _taken(app)
    message.reject(requeue=True)
    assert client.llen("crawl.fetch") == 1 and client.hlen("unacked") == 0
    conn.release()
    conn2.release()


def test_a_forked_pool_child_leaves_the_ack_to_its_parent():
    _taken(create_app(settings()))  # this process consumes now
    assert acks.in_band_ack("x") is not None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a prefork child: the consumer is its parent's
        os.write(write, b"none" if acks.in_band_ack("x") is None else b"some")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 4) == b"none"


def test_a_take_whose_reply_never_arrives_is_noted_and_given_back_by_the_restore_sweep(tmp_path):
    """Redis killed after the take reached its AOF and before the worker read the reply:
    the take noted the message in the same step, so the sweep gives it back."""
    from tests.system.test_reliability import AofRedis

    server = AofRedis(tmp_path).start()  # AOF, fsync always: what was written survives the crash
    s = Settings.from_env(broker_url=server.url, redis_url=server.url, visibility_timeout=2,
                          retry_backoff_max=1)
    app = create_app(s)
    app.send_task(routing.FETCH_TASK, args=[{"url": "http://a.test/"}], queue=routing.FETCH_QUEUE,
                  task_id="lost-reply", priority=routing.broker_priority(4, redis=True))
    client = redis.Redis.from_url(server.url)
    client.delete(wake_list(routing.FETCH_QUEUE))
    try:
        client.script_load(transport.TAKE)  # as a worker has it loaded
        with app.connection_for_read() as conn:
            raw = redis.Connection(port=server.port)
            raw.send_command(*conn.default_channel._take_args([routing.FETCH_QUEUE]))
            deadline = time.monotonic() + 5
            while not client.hlen("unacked"):  # taken, its reply unread
                assert time.monotonic() < deadline
                time.sleep(0.01)
        server.crash()
        server.start()
        assert not lists(client) and client.hlen("unacked") == 1 and client.zcard("unacked_index") == 1
        time.sleep(2.1)  # past the visibility timeout
        with app.connection_for_read() as conn:
            conn.default_channel.qos.restore_visible(num=10, interval=1)
            message = conn.default_channel.basic_get(routing.FETCH_QUEUE)
            assert message.headers["id"] == "lost-reply" and message.delivery_info["redelivered"]
            assert message.properties["priority"] == routing.broker_priority(4, redis=True)
            message.ack()
        assert not lists(client) and client.hlen("unacked") == 0
    finally:
        server.stop()


def test_a_message_taken_as_redis_dies_before_it_is_noted_is_put_back_when_redis_answers(
        tmp_path, monkeypatch):
    """Another app's connection (kombu's take, then its note): the message held in memory
    across the restart is put back at the front of its queue."""
    from kombu.transport import redis as kombu_redis

    from tests.system.test_reliability import AofRedis

    server = AofRedis(tmp_path).start()
    create_app(settings())  # the crawler's transport is registered for redis:// now
    app = Celery("other", broker=server.url)
    app.send_task("mine.task", queue="mine", task_id="held-1")
    note = kombu_redis.QoS.append

    def crash_then_note(qos, message, tag):  # Redis dies between the take and its note
        server.crash()
        note(qos, message, tag)

    monkeypatch.setattr(kombu_redis.QoS, "append", crash_then_note)
    conn = app.connection_for_read()
    try:
        with pytest.raises(redis.ConnectionError):
            conn.default_channel.basic_get("mine")
        monkeypatch.undo()
        with pytest.raises(redis.ConnectionError):  # still away: the message stays held
            conn.default_channel.qos.restore_visible()
        server.start()
        client = redis.Redis.from_url(server.url)
        assert not lists(client) and client.hlen("unacked") == 0  # only held here
        with app.connection_for_read() as again:
            again.default_channel.qos.restore_visible()  # the sweep after Redis came back
            message = again.default_channel.basic_get("mine")
            assert message.headers["id"] == "held-1" and message.delivery_info["redelivered"]
            message.ack()
        assert not lists(client) and client.hlen("unacked") == 0  # put back once
    finally:
        conn.release()
        server.stop()


def test_a_worker_waiting_on_empty_queues_is_woken_by_a_message_pushed_for_it():
    """A consumer whose take found nothing blocks on the wake lists (here for up to 30 s):
    a message sent through Celery or pushed onto the bands wakes it at once."""
    import threading

    from crawler_tasks.broker.fetch_queue import FetchQueue
    from crawler_tasks.core.models import CrawlRequest

    flush(DB)
    s = settings()
    app = create_app(s)
    app.conf.broker_transport_options = {**app.conf.broker_transport_options, "brpop_timeout": 30}
    got: list[tuple[str, float]] = []
    with app.connection_for_read() as conn:
        channel = conn.default_channel

        def on_message(message):
            got.append((message.headers["id"], time.monotonic()))
            message.ack()

        channel.basic_consume(routing.FETCH_QUEUE, False, on_message, "waiting")
        with pytest.raises(socket.timeout):
            conn.drain_events(timeout=0.5)  # nothing yet: the take found nothing, it waits
        assert conn.transport.client.transport_options["brpop_timeout"] == 30
        for send in (lambda: app.send_task(routing.FETCH_TASK, args=[{}], queue=routing.FETCH_QUEUE, task_id="sent"),
                     lambda: FetchQueue.of(s, redis.Redis.from_url(s.redis_url)).push(
                         [(CrawlRequest(url="http://a.test/", crawl_id="c"), "pushed")])):
            timer, wanted = threading.Timer(0.3, send), len(got) + 1
            started = time.monotonic()
            timer.start()
            while len(got) < wanted:
                conn.drain_events(timeout=25)
            timer.join()
            assert got[-1][1] - started < 10  # woken, not the 30 s wait
    assert [task_id for task_id, _ in got] == ["sent", "pushed"]


def test_a_consumer_that_acks_nothing_leaves_no_unacked_copy():
    """Celery's reply consumers (``inspect``, Flower) consume without acks: their messages
    are taken without a note, which nothing would ever remove."""
    flush(DB)
    client = redis.Redis.from_url(f"{REDIS}/{DB}")
    app = create_app(settings())
    got = []
    with app.connection_for_read() as conn:
        channel = conn.default_channel
        channel.basic_consume("replies", True, lambda message: got.append(message.headers["id"]), "r")
        app.send_task("mine.reply", queue="replies", task_id="reply-1")
        conn.drain_events(timeout=5)
        app.send_task("mine.reply", queue="replies", task_id="reply-2")
        assert channel.basic_get("replies", no_ack=True).headers["id"] == "reply-2"
        app.send_task(routing.FETCH_TASK, args=[{}], queue=routing.FETCH_QUEUE, task_id="acked")
        message = channel.basic_get(routing.FETCH_QUEUE)  # acks: noted until acked
        assert client.hlen("unacked") == 1
        message.ack()
    assert got == ["reply-1"] and client.hlen("unacked") == 0 and client.zcard("unacked_index") == 0


def test_a_consumer_with_room_takes_several_messages_of_its_first_band_in_one_round_trip(monkeypatch):
    flush(DB)
    client = redis.Redis.from_url(f"{REDIS}/{DB}")
    app = create_app(settings())
    for n, band in enumerate((0, 4, 0, 4, 4)):  # band 4 goes before band 0
        app.send_task(routing.FETCH_TASK, args=[{}], queue=routing.FETCH_QUEUE, task_id=f"t{n}-b{band}",
                      priority=routing.broker_priority(band, redis=True))
    got: list[tuple[str, int]] = []
    takes: list[int] = []
    real_take_args = transport.Channel._take_args

    def counted(self, queues, most=1):
        takes.append(most)
        return real_take_args(self, queues, most)

    monkeypatch.setattr(transport.Channel, "_take_args", counted)
    with app.connection_for_read() as conn:
        channel = conn.default_channel
        channel.basic_qos(prefetch_count=2)

        def on_message(message):
            got.append((message.headers["id"], int(client.hlen("unacked"))))  # noted as it was taken
            message.ack()

        channel.basic_consume(routing.FETCH_QUEUE, False, on_message, "c1")
        deadline = time.monotonic() + 10
        while len(got) < 5 and time.monotonic() < deadline:
            with contextlib.suppress(socket.timeout):
                conn.drain_events(timeout=1)
    assert [tid for tid, _ in got] == ["t1-b4", "t3-b4", "t4-b4", "t0-b0", "t2-b0"]  # band by band
    assert all(noted >= 1 for _, noted in got)
    assert takes[:3] == [2, 2, 2]  # room for two each time: two, the band's last one, two
    assert lists(client) == {} and client.hlen("unacked") == 0
