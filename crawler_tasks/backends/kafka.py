"""Kafka store: ``kafka://host:9092/topic`` writes each record as one JSON message, and
each item its parser yielded as one message on ``<topic>-items`` (the items feed).

The URI (several bootstrap servers, TLS with ``kafkas://``, SASL with ``user:password@``,
the options): :mod:`crawler_tasks.core.kafka_uri`. Each record is one message, its value the
record's JSON (the fields ``crawler-tasks export`` prints), its key ``<crawl>:<fingerprint>``
(:func:`record_key`): a compacted topic (``cleanup.policy=compact``) keeps the newest version
of each page of each crawl, as the other stores keep a crawl's records its own.

Each batch of the store queue is one Kafka transaction of an idempotent producer
(``acks=all``): :meth:`KafkaStore.upsert` returns only once Kafka took the whole batch, so a
record is settled only after Kafka acknowledged it. A batch Kafka did not take (brokers
down, a timeout) is aborted and the store stage retries it, then keeps it in the dead
letters like any store's (``replay-dead`` sends it again): consumers that read committed
messages (``isolation.level=read_committed``, librdkafka's default; Java's default is
``read_uncommitted``) never see a batch twice or in part. A batch taken back from a worker
killed after Kafka took it and before it settled is written again (as every store
rewrites it): the compacted topic still keeps the page once, and its consumers see a
second copy under the same key.

A record whose JSON is over ``max_message_bytes`` (default 1000000) goes without its
``body``, ``body_base64`` and ``dom``, with ``body_omitted`` saying why; one still over it is
refused (the dead letters, with the reason). A topic whose own limit
(``max.message.bytes``) is lower refuses larger messages: set ``max_message_bytes`` under it.

The items feed: each item of a record is one message on ``<topic>-items`` in the same
transaction, its value the feed row (``type``, ``url``, ``crawl_id``, ``fingerprint``,
``position``, ``fetched_at``, ``item``) and ``of``, how many items its page had on that
fetch; its key ``<crawl>:<fingerprint>:<position>``, so a compacted topic keeps each once.
A page fetched again with fewer items sends those: its earlier messages at positions past
``of`` are out of date (a consumer keeping a page's items replaces them on a newer
``fetched_at``). Create the topic beside the records' where topics are not created on
first use.

Change events: ``kafka://host:9092/changes?only=changes`` keeps to the records a revisit
found changed (``changed: true``, see ``docs/recrawl.md``) and sends each as a small change
event (``url``, ``fingerprint``, ``crawl_id``, ``status``, ``title``, ``changed_at``,
``previous_fetched_at``, ``signature``) keyed ``<crawl>:<fingerprint>:<changed_at>``, in the
same transactions: a crawl's store ``pages.db,kafka://…/changes?only=changes`` keeps its
pages in SQLite and announces its changes on Kafka, each once.

Write-only: Kafka is read by its consumers, not by ``crawler-tasks export`` or a
recrawl's validators (:class:`~crawler_tasks.backends.base.WriteOnly`).

One producer per store and process (a forked child builds its own: librdkafka does not
survive a fork), its transactional id unique to the process; batches go one at a time.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, KafkaException, Producer

from ..core import codec
from ..core.errors import StoreUnavailable, UnknownStore
from ..core.items import item_rows
from ..core.kafka_uri import BadKafkaURI, KafkaTarget, error_text, parse_kafka_uri
from ..core.models import PageRecord, change_event
from .base import RecordFailure, WriteOnly

log = logging.getLogger(__name__)

#: Fields left out of a record over the message limit.
BODY_FIELDS = ("body", "body_base64", "dom")
#: Room for the key and the record batch's framing beside the value.
FRAMING = 4096


def message_of(record: PageRecord, limit: int) -> tuple[bytes | None, str]:
    """``record``'s message value within ``limit`` bytes (its body left out if it must be)
    and ``""``; or None and why it cannot be sent."""
    value = record.kept_json() or codec.dumps(record.to_dict())
    if len(value) <= limit:
        return value, ""
    whole, data = len(value), record.to_dict()
    for name in BODY_FIELDS:
        data.pop(name, None)
    data["body_omitted"] = f"the record is {whole} bytes with its body, over the {limit}-byte message limit"
    value = codec.dumps(data)
    if len(value) <= limit:
        return value, ""
    return None, (f"kafka: the record is {len(value)} bytes even without its body, over the "
                  f"{limit}-byte message limit (max_message_bytes)")


class Message(NamedTuple):
    """One message of a batch: where it goes, its key and value, and its page."""

    topic: str
    key: str
    value: bytes
    fingerprint: str


#: The items topic is the records topic's name with this after it.
ITEMS_SUFFIX = "-items"


def item_messages(record: PageRecord) -> list[tuple[str, bytes]]:
    """The items feed's messages of ``record`` (key, value). Each is smaller than the record's
    own message, which carries every item: a record within the limit has its items within it."""
    rows = item_rows(record)
    return [(f"{row.crawl_id}:{row.fingerprint}:{row.position}", codec.dumps({**row.to_dict(), "of": len(rows)}))
            for row in rows]


def record_key(record: PageRecord) -> str:
    """A record's message key: its crawl and fingerprint, so crawls keep their own records."""
    return f"{record.crawl_id}:{record.fingerprint}"


