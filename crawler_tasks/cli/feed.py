"""``crawler-tasks feed kafka``: the Kafka seed feed, one consumer of ``CRAWLER_KAFKA_SEEDS`` in
its group, until SIGTERM or SIGINT (it then leaves the group: its partitions go to the others)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from ..core.errors import BadInput
from ..core.kafka_uri import parse_kafka_uri
from ..core.settings import Settings
from ..stages.feeds.kafka import KafkaFeed
from .common import state_runtime


def cmd_feed(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    if not settings.kafka_seeds:
        raise BadInput("feed kafka: CRAWLER_KAFKA_SEEDS is not set (kafka://host:9092/topic?group=crawler-seeds)")
    if args.batch < 1:
        raise BadInput("feed kafka: --batch must be at least 1")
    target = parse_kafka_uri(settings.kafka_seeds, what="CRAWLER_KAFKA_SEEDS")
    rt = state_runtime()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    feed = KafkaFeed(rt, target, batch=args.batch)
    feed.check()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    print(f"feeding seeds from {target.display} in group {target.group!r} into crawl "
          f"{settings.seed_crawl_id!r} (unless a seed names its own)", file=sys.stderr, flush=True)
    feed.run(stop)
    return 0
