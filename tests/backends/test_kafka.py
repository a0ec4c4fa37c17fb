"""The Kafka store with the real client (confluent-kafka) against librdkafka's mock cluster:
records as JSON messages keyed by fingerprint, a transaction per batch, the message limit,
a cluster that is down; and the URIs of the store and the seed feed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from crawler_tasks.backends import open_store
from crawler_tasks.backends.base import WriteOnlyStore
from crawler_tasks.backends.kafka import KafkaStore
from crawler_tasks.core.errors import StoreUnavailable, UnknownStore
from crawler_tasks.core.kafka_uri import BadKafkaURI, parse_kafka_uri
from crawler_tasks.core.models import PageRecord
from tests.fakes.kafka_mock import MockKafka, read_topic
from tests.helpers import token


@pytest.fixture(scope="module")
def kafka() -> Iterator[MockKafka]:
    cluster = MockKafka()
    yield cluster
    cluster.close()


def page(n: int, **fields: object) -> PageRecord:
    values = {"url": f"http://a.test/{n}", "fingerprint": f"fp{n:04d}", "crawl_id": "c", "depth": 1,
              "fetched_at": "2026-11-25T00:00:00+00:00", "status": 200, "title": f"page {n}",
              "body": f"<html>page {n}</html>", **fields}
    return PageRecord(**values)  # type: ignore[arg-type]


def store_of(kafka: MockKafka, topic: str, options: str = "") -> KafkaStore:
    store = open_store(f"kafka://{kafka.bootstrap}/{topic}{options}")
    assert isinstance(store, KafkaStore)
    return store


def test_each_record_is_one_json_message_keyed_by_its_crawl_and_fingerprint(kafka):
    topic = f"pages-{token()}"
    store = store_of(kafka, topic)
    assert store.upsert([page(n) for n in range(50)]) == []
    assert store.upsert([page(n) for n in range(50, 120)]) == []
    messages = read_topic(kafka.bootstrap, topic, expect=120)
    assert len(messages) == 120  # each once
    by_key = {m.key().decode(): json.loads(m.value()) for m in messages}
    assert sorted(by_key) == [f"c:fp{n:04d}" for n in range(120)]
    assert by_key["c:fp0007"]["url"] == "http://a.test/7" and by_key["c:fp0007"]["body"] == "<html>page 7</html>"
    assert by_key["c:fp0007"] == PageRecord.from_dict(by_key["c:fp0007"]).to_dict()  # the record, whole
    store.close()


def test_the_same_page_in_two_crawls_is_two_keys_so_compaction_keeps_each_crawls_record(kafka):
    topic = f"pages-{token()}"
    store = store_of(kafka, topic)
    assert store.upsert([page(1), page(1, crawl_id="later", title="again")]) == []
    got = {m.key().decode(): json.loads(m.value()) for m in read_topic(kafka.bootstrap, topic, expect=2)}
    assert {k: v["title"] for k, v in got.items()} == {"c:fp0001": "page 1", "later:fp0001": "again"}
    store.close()


def test_each_item_is_one_message_on_the_items_topic_in_the_records_transaction(kafka):
    topic = f"pages-{token()}"
    store = store_of(kafka, topic, "?max_message_bytes=4000")
    shop = page(1, items=[{"title": "Dune"}, {"note": "n"}], item_types=["Book", "item"])
    huge = page(2, items=[{"ok": 1}, {"blob": "x" * 5000}])
    [refused] = store.upsert([shop, page(3), huge])  # its record, items and all, is over the limit
    assert refused.fingerprint == "fp0002" and "over the 4000-byte message limit" in refused.reason
    assert store.upsert([shop]) == []  # sent again: the same keys
    records = read_topic(kafka.bootstrap, topic, expect=3)
    items = read_topic(kafka.bootstrap, f"{topic}-items", expect=4)
    assert len(records) == 3 and len(items) == 4  # none of the refused record's
    by_key = {m.key().decode(): json.loads(m.value()) for m in items}
    assert sorted(by_key) == ["c:fp0001:0", "c:fp0001:1"]
    assert by_key["c:fp0001:0"] == {"type": "Book", "url": "http://a.test/1", "crawl_id": "c",
                                    "fingerprint": "fp0001", "position": 0,
                                    "fetched_at": "2026-11-25T00:00:00+00:00", "item": {"title": "Dune"}, "of": 2}
    store.close()


def test_a_record_over_the_message_limit_goes_without_its_body_and_one_still_over_is_refused(kafka):
    topic = f"pages-{token()}"
    store = store_of(kafka, topic, "?max_message_bytes=4000")
    big_body = page(1, body="x" * 10_000)
    too_big = page(2, body="x" * 10_000, title="t" * 5_000)
    failures = store.upsert([page(0), big_body, too_big])
    assert [f.fingerprint for f in failures] == ["fp0002"]
    assert "even without its body" in failures[0].reason and "4000-byte" in failures[0].reason
    got = {m.key().decode(): json.loads(m.value()) for m in read_topic(kafka.bootstrap, topic, expect=2)}
    assert sorted(got) == ["c:fp0000", "c:fp0001"]
    assert "body" not in got["c:fp0001"] and "over the 4000-byte message limit" in got["c:fp0001"]["body_omitted"]
    assert got["c:fp0000"]["body"] == "<html>page 0</html>" and "body_omitted" not in got["c:fp0000"]


def test_a_cluster_that_is_down_fails_the_batch_whole_and_the_retry_after_it_is_seen_once(kafka):
    topic = f"pages-{token()}"
    store = store_of(kafka, topic, "?timeout=2")
    assert store.upsert([page(0)]) == []
    kafka.down()
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match=f"kafka store 'kafka://{kafka.bootstrap}/{topic}'"):
            store.upsert([page(n) for n in range(1, 30)])
        assert time.monotonic() - started < 15  # the batch's timeout, not librdkafka's 5 minutes
    finally:
        kafka.up()
    deadline = time.monotonic() + 30
    while True:  # the store stage retries with a backoff; here, until the cluster answers again
        try:
            assert store.upsert([page(n) for n in range(1, 30)]) == []
            break
        except StoreUnavailable:
            assert time.monotonic() < deadline
            time.sleep(1)
    keys = [m.key().decode() for m in read_topic(kafka.bootstrap, topic, expect=30)]
    assert sorted(keys) == [f"c:fp{n:04d}" for n in range(30)]  # the failed attempt left nothing


def test_the_store_is_write_only():
    store = open_store("kafka://127.0.0.1:1/pages")
    with pytest.raises(WriteOnlyStore, match="write-only"):
        list(store.records())
    assert store.get("fp") is None and store.count() == 0


@pytest.mark.parametrize("uri,servers,topics,config", [
    ("kafka://k1:9092,k2/pages", ("k1:9092", "k2:9092"), ("pages",),
     {"bootstrap.servers": "k1:9092,k2:9092", "security.protocol": "PLAINTEXT"}),
    ("kafkas://k1:9093/pages", ("k1:9093",), ("pages",), {"bootstrap.servers": "k1:9093", "security.protocol": "SSL"}),
    ("kafka://app:s%3Acret@k1/seeds,more?sasl_mechanism=scram-sha-512&group=g", ("k1:9092",), ("seeds", "more"),
     {"bootstrap.servers": "k1:9092", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
      "sasl.username": "app", "sasl.password": "s:cret"}),
    ("kafkas://app:pw@[::1]:9093/pages", ("[::1]:9093",), ("pages",),
     {"bootstrap.servers": "[::1]:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
      "sasl.username": "app", "sasl.password": "pw"}),
])
def test_kafka_uris_name_servers_topics_and_how_to_authenticate(uri, servers, topics, config):
    target = parse_kafka_uri(uri)
    assert (target.servers, target.topics, target.client_config()) == (servers, topics, config)
    assert "s:cret" not in target.display and "pw@" not in target.display


@pytest.mark.parametrize("uri,message", [
    ("kafka://k1:9092", "no topic"),
    ("kafka://k1:0/pages", "bad port"),
    ("kafka://k1:x/pages", "bad port"),
    ("kafka:///pages", "no host"),
    ("kafka://k1/bad topic", "not a Kafka topic name"),
    ("kafka://app@k1/pages", "credentials must be given as user:password@"),
    ("kafka://app:secret@k1/pages?acks=1", "unknown option 'acks'"),
    ("kafka://k1/pages?compression=brotli", "compression must be one of"),
    ("kafka://k1/pages?max_message_bytes=ten", "max_message_bytes must be a number"),
    ("kafka://k1/pages?ca_certs=/etc/hostname", "ca_certs needs kafkas://"),
    ("kafkas://k1/pages?ca_certs=/no/such.pem", "no such file"),
])
def test_a_bad_kafka_uri_is_one_line_without_the_password(uri, message):
    with pytest.raises(BadKafkaURI, match=message) as err:
        parse_kafka_uri(uri)
    assert "secret" not in str(err.value) and "\n" not in str(err.value)


def test_the_store_takes_one_topic_and_says_so_as_a_store_error():
    with pytest.raises(UnknownStore, match="name one topic, not 2"):
        open_store("kafka://k1/a,b")
    with pytest.raises(UnknownStore, match="kafka store 'kafka://app:\\*\\*\\*@k1/'"):
        open_store("kafka://app:secret@k1/")


def test_a_changes_topic_keeps_to_the_pages_a_revisit_found_changed(kafka):
    topic = f"changes-{token()}"
    store = store_of(kafka, topic, "?only=changes")
    changed = page(1, changed=True, changed_at="2026-11-26T10:00:00+00:00", signature="abc",
                   previous_fetched_at="2026-11-25T10:00:00+00:00")
    assert store.upsert([changed, page(2, changed=False), page(3), page(4, changed="not_modified")]) == []
    (message,) = read_topic(kafka.bootstrap, topic, expect=1)
    assert message.key().decode() == "c:fp0001:2026-11-26T10:00:00+00:00"
    event = json.loads(message.value())
    assert event == {"url": "http://a.test/1", "fingerprint": "fp0001", "crawl_id": "c", "status": 200,
                     "title": "page 1", "changed_at": "2026-11-26T10:00:00+00:00",
                     "previous_fetched_at": "2026-11-25T10:00:00+00:00", "signature": "abc"}
    store.close()
