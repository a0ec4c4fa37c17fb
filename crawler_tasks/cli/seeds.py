"""``crawler-tasks seeds``: the seed feeds (Beat's, and the Kafka consumer's) and how their ticks
(for Kafka: batches) went."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..core import counters
from ..core.store_uris import mask
from ..stages.feeds import START_URLS, configured, status, waiting
from ..stages.feeds.kafka import KAFKA
from .common import state_runtime


def cmd_seeds(args: argparse.Namespace) -> int:
    rt = state_runtime()
    settings = rt.settings
    report = {"feeds": [{"name": feed.name, "enabled": feed.enabled, "reads": feed.source,
                         "interval": feed.interval, "status": status(rt, feed.name),
                         **({"waiting": waiting(rt)} if feed.name == START_URLS else {})}
                        for feed in configured(settings)]
             + [{"name": KAFKA, "enabled": bool(settings.kafka_seeds), "reads": mask(settings.kafka_seeds),
                 "interval": None, "status": status(rt, KAFKA)}],
              "crawl_id": settings.seed_crawl_id, "max_queued": settings.max_queued}
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        _print_seeds(report)
    return 0


def _print_seeds(report: dict[str, Any]) -> None:
    print(f"seeds join crawl {report['crawl_id']}"
          + (f"; ticks skip while more than {report['max_queued']} fetches wait" if report["max_queued"] else ""))
    for feed in report["feeds"]:
        state = "off" if not feed["enabled"] else (
            "consumer" if feed["interval"] is None else f"every {feed['interval']:g}s")
        reads = feed["reads"] or "-"
        if "waiting" in feed:
            reads = f"Redis key {reads} ({feed['waiting']} waiting)"
        print(f"{feed['name']:<12}{state:<14}reads: {reads}")
        st = feed["status"]
        if st["last_tick"] is None:
            print("  no tick yet")
            continue
        print(f"  last tick   {st['last_tick']}  {st['last_outcome']}")
        why = counters.FEED_SKIPPED_WHY.prefix
        skipped = ", ".join(f"{k[len(why):]} {v}" for k, v in st.items() if k.startswith(why))
        print(f"  ticks {st[counters.FEED_TICKS]} · admitted {st[counters.FEED_ADMITTED]}"
              f" · duplicates {st[counters.FEED_DUPLICATES]} · refused {st[counters.FEED_REFUSED]}"
              f" · failed {st[counters.FEED_FAILED]} · skipped {st[counters.FEED_SKIPPED]}"
              + (f" ({skipped})" if skipped else ""))
