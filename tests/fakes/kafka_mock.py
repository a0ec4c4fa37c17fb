"""A Kafka cluster for tests: librdkafka's mock cluster, which speaks the real protocol on
loopback ports (producers, transactions, consumer groups with commits), driven through the
librdkafka that confluent-kafka ships, so that a test can take its brokers down and up.
"""

from __future__ import annotations

import ctypes
import glob
import os
import time
import uuid
from typing import Any

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

_LIB: Any = None


def _lib() -> Any:
    global _LIB
    if _LIB is None:
        here = os.path.dirname(confluent_kafka.__file__)
        paths = glob.glob(os.path.join(here, "..", "confluent_kafka.libs", "librdkafka*.so*"))
        lib = ctypes.CDLL(paths[0] if paths else "librdkafka.so.1")
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_char_p, ctypes.c_size_t]
        lib.rd_kafka_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
        lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
        for name in ("rd_kafka_mock_broker_set_down", "rd_kafka_mock_broker_set_up"):
            getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_int32]
        lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        _LIB = lib
    return _LIB


class MockKafka:
    """``brokers`` mock brokers on loopback; :attr:`bootstrap` is their address list."""

    def __init__(self, brokers: int = 1) -> None:
        lib = _lib()
        conf = lib.rd_kafka_conf_new()
        err = ctypes.create_string_buffer(512)
        lib.rd_kafka_conf_set(conf, b"log_level", b"0", err, 512)
        self._rk = lib.rd_kafka_new(0, conf, err, 512)  # a producer handle owns the cluster
        if not self._rk:
            raise RuntimeError(err.value.decode())
        self._cluster = lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        self.brokers = brokers
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(self._cluster).decode()

    def create_topic(self, name: str, partitions: int = 4) -> None:
        if _lib().rd_kafka_mock_topic_create(self._cluster, name.encode(), partitions, 1):
            raise RuntimeError(f"mock topic {name} not created")

    def down(self) -> None:
        """Every broker refuses connections (those open are closed)."""
        for broker in range(1, self.brokers + 1):
            _lib().rd_kafka_mock_broker_set_down(self._cluster, broker)

    def up(self) -> None:
        for broker in range(1, self.brokers + 1):
            _lib().rd_kafka_mock_broker_set_up(self._cluster, broker)

    def close(self) -> None:
        if self._cluster:
            _lib().rd_kafka_mock_cluster_destroy(self._cluster)
            _lib().rd_kafka_destroy(self._rk)
            self._cluster = self._rk = None


def read_topic(bootstrap: str, topic: str, *, expect: int | None = None, quiet_s: float = 1.0,
               timeout: float = 60.0) -> list[Any]:
    """Every committed message of ``topic`` from the start (its partitions assigned, no group
    to join): until ``expect`` were read and ``quiet_s`` more passed with nothing new, or
    ``timeout``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 0})
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    last_new = time.monotonic()
    try:
        while time.monotonic() < deadline:
            batch = [m for m in consumer.consume(500, 0.2) if m.error() is None]
            out += batch
            if batch:
                last_new = time.monotonic()
            elif (expect is None or len(out) >= expect) and time.monotonic() - last_new > quiet_s:
                break
    finally:
        consumer.close()
    return out
