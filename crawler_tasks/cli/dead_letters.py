"""``crawler-tasks dead-letters`` and ``replay-dead``: records a store refused or could not take."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..backends import open_store
from ..core.settings import Settings
from ..stages.dead_letters import dead_letters, replay_dead
from .common import EXIT_UNAVAILABLE, absolute_store, state_runtime


def cmd_dead_letters(args: argparse.Namespace) -> int:
    rt = state_runtime()
    entries = dead_letters(rt, args.crawl_id)
    if args.json:
        for entry in entries:
            print(json.dumps(entry, ensure_ascii=False))
    else:
        for entry in entries:
            record = entry["record"]
            print(f"{entry['at']}  {record['crawl_id']}  {record['url']}  -> {entry['store']}  "
                  f"{entry['kind']}: {entry['error']}")
        print(f"{len(entries)} dead letter(s)", file=sys.stderr)
    _say_unreadable(rt)
    return 0


def _say_unreadable(rt: Any) -> None:
    if n := rt.dead_letters.unreadable_count():
        print(f"{n} unreadable dead letter(s) or store entries set aside in Redis at "
              f"{rt.dead_letters.unreadable_key}", file=sys.stderr)


def cmd_replay_dead(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    to = None
    if args.to is not None:
        to = absolute_store(args.to)
        open_store(to, settings).close()  # a malformed URI is one line, before any letter moves
    rt = state_runtime()
    done = replay_dead(rt, args.crawl_id, to=to)
    for url, store, reason in done.failing:
        print(f"still failing: {url}  -> {store}: {reason}", file=sys.stderr)
    _say_unreadable(rt)
    print(f"replayed {done.written} dead letter(s); {len(done.failing)} still failing (kept)")
    return 0 if not done.failing else EXIT_UNAVAILABLE
