"""``crawler-tasks submit``: seeds (arguments or a file of lines) to the running workers."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..core.errors import BadInput
from ..core.program import parse_plugins
from ..core.settings import Settings
from ..service.celery_app import create_app
from ..stages.runtime import current
from ..stages.seed import build_requests, parse_seed_line, submit_to
from ..state.connection import check_broker


def _read_seeds(args: argparse.Namespace) -> list[Any]:

    seeds: list[Any] = list(args.urls)
    if args.file:
        try:
            handle = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")
        except OSError as exc:
            raise BadInput(f"--file: {exc.strerror}: {args.file}") from None
        with handle:
            for n, line in enumerate(handle, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                try:
                    seeds.append(parse_seed_line(line))
                except BadInput as exc:
                    raise BadInput(f"{args.file}:{n}: {exc}") from None
    if not seeds:
        raise BadInput("no URL given (pass URLs or --file)")
    return seeds


def cmd_submit(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    if args.on_page_follow and not args.on_page:
        raise BadInput("--on-page-follow: needs --on-page")
    if args.on_change and args.revisit is None:
        raise BadInput("--on-change: needs --revisit")
    seeds = _read_seeds(args)
    plugins = parse_plugins(args.plugins or "", "--plugins")
    requests = build_requests(seeds, priority=args.priority, crawl_id=args.crawl_id,
                              dont_filter=args.dont_filter, max_url_length=settings.max_url_length)
    check_broker(settings.broker_url)
    accepted = submit_to(current(create_app(settings)), seeds, priority=args.priority, crawl_id=args.crawl_id,
                         dont_filter=args.dont_filter, plugins=plugins, on_page=args.on_page,
                         on_page_follow=args.on_page_follow, on_done=args.on_done, revisit=args.revisit,
                         on_change=args.on_change)
    print(f"enqueued {accepted} of {len(requests)} URL(s) "
          f"({len(requests) - accepted} already seen)")
    return 0
