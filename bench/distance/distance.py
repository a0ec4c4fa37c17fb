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
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

LIB = Path(__file__).resolve().parent.parent / "lib"
sys.path.insert(0, str(LIB))

from servers import private_redis  # noqa: E402
from site_gen import ensure_site  # noqa: E402
from timed_site import in_flight  # noqa: E402


@contextmanager
def child(cmd: list[str]) -> Iterator[int]:
    """A helper process that prints ``listening <port>``: its port, SIGTERMed on leaving."""
    proc = subprocess.Popen([sys.executable, *cmd], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline().split()[1])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()


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
    with tempfile.TemporaryDirectory(prefix="bench-distance-") as tmp, private_redis("distance") as server:
        work = Path(tmp)
        stats_file, times_file = work / "proxy.json", work / "times.json"
        with child([str(LIB / "timed_site.py"), str(root), str(args.latency), str(times_file)]) as site_port:
            if rtt == "direct":
                port, proxied = server.port, None
                crawl = _crawl(args, site_port, server.url, work)
            else:
                with child([str(LIB / "delay_proxy.py"), "--target", f"127.0.0.1:{server.port}",
                            "--rtt-ms", rtt, "--stats", str(stats_file)]) as port:
                    proxied = measured_rtt(port)
                    crawl = _crawl(args, site_port, f"redis://127.0.0.1:{port}/0", work, server)
        times = json.loads(times_file.read_text())
        writes = json.loads(stats_file.read_text())["chunks"] if proxied is not None else None
    wall, cpu, commands = crawl
    pages = len(times)
    mean, _ = in_flight(times)
    shown_rtt = "direct" if proxied is None else f"{proxied:.2f} ms"
    shown_writes = "–" if writes is None else f"{writes / pages:.1f}"
    return (f"| {rtt} | {shown_rtt} | {pages} | {pages / wall:.0f} | {mean:.2f} | {commands / pages:.1f} | "
            f"{shown_writes} | {cpu / pages * 1000:.2f} |")


def _crawl(args: argparse.Namespace, site_port: int, url: str, work: Path,
           server: object | None = None) -> tuple[float, float, int]:
    """The crawl: wall seconds, CPU seconds of it and its workers, Redis commands it sent."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(CRAWLER_BROKER_URL=url, CRAWLER_REDIS_URL=url, CRAWLER_STORE=str(work / "pages.db"),
               CRAWLER_ROBOTSTXT_OBEY="0", CRAWLER_DOWNLOAD_DELAY="0", CRAWLER_HOST_CONCURRENCY="0",
               CRAWLER_PRIVATE_ALLOWLIST="127.0.0.0/8")
    if args.threads != "default":
        env["CRAWLER_WORKER_CONCURRENCY"] = args.threads
    counters = redis.Redis.from_url(url if server is None else server.url)  # type: ignore[attr-defined]
    before_commands = int(counters.info("stats")["total_commands_processed"])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    code = subprocess.call([args.crawler, "crawl", f"http://127.0.0.1:{site_port}/", "--workers", "1", "--quiet",
                            "--store", str(work / "pages.db")], env=env, cwd=work,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        raise SystemExit(f"bench/distance: crawler-tasks exited with code {code}")
    commands = int(counters.info("stats")["total_commands_processed"]) - before_commands - 1
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, commands


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
