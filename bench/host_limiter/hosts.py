#!/usr/bin/env python3
"""bench/hosts: a crawl of a multi-host local site, to measure what the host limiter costs.

--hosts site servers (bench/lib/site_server.py, one process each, each its own
``127.0.0.1:<port>`` host) serve the same generated site of --pages pages, so
one ``crawler-tasks crawl`` of their roots fetches hosts × pages pages. With
``CRAWLER_DOWNLOAD_DELAY=0`` and a host concurrency no lower than the worker
slots nothing waits, and what is left is the limiter's own work on every page
(acquire and release in Redis). Prints pages/s and CPU ms per page (the crawl
command and its workers). --python runs the crawl with another checkout's
interpreter (its ``crawler-tasks`` next to it), so two versions of the code run
the same crawl in turn. It also times the limiter's two script calls alone
(acquire and release, as each page makes them) on a private redis-server: the
client CPU and Redis CPU they add to a page.

    bench/hosts --hosts 10 --pages 300 --rounds 2 --python /tmp/before/.venv/bin/python
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import PROJECT_PYTHON, ROOT, ensure_project_python  # noqa: E402

ensure_project_python("bench/hosts", "redis")

import redis  # noqa: E402
from harness import parse_summary, seconds  # noqa: E402
from measure import children_cpu  # noqa: E402
from servers import Children, log, private_redis, start_site  # noqa: E402
from site_gen import ensure_site  # noqa: E402


def crawl(python: Path, urls: list[str], workers: int, concurrency: int) -> tuple[int, float, float]:
    """(pages stored, seconds, CPU seconds of the crawl and its workers)."""
    workdir = tempfile.mkdtemp(prefix="bench-hosts-")
    unset = ("CRAWLER_BROKER_URL", "CRAWLER_REDIS_URL")  # nothing configured: crawl's embedded Redis
    env = {**{k: v for k, v in os.environ.items() if k not in unset}, "CRAWLER_STORE": f"{workdir}/pages.db",
           "CRAWLER_WORKER_CONCURRENCY": str(concurrency), "CRAWLER_DOWNLOAD_DELAY": "0",
           "CRAWLER_HOST_CONCURRENCY": str(concurrency * workers), "CRAWLER_ROBOTSTXT_OBEY": "0",
           "CRAWLER_ALLOWED_DOMAINS": "127.0.0.1",
           "CRAWLER_PRIVATE_ALLOWLIST": "127.0.0.0/8"}  # the site is on loopback
    cli = python.parent / "crawler-tasks"
    cpu_before = children_cpu()
    started = time.monotonic()
    out = subprocess.run([str(cli), "crawl", *urls, "--workers", str(workers), "--quiet"],
                         env=env, capture_output=True, text=True, cwd=workdir, check=False)
    elapsed = time.monotonic() - started
    cpu = children_cpu() - cpu_before
    shutil.rmtree(workdir, ignore_errors=True)
    if out.returncode != 0:
        raise SystemExit(f"bench/hosts: crawl failed ({out.returncode}): {out.stderr[-500:]}")
    summary = parse_summary(out.stdout)  # the CLI's own: pages stored, and elapsed from its workers' start
    return int(summary.get("pages stored", "0")), seconds(summary.get("elapsed")) or elapsed, cpu


def limiter_cost(pairs: int = 5000, hosts: int = 10) -> tuple[float, float]:
    """(client CPU µs, Redis CPU µs) of one acquire + release, on a private redis-server."""
    sys.path.insert(0, str(ROOT))  # the limiter of this checkout
    from crawler_tasks.core.politeness import Feedback
    from crawler_tasks.core.settings import Settings
    from crawler_tasks.state.hosts import HostLimiter
    from crawler_tasks.state.keys import Keys

    with private_redis("hosts", binary="redis-server") as server:
        client = redis.Redis(host="127.0.0.1", port=server.port)
        limiter = HostLimiter(client, Keys("bench"), Settings(download_delay=0, host_concurrency=32))
        client.config_resetstat()
        cpu = time.process_time()
        for i in range(pairs):
            host = f"127.0.0.1:{8000 + i % hosts}"
            limiter.acquire(host, f"t{i}")
            limiter.release(host, f"t{i}", Feedback("ok", 200, None, 0.01))
        client_us = 1e6 * (time.process_time() - cpu) / pairs
        redis_us = client.info("commandstats")["cmdstat_evalsha"]["usec"] / pairs
        return client_us, redis_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--pages", type=int, default=300, help="pages per host")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each answer takes")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--python", type=Path, action="append", default=[],
                        help="interpreter of a checkout to crawl with (repeatable; default this one)")
    args = parser.parse_args()
    pythons = args.python or [PROJECT_PYTHON]
    site = ensure_site(args.pages)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Children() as group:  # a site server per host
        urls = [start_site(group, site.root, latency=args.latency, prefer="python", workdir=Path(tmp)).url
                for _ in range(args.hosts)]
        for r in range(args.rounds):
            for py in pythons:
                pages, secs, cpu = crawl(py, urls, args.workers, args.concurrency)
                rows.append((r + 1, py, pages, secs, cpu))
                log(f"round {r + 1} {py}: {pages} pages in {secs:.1f}s")
    print(f"### {args.hosts} hosts × {args.pages} pages, latency {args.latency:g} s, delay 0, "
          f"{args.workers} worker(s) × {args.concurrency} threads\n")
    print("| round | code | pages | pages/s | CPU ms/page |")
    print("|---|---|---|---|---|")
    for r, py, pages, secs, cpu in rows:
        print(f"| {r} | {py.parent.parent.parent.name} | {pages} | {pages / secs:.0f} | "
              f"{1000 * cpu / max(pages, 1):.2f} |")
    client_us, redis_us = limiter_cost()
    print(f"\nThe limiter alone (acquire + release, {args.hosts} hosts): {client_us:.0f} µs client CPU "
          f"+ {redis_us:.0f} µs Redis CPU per page.")


if __name__ == "__main__":
    main()
