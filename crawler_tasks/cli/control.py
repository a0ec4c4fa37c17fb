"""``crawler-tasks pause|resume|cancel CRAWL_ID``: control one crawl of the running cluster."""

from __future__ import annotations

import argparse

from ..core.errors import BadInput
from ..service import control
from .common import state_runtime


def cmd_control(args: argparse.Namespace) -> int:
    rt = state_runtime()
    if not rt.crawls.registered(args.crawl_id):
        raise BadInput(f"no crawl {args.crawl_id!r} (crawler-tasks crawls lists them)")
    if args.command == "pause":
        control.pause(args.crawl_id, rt)
        print(f"crawl {args.crawl_id} paused: its fetches wait in Redis until resume")
    elif args.command == "resume":
        n = control.resume(args.crawl_id, rt)
        print(f"crawl {args.crawl_id} resumed: {n} held fetch(es) sent again")
    else:
        n = control.cancel(args.crawl_id, rt)
        print(f"crawl {args.crawl_id} cancelled: {n} held fetch(es) dropped; the rest are dropped as they come up")
    return 0
