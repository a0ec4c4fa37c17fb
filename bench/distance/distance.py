#!/usr/bin/env python3
"""bench/distance: what the network between the workers and Redis costs a crawl.

    bench/distance/distance.py [--pages 3000] [--rtts direct,0,1,5] [--threads 32] [--latency 0]

One ``crawler-tasks crawl --workers 1`` of the bench site per round trip, its broker and
state one private redis-server reached through bench/lib/delay_proxy.py, which holds each
reply back that many milliseconds (``direct``: no proxy; ``0``: the proxy alone). Per
row: the round trip measured (the median of 200 PINGs through the proxy), pages/s from
start to exit, fetches in flight at the site (mean over the middle 80 % of the crawl),
Redis commands and proxied writes per page (a write being about one round trip), and
the CPU per page of the crawl and its workers. robots.txt, the delay and the cap per
host are off, as in bench/compare: one local host, and what is measured is Redis's distance.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis

LIB = Path(__file__).resolve().parent.parent / "lib"
sys.path.insert(0, str(LIB))

from one_crawl import crawl_once, helper  # noqa: E402
from servers import private_redis  # noqa: E402
from site_gen import ensure_site  # noqa: E402
from timed_site import in_flight  # noqa: E402


def measured_rtt(port: int) -> float:
    """Milliseconds of a PING's round trip through ``port`` (the median of 200)."""
    client = redis.Redis(host="127.0.0.1", port=port, single_connection_client=True)
    client.ping()
    times = []
    for _ in range(200):
        t = time.perf_counter()
        client.ping()
        times.append(time.perf_counter() - t)
    client.close()
    return statistics.median(times) * 1000


def one_row(args: argparse.Namespace, root: Path, rtt: str) -> str:
    env = {} if args.threads == "default" else {"CRAWLER_WORKER_CONCURRENCY": args.threads}
    with tempfile.TemporaryDirectory(prefix="bench-distance-") as tmp, private_redis("distance") as server:
        work = Path(tmp)
        stats_file, times_file = work / "proxy.json", work / "times.json"
        with helper(LIB / "timed_site.py", root, args.latency, times_file) as site_port:
            site = f"http://127.0.0.1:{site_port}/"
            if rtt == "direct":
                proxied = None
                before = server.counters()[0]
                wall, cpu = crawl_once(args.crawler, site, server.url, work, env, "bench/distance")
            else:
                with helper(LIB / "delay_proxy.py", "--target", f"127.0.0.1:{server.port}", "--rtt-ms", rtt,
                            "--stats", stats_file) as port:
                    proxied = measured_rtt(port)
                    before = server.counters()[0]
                    wall, cpu = crawl_once(args.crawler, site, f"redis://127.0.0.1:{port}/0", work, env,
                                           "bench/distance")
        commands = server.counters()[0] - before - 1  # less the first INFO
        times = json.loads(times_file.read_text())
        writes = json.loads(stats_file.read_text())["chunks"] if proxied is not None else None
    pages = len(times)
    mean, _ = in_flight(times)
    shown_rtt = "direct" if proxied is None else f"{proxied:.2f} ms"
    shown_writes = "–" if writes is None else f"{writes / pages:.1f}"
    return (f"| {rtt} | {shown_rtt} | {pages} | {pages / wall:.0f} | {mean:.2f} | {commands / pages:.1f} | "
            f"{shown_writes} | {cpu / pages * 1000:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--rtts", default="direct,0,1,5", help="round trips in ms, comma-separated")
    parser.add_argument("--threads", default="32", help="threads per worker process ('default': the crawler's)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds the site waits per response")
    parser.add_argument("--crawler", default=str(Path(sys.executable).with_name("crawler-tasks")))
    args = parser.parse_args()
    root = ensure_site(args.pages).root
    print(f"{args.pages} pages, {args.latency * 1000:.0f} ms per response, {args.threads} threads, one worker process\n")
    print("| RTT asked (ms) | RTT measured | Pages | Pages/s | Fetches in flight | Redis cmds/page "
          "| Writes to Redis/page | CPU ms/page |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for rtt in args.rtts.split(","):
        print(one_row(args, root, rtt.strip()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
