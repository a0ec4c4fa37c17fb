"""``crawler-tasks purge``: a finished crawl's state removed from Redis."""

from __future__ import annotations

import argparse

from ..core.errors import BadInput
from .common import state_runtime


def cmd_purge(args: argparse.Namespace) -> int:
    rt = state_runtime()
    crawl_id = args.crawl_id
    outstanding = rt.crawls.outstanding(crawl_id)
    if outstanding and not args.force:
        raise BadInput(f"crawl {crawl_id} has {outstanding} task(s) outstanding: purge it once it "
                       "has drained, or pass --force")
    known = rt.crawls.registered(crawl_id)
    removed = rt.crawls.purge(crawl_id)
    if not known and not removed:
        raise BadInput(f"no crawl {crawl_id} in Redis")
    print(f"purged crawl {crawl_id}: {removed} key(s) removed")
    return 0
