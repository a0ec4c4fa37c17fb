"""Seed a crawl with ``crawler_tasks.submit()`` once the workers answer (bench/compare, bench/broad).

    CRAWLER_BROKER_URL=... CRAWLER_REDIS_URL=... python bench/lib/submit_seed.py URL [URL ...] --crawl-id ID --workers N

Imports crawler_tasks with the environment it was started with, pings until
``--workers`` workers answer, prints ``ready``, waits for a line on stdin, then
submits (the URLs in one call) and prints ``{"t0": <time.time() before submit>, "accepted": <n>}``.
The harness reads the Redis counters between ``ready`` and its go line, so
start-up and pings are not counted as crawl traffic.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("urls", nargs="+", metavar="URL")
    parser.add_argument("--crawl-id", required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()

    from crawler_tasks import app, submit

    deadline = time.monotonic() + args.timeout
    answered = 0
    while answered < args.workers:
        if time.monotonic() > deadline:
            print(f"error: {answered} of {args.workers} workers answered a ping within {args.timeout:.0f}s",
                  flush=True)
            return 1
        answered = len(app.control.ping(timeout=0.5) or [])
    print("ready", flush=True)
    if not sys.stdin.readline():
        return 1
    t0 = time.time()
    accepted = submit(args.urls[0] if len(args.urls) == 1 else args.urls, crawl_id=args.crawl_id)
    print(json.dumps({"t0": t0, "accepted": accepted}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
