"""``crawler-tasks crawls``: every crawl with its state, times and main counters."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..core import counters
from ..service.control import list_crawls
from .common import state_runtime


def cmd_crawls(args: argparse.Namespace) -> int:
    crawls = list_crawls(state_runtime())
    if args.json:
        print(json.dumps(crawls, indent=2, sort_keys=True))
        return 0
    width = max([8, *(len(c["crawl_id"]) for c in crawls)])
    print(f"{'crawl':<{width}}  {'state':<8}  {'started':<25}  {'finished':<25}  "
          f"{'stored':>8}  {'failed':>7}  {'outstanding':>11}  {'due':>7}  {'next due':<25}  settings")
    for c in crawls:
        s, revisits = c["counters"], c["revisits"] or {}
        print(f"{c['crawl_id']:<{width}}  {c['state']:<8}  {c['started'] or '-':<25}  {c['finished'] or '-':<25}  "
              f"{s.get(counters.STORED, 0):>8}  {s.get(counters.FAILURES, 0):>7}  {c['outstanding']:>11}  "
              f"{revisits.get('due', '-'):>7}  {revisits.get('next_due') or '-':<25}  "
              f"{shown_settings(c['settings'])}".rstrip())
    return 0


def shown_settings(settings: dict[str, Any]) -> str:
    """A crawl's settings on one line: ``delay=0.5 max_pages=100 headers=X-Client``."""
    return " ".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}"
                    for k, v in sorted(settings.items())) or "-"
