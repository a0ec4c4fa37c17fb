"""An error handler for the tests: it writes each failure it is told of to the file
``CRAWLER_TEST_FAILURES`` names and asks for one follow-up page per failure."""

from __future__ import annotations

import json
import os

from crawler_tasks import Request
from crawler_tasks.core.asks import Failure


def on_error(failure: Failure) -> Request:
    with open(os.environ["CRAWLER_TEST_FAILURES"], "a", encoding="utf-8") as out:
        out.write(json.dumps({"kind": failure.kind, "reason": failure.reason, "url": failure.url,
                              "description": failure.description, "status": failure.status,
                              "crawl_id": failure.crawl_id, "depth": failure.depth,
                              "request_url": failure.request.url}) + "\n")
    return Request(f"/page/handled-{failure.kind}-{failure.reason}")


def broken(failure: Failure) -> None:
    raise RuntimeError("the handler itself fails")
