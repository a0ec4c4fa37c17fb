"""``crawler-tasks export``: stored records as JSON lines (``--items``: the items feed,
:mod:`~crawler_tasks.cli.items`)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..backends import open_store
from ..core.errors import BadInput
from ..core.settings import Settings
from .items import export_items


def cmd_export(args: argparse.Namespace) -> int:
    if args.items:
        return export_items(args)
    if args.format != "jsonl" or args.type is not None:
        raise BadInput("--format and --type go with --items")
    settings = Settings.from_env()
    uri = args.store or settings.store
    if "://" not in uri and not os.path.exists(uri):
        raise BadInput(f"no store at {uri}")
    store = open_store(uri, settings)
    try:
        for record in store.records(args.crawl_id):
            data = record.to_dict()
            if args.no_body:
                data.pop("body", None)
                data.pop("dom", None)
            sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
    finally:
        store.close()
    return 0
