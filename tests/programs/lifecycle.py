"""A pipeline and a middleware with a lifecycle: each notes ``open`` and ``close`` (with the
items it saw for the crawl, in this process) as JSON lines in ``LIFECYCLE_LOG``."""

from __future__ import annotations

import json
import os
from typing import Any


def note(**fields: Any) -> None:
    with open(os.environ["LIFECYCLE_LOG"], "a") as out:
        out.write(json.dumps({**fields, "pid": os.getpid()}) + "\n")


class Tally:
    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def open(self, crawl: Any) -> None:
        self.seen[crawl.crawl_id] = 0
        note(event="open", who="pipeline", crawl_id=crawl.crawl_id, plugins=list(crawl.plugins))

    def process_item(self, item: dict, page: Any) -> dict:
        self.seen[page.crawl_id] += 1
        return item

    def close(self, crawl: Any) -> None:
        note(event="close", who="pipeline", crawl_id=crawl.crawl_id, items=self.seen.pop(crawl.crawl_id))


class Watch:
    def open(self, crawl: Any) -> None:
        note(event="open", who="middleware", crawl_id=crawl.crawl_id)

    def process_request(self, request: Any) -> None:
        return None

    def close(self, crawl: Any) -> None:
        note(event="close", who="middleware", crawl_id=crawl.crawl_id)
