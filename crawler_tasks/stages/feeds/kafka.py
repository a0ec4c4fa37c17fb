"""The ``kafka`` feed: seeds consumed from Kafka topics by a consumer group.

It runs as a process of its own, ``crawler-tasks feed kafka`` (``CRAWLER_KAFKA_SEEDS``
names the topics and the group), not in Beat's ticks nor in a worker: a consumer joins its
group once and stays, so the group does not rebalance on every tick, and worker restarts
or autoscaling do not churn it. Several feed processes (on several nodes) share the topics'
partitions through the group, each partition read by one of them: no seed is fed twice,
and when one stops the others take its partitions over.

A step takes up to ``batch`` messages. Each is a seed on its own (a URL, a JSON seed
object, the upstream format ``{"url", "meta": {"url_id", "NotExtract"}, "method",
"_encoding"}`` included; a ``crawl_id`` and ``priority`` of its own if it names them); the
valid ones are gated and published together, and only then are the batch's offsets
committed. A process killed before the commit leaves the batch to be read again (by the
feed that takes its partitions over, within :data:`SESSION_TIMEOUT_MS`), and the gate
refuses the repeats (seeds with ``dont_filter`` are the exception: they are crawled
again). A malformed message is counted (``seeds/invalid`` in the seed crawl, ``refused``
in the feed's status), logged in one line with its topic, partition and offset, and its
offset committed with the rest: it never blocks its partition. While more fetches wait in
the broker than ``CRAWLER_MAX_QUEUED``, the feed pauses its partitions (it keeps its place
in the group, reading nothing) and resumes when the workers have caught up; a batch
refused half-way is read again from its first offsets. Each batch's outcome goes to the
feed's status (``crawler-tasks seeds``).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import redis
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from ...core.errors import BadInput, BrokerUnavailable, FeedSourceUnavailable, QueueFull
from ...core.kafka_uri import KafkaTarget, error_text
from ...core.models import CrawlRequest
from .. import enqueue
from ..seed import submit_requests
from .chunks import CHUNK, judge
from .feeder import count_invalid
from .outcomes import Fed, Tick, record
from .seed_file import MAX_LINE

if TYPE_CHECKING:
    from ..deps import FeedDeps

log = logging.getLogger(__package__)

KAFKA = "kafka"
#: Seconds a step waits for messages.
POLL_S = 1.0
#: Seconds between two looks at the queue while the feed is paused.
HOLD_S = 0.25
#: A feed process that stops answering (killed) loses its partitions to the others after this
#: (Kafka's least by default), its heartbeats a third of it.
SESSION_TIMEOUT_MS = 6_000


class KafkaFeed:
    """One consumer of the seed topics, in its group (see the module doc)."""

    def __init__(self, rt: FeedDeps, target: KafkaTarget, *, batch: int = CHUNK, poll_s: float = POLL_S) -> None:
        self.rt = rt
        self.target = target
        self.batch = batch
        self.poll_s = poll_s
        self.consumer = Consumer({**target.client_config(), "group.id": target.group,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": SESSION_TIMEOUT_MS,
                                  "heartbeat.interval.ms": SESSION_TIMEOUT_MS // 3, "logger": log, "log_level": 4})
        self.paused = False

    def check(self, timeout: float = 5.0) -> None:
        """:class:`FeedSourceUnavailable` (one line) unless the cluster answers and has the topics."""
        try:
            found = self.consumer.list_topics(timeout=timeout).topics
        except KafkaException as exc:
            raise FeedSourceUnavailable(f"kafka feed {self.target.display!r}: {error_text(exc)}") from None
        missing = [t for t in self.target.topics if t not in found or found[t].error is not None]
        if missing:
            log.warning("kafka feed: topic(s) %s not there yet: waiting for them", ", ".join(missing))

    def run(self, stop: threading.Event) -> None:
        """Consume until ``stop`` is set, then leave the group (its partitions go to the others)."""
        self.consumer.subscribe(list(self.target.topics), on_assign=_assigned, on_revoke=_revoked)
        try:
            while not stop.is_set():
                self.step()
        finally:
            self.consumer.close()

    def step(self) -> Tick | None:
        """Take one batch and feed it; None when there was nothing to feed."""
        try:
            enqueue.ensure_room(self.rt)
        except QueueFull as exc:
            return self._hold(str(exc))
        except (BrokerUnavailable, redis.RedisError) as exc:
            return self._hold(str(exc), failed=True)
        if self.paused:
            self.consumer.resume(self.consumer.assignment())
            self.paused = False
            log.info("kafka feed: resumed")
        messages = self.consumer.consume(self.batch, self.poll_s)
        if not messages:
            return None
        fed = Fed(KAFKA)
        requests, first, last = self._judge(messages, fed)
        try:
            if requests:
                fed.admitted = submit_requests(self.rt, requests)
                fed.duplicates = len(requests) - fed.admitted
        except (QueueFull, BrokerUnavailable, redis.RedisError) as exc:
            self._rewind(first)  # read again once there is room (the gate drops any repeat)
            return self._hold(str(exc), failed=not isinstance(exc, QueueFull))
        finally:
            fed.close()
        self._commit(last)
        tick = Tick(KAFKA, "fed", fed=fed)
        self._note(tick, fed)
        return tick

    def _judge(self, messages: list[Any], fed: Fed) -> tuple[list[CrawlRequest], dict, dict]:
        """The batch's seeds, and its first and last offset per partition."""
        requests: list[CrawlRequest] = []
        first: dict[tuple[str, int], int] = {}
        last: dict[tuple[str, int], int] = {}
        s = self.rt.settings
        for msg in messages:
            if msg.error() is not None:
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    log.warning("kafka feed: %s", msg.error().str())
                continue
            where = (msg.topic(), msg.partition())
            first.setdefault(where, msg.offset())
            last[where] = msg.offset()
            try:
                requests.append(judge(_text_of(msg.value()), s.seed_crawl_id, self.rt.addresses,
                                      s.max_url_length))
            except BadInput as exc:
                fed.refuse(f"message {msg.topic()}[{msg.partition()}]@{msg.offset()}", exc)
        return requests, first, last

    def _note(self, tick: Tick, fed: Fed | None = None) -> None:
        """The batch's outcome in the feed's status, and its malformed seeds counted; a
        state Redis that is down loses the note, not the feed (it rides the outage out)."""
        try:
            if fed is not None:
                count_invalid(self.rt, fed)
            record(self.rt, tick)
        except redis.RedisError as exc:
            log.warning("kafka feed: status not recorded: %s", exc)

    def _commit(self, last: dict[tuple[str, int], int]) -> None:
        if not last:
            return
        offsets = [TopicPartition(topic, partition, offset + 1) for (topic, partition), offset in last.items()]
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:  # e.g. a rebalance took the partition: its new reader re-reads
            log.warning("kafka feed: offsets not committed (%s): the batch may be read again", error_text(exc))

    def _rewind(self, first: dict[tuple[str, int], int]) -> None:
        for (topic, partition), offset in first.items():
            try:
                self.consumer.seek(TopicPartition(topic, partition, offset))
            except KafkaException:
                pass  # no longer ours: its new reader starts from the last commit

    def _hold(self, reason: str, *, failed: bool = False) -> Tick:
        """Pause the partitions while the queue is full (or the broker or Redis is down), and
        wait a poll before looking again; the first step of a pause is recorded."""
        self.consumer.pause(self.consumer.assignment())  # those assigned since are paused too
        tick = Tick(KAFKA, "failed" if failed else "skipped", reason if failed else "queue_full")
        if not self.paused:
            self.paused = True
            log.info("kafka feed: paused: %s", reason)
            self._note(tick)
        self.consumer.consume(self.batch, min(self.poll_s, HOLD_S))  # paused: serves the group, returns nothing
        return tick


def _assigned(consumer: Consumer, partitions: list[TopicPartition]) -> None:
    log.info("kafka feed: reading %s", _names(partitions) or "no partition (more feeds than partitions)")


def _revoked(consumer: Consumer, partitions: list[TopicPartition]) -> None:
    log.info("kafka feed: no longer reading %s", _names(partitions))


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{p.topic}[{p.partition}]" for p in partitions)


def _text_of(value: bytes | None) -> str:
    if not value:
        raise BadInput("an empty message")
    if len(value) > MAX_LINE:
        raise BadInput(f"a message longer than {MAX_LINE} bytes")
    try:
        return value.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise BadInput("a message that is not UTF-8") from None

