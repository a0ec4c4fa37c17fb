"""``crawler-tasks purge``: a finished crawl's state removed from Redis."""

from __future__ import annotations

import argparse

from ..service.control import purge
from .common import state_runtime


def cmd_purge(args: argparse.Namespace) -> int:
    removed = purge(args.crawl_id, state_runtime(), force=args.force)
    print(f"purged crawl {args.crawl_id}: {removed} key(s) removed")
    return 0
