#!/usr/bin/env python3
"""bench/slots: how full a capped host's slots stay, seen from the site.

    bench/slots/slots.py [--pages 10000] [--latency 0.05] [--cap 16] [--threads 32]
                         [--runs 2] [--before CHECKOUT]

With a cap of C requests at a time per host and a site answering after L seconds, a crawl
of one host cannot go faster than C / L pages a second. How close it comes is how full
the host's C slots stay: the site server here notes when each request arrived and when
its response was sent, and this prints the mean of requests in flight at the site over
the middle 80 % of the crawl (C at best), the rate in that window, the wall time of
``crawler-tasks crawl`` from start to exit and its process tree's CPU per page. With
``--before`` each round runs that checkout first (on ``PYTHONPATH``), then this one.
One private redis-server is the broker and state, as a user runs it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIB = HERE.parent / "lib"
sys.path.insert(0, str(LIB))

from one_crawl import crawl_once, helper  # noqa: E402
from servers import private_redis  # noqa: E402
from site_gen import ensure_site  # noqa: E402
from timed_site import in_flight  # noqa: E402


def one_run(args: argparse.Namespace, root: Path, checkout: str | None) -> str:
    env = {"CRAWLER_WORKER_CONCURRENCY": str(args.threads), "CRAWLER_HOST_CONCURRENCY": str(args.cap)}
    if checkout:
        env["PYTHONPATH"] = checkout
    with tempfile.TemporaryDirectory(prefix="bench-slots-") as tmp, private_redis("slots") as redis:
        work = Path(tmp)
        with helper(LIB / "timed_site.py", root, args.latency, work / "times.json") as port:
            wall, cpu = crawl_once(args.crawler, f"http://127.0.0.1:{port}/", redis.url, work, env, "bench/slots")
        times = json.loads((work / "times.json").read_text())
    mean, rate = in_flight(times)
    return (f"{checkout or 'this checkout'}: {len(times)} requests, wall {wall:.1f} s "
            f"({len(times) / wall:.0f}/s), in flight {mean:.2f} of {args.cap}, {rate:.0f} requests/s "
            f"in the window, CPU {cpu / len(times) * 1000:.2f} ms/page")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--cap", type=int, default=16)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--before", help="a checkout of the code before, run first in each round")
    parser.add_argument("--crawler", default=str(Path(sys.executable).with_name("crawler-tasks")))
    args = parser.parse_args()
    root = ensure_site(args.pages).root
    print(f"{args.pages} pages, {args.latency * 1000:.0f} ms per response, cap {args.cap} per host, "
          f"{args.threads} threads: at most {args.cap / args.latency:.0f} pages/s" if args.latency else "")
    for n in range(args.runs):
        for checkout in ([args.before] if args.before else []) + [None]:
            print(f"[round {n + 1}] {one_run(args, root, checkout)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
