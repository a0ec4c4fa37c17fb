#!/usr/bin/env python3
"""bench/hosts: a crawl of a multi-host local site, to measure what the host limiter costs.

--hosts site servers (bench/site_server.py, one process each, each its own
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
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV_PY = HERE.parents[1] / ".venv" / "bin" / "python"
sys.path.insert(0, str(HERE.parent / "lib"))

from site_gen import ensure_site  # noqa: E402


def start_sites(root: Path, n: int, latency: float) -> tuple[list[subprocess.Popen], list[int]]:
    procs, ports = [], []
    for _ in range(n):
        proc = subprocess.Popen([sys.executable, str(HERE.parent / "lib" / "site_server.py"), "--root", str(root),
                                 "--latency", str(latency)], stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
        line = proc.stdout.readline()
        if not line.startswith("listening"):
            raise SystemExit(f"bench/hosts: site server did not start: {line!r}")
        procs.append(proc)
        ports.append(int(line.split()[1]))
    return procs, ports


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
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    out = subprocess.run([str(cli), "crawl", *urls, "--workers", str(workers), "--quiet"],
                         env=env, capture_output=True, text=True, cwd=workdir, check=False)
    elapsed = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(workdir, ignore_errors=True)
    if out.returncode != 0:
        raise SystemExit(f"bench/hosts: crawl failed ({out.returncode}): {out.stderr[-500:]}")
    summary = dict(line.split(None, 1) if " " in line else (line, "")
                   for line in out.stdout.splitlines() if line.strip())
    pages = int(summary.get("pages", "0 0").split()[-1]) if "pages" in summary else 0
    for line in out.stdout.splitlines():
        if line.startswith("pages stored"):
            pages = int(line.split()[-1])
        if line.startswith("elapsed"):
            elapsed = float(line.split()[-1].rstrip("s"))
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return pages, elapsed, cpu


def limiter_cost(pairs: int = 5000, hosts: int = 10) -> tuple[float, float]:
    """(client CPU µs, Redis CPU µs) of one acquire + release, on a private redis-server."""
    sys.path.insert(0, str(HERE.parents[1]))
    import redis

    from crawler_tasks.cli.local import free_port
    from crawler_tasks.core.politeness import Feedback
    from crawler_tasks.core.settings import Settings
    from crawler_tasks.state.hosts import HostLimiter
    from crawler_tasks.state.keys import Keys

    port, workdir = free_port(), tempfile.mkdtemp(prefix="bench-hosts-redis-")
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", workdir], stdout=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
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
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


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
    pythons = args.python or [VENV_PY]
    site = ensure_site(args.pages)
    procs, ports = start_sites(site.root, args.hosts, args.latency)
    urls = [f"http://127.0.0.1:{p}/" for p in ports]
    rows = []
    try:
        for r in range(args.rounds):
            for py in pythons:
                pages, secs, cpu = crawl(py, urls, args.workers, args.concurrency)
                rows.append((r + 1, py, pages, secs, cpu))
                print(f"round {r + 1} {py}: {pages} pages in {secs:.1f}s", file=sys.stderr, flush=True)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()
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
