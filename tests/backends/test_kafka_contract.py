"""The Kafka store against a real Kafka cluster: set ``CRAWLER_TEST_KAFKA=host:9092`` (for
instance the ``kafka`` profile of docker/compose.yml with its port published). What
librdkafka's mock cluster cannot show is checked here: a topic whose own message limit is
under the store's refuses the record, and the batch's other records still arrive once."""

from __future__ import annotations

import json
import os

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from crawler_tasks.backends import open_store
from tests.backends.test_kafka import page
from tests.fakes.kafka_mock import read_topic
from tests.helpers import token

KAFKA = os.environ.get("CRAWLER_TEST_KAFKA", "")
pytestmark = pytest.mark.skipif(not KAFKA, reason="CRAWLER_TEST_KAFKA is not set (e.g. 127.0.0.1:9092)")


def new_topic(config: dict[str, str] | None = None) -> str:
    name = f"crawler-contract-{token()}"
    admin = AdminClient({"bootstrap.servers": KAFKA})
    [future] = admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1,
                                             config=config or {})]).values()
    future.result(30)
    return name


def test_records_reach_a_real_cluster_once_each_keyed_by_crawl_and_fingerprint():
    topic = new_topic({"cleanup.policy": "compact"})
    store = open_store(f"kafka://{KAFKA}/{topic}")
    assert store.upsert([page(n) for n in range(40)]) == []
    assert store.upsert([page(n) for n in range(40, 60)]) == []
    messages = read_topic(KAFKA, topic, expect=60)
    assert sorted(m.key().decode() for m in messages) == [f"c:fp{n:04d}" for n in range(60)]
    assert json.loads(messages[0].value())["url"].startswith("http://a.test/")
    store.close()


def test_a_topic_with_a_lower_message_limit_refuses_the_record_and_takes_the_rest():
    topic = new_topic({"max.message.bytes": "3000"})
    store = open_store(f"kafka://{KAFKA}/{topic}?max_message_bytes=100000")
    failures = store.upsert([page(0), page(1, body=os.urandom(10_000).hex()), page(2)])  # not compressible
    assert [f.fingerprint for f in failures] == ["fp0001"] and "too large" in failures[0].reason
    assert sorted(m.key().decode() for m in read_topic(KAFKA, topic, expect=2)) == ["c:fp0000", "c:fp0002"]
    store.close()