class KafkaStore(WriteOnly):
    """Records as JSON messages keyed by crawl and fingerprint, a transaction per batch (see
    the module doc)."""

    def __init__(self, target: KafkaTarget) -> None:
        if len(target.topics) != 1:
            raise UnknownStore(f"kafka store {target.display!r}: name one topic, not {len(target.topics)}")
        self.target = target
        self.topic = target.topics[0]
        self.items_topic = self.topic + ITEMS_SUFFIX
        self.shown = f"kafka store {target.display!r}"
        self.read_with = "read the topic with a Kafka consumer"
        self._lock = threading.Lock()
        self._producer: Producer | None = None
        self._pid = 0
        self._txn_id = ""

    @classmethod
    def from_uri(cls, uri: str) -> KafkaStore:
        """The store ``kafka://…/topic`` names; :class:`UnknownStore` (one line) if malformed."""
        try:
            return cls(parse_kafka_uri(uri, what="kafka store"))
        except BadKafkaURI as exc:
            raise UnknownStore(str(exc)) from None

    # -- the Store protocol ------------------------------------------------

    def upsert(self, records: Sequence[PageRecord]) -> list[RecordFailure]:
        """Send ``records`` in one transaction; refused ones (over the message limit) come
        back. :class:`StoreUnavailable` when Kafka did not take the batch (none of it is
        committed)."""
        failures: list[RecordFailure] = []
        messages: list[Message] = []
        if self.target.only == "changes":
            messages = [Message(self.topic, f"{record_key(r)}:{r.changed_at}", codec.dumps(change_event(r)),
                             r.fingerprint) for r in records if r.changed is True]
            records = ()
        for record in records:
            value, problem = message_of(record, self.target.max_message_bytes)
            if value is None:
                failures.append(RecordFailure(record.fingerprint, problem))
                continue
            messages.append(Message(self.topic, record_key(record), value, record.fingerprint))
            messages += [Message(self.items_topic, key, data, record.fingerprint)
                         for key, data in item_messages(record)]
        if messages:
            with self._lock:
                failures += self._send(messages)
        return failures

    def close(self) -> None:
        with self._lock:
            self._producer = None  # librdkafka's destructor ends the connections

    # -- sending -----------------------------------------------------------

    def _send(self, messages: list[Message]) -> list[RecordFailure]:
        producer = self._ready()
        refused: dict[str, KafkaError] = {}

        def report(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                refused[msg.key().decode()] = err

        try:
            producer.begin_transaction()
            for m in messages:
                producer.produce(m.topic, value=m.value, key=m.key, on_delivery=report)
            producer.commit_transaction(self.target.timeout)
            return []
        except (KafkaException, BufferError) as exc:
            self._abort(producer, exc)
            too_large = {k for k, err in refused.items() if err.code() == KafkaError.MSG_SIZE_TOO_LARGE}
            if not too_large:
                raise StoreUnavailable(f"kafka store {self.target.display!r}: {_describe(exc, refused)}") from None
        # The topic's own limit refused some. Kafka refuses a producer batch whole, so each
        # of them goes again alone: refused for good only if it is too large by itself.
        if len(messages) == 1:
            return [RecordFailure(messages[0].fingerprint,
                                  f"kafka: topic {messages[0].topic} refused the message as too large "
                                  "(its max.message.bytes is under the store's max_message_bytes)")]
        failures = [f for m in messages if m.key in too_large for f in self._send([m])]
        rest = [m for m in messages if m.key not in too_large]
        return failures + (self._send(rest) if rest else [])

    def _ready(self) -> Producer:
        """This process's producer, its transactions initialised."""
        if self._producer is not None and self._pid == os.getpid():
            return self._producer
        if self._pid != os.getpid():  # one id per process: a producer built again takes it over
            self._txn_id = f"crawler-tasks-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        config = {**self.target.client_config(), "transactional.id": self._txn_id,
                  "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                  "compression.type": self.target.compression,
                  "message.max.bytes": self.target.max_message_bytes + FRAMING,
                  "message.timeout.ms": int(self.target.timeout * 1000),
                  "transaction.timeout.ms": max(60_000, int(self.target.timeout * 1000)),
                  "logger": log, "log_level": 4}
        self._pid = os.getpid()
        try:
            producer = Producer(config)
            producer.init_transactions(self.target.timeout)  # ends (aborts) one left open under the id
        except KafkaException as exc:
            raise StoreUnavailable(f"kafka store {self.target.display!r}: {_describe(exc, {})}") from None
        self._producer = producer
        return producer

    def _abort(self, producer: Producer, exc: BaseException) -> None:
        """End the failed transaction, and leave the producer: the next batch builds one again
        under the same transactional id, which fences this one and ends anything it left."""
        self._producer = None
        error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        if isinstance(error, KafkaError) and error.fatal():
            return
        try:
            producer.abort_transaction(self.target.timeout)
        except KafkaException:
            pass  # the next producer's init_transactions aborts it


def _describe(exc: BaseException, refused: dict[str, KafkaError]) -> str:
    """One line: Kafka's error, and the first message error behind it."""
    text = error_text(exc)
    if refused:
        first = next(iter(refused.values()))
        text += f" ({len(refused)} message(s) not delivered: {first.str()})"
    return text
