"""``crawler-tasks items``: how many items a store's feed holds, per crawl and type; and
``crawler-tasks export --items``: the feed itself, as JSON lines or CSV."""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ..backends import open_store
from ..core.errors import BadInput
from ..core.items import ItemRow
from ..core.settings import Settings

#: The columns a CSV row starts with; the item's own fields follow.
PAGE_COLUMNS = ("type", "url", "crawl_id", "fingerprint", "position", "fetched_at")


def feed_store(uri: str | None) -> Any:
    """The store at ``uri`` (the settings' by default), when it keeps an items feed."""
    settings = Settings.from_env()
    uri = uri or settings.store
    if "://" not in uri and not os.path.exists(uri):
        raise BadInput(f"no store at {uri}")
    store = open_store(uri, settings)
    if not hasattr(store, "item_rows"):
        store.close()
        if hasattr(store, "items_topic"):
            raise BadInput(f"{uri}: its items feed is the topic {store.items_topic}: read it with a Kafka consumer")
        raise BadInput(f"{uri}: this store keeps no items feed (read the items in its records: "
                       f"crawler-tasks export)")
    return store


def cmd_items(args: argparse.Namespace) -> int:
    store = feed_store(args.store)
    try:
        counts = store.item_counts(args.crawl_id)
    finally:
        store.close()
    if args.json:
        print(json.dumps([{"crawl_id": c, "type": t, "items": n} for (c, t), n in counts.items()]))
        return 0
    if not counts:
        print("no items")
        return 0
    width = max(len(c) for c, _ in counts) + 2
    print(f"{'crawl':<{width}}{'type':<20}{'items':>8}")
    for (crawl_id, kind), n in counts.items():
        print(f"{crawl_id:<{width}}{kind:<20}{n:>8}")
    return 0


def export_items(args: argparse.Namespace) -> int:
    """``export --items``: the feed of ``--store`` (of ``--crawl-id``, of ``--type``)."""
    store = feed_store(args.store)
    try:
        if args.format == "csv":
            _write_csv(lambda: store.item_rows(args.crawl_id, args.type))
        else:
            for row in store.item_rows(args.crawl_id, args.type):
                sys.stdout.write(json.dumps(row.to_dict(), ensure_ascii=False) + "\n")
    finally:
        store.close()
    return 0


def _write_csv(rows: Callable[[], Iterator[ItemRow]]) -> None:
    """Two reads of the feed: the item fields first (every row's, in order of first sight),
    then the rows, so memory holds one row at a time. Lists and objects are JSON in a cell."""
    fields: dict[str, None] = {}
    for row in rows():
        fields.update(dict.fromkeys(row.item))
    clash = [f for f in fields if f in PAGE_COLUMNS]
    columns = [*PAGE_COLUMNS, *(f"item.{f}" if f in clash else f for f in fields)]
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(columns)
    for row in rows():
        d = row.to_dict()
        out.writerow([*(d[c] for c in PAGE_COLUMNS), *(_cell(row.item.get(f)) for f in fields)])


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return value
