"""``crawler-tasks export``: stored records as JSON lines."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..backends import open_store
from ..core.errors import BadInput
from ..core.settings import Settings


def cmd_export(args: argparse.Namespace) -> int:
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
