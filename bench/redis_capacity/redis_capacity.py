"""How many pages/s one Redis carries as broker and as state: measured, then modelled.

1. ``redis-benchmark`` on a private redis-server: single commands/s of the
   kinds a crawl sends (LPUSH, RPOP, HSET, SADD, EVAL of a small script).
2. A crawl of the generated site by one worker process on two private
   redis-servers (broker, state): commands, input bytes and Redis CPU
   (``used_cpu_user + used_cpu_sys``) per page for each.

From (2), one Redis core carries ``1e6 / (Redis CPU µs per page)`` pages/s;
(1) cross-checks it with ``commands/s ÷ commands per page``::

    python bench/redis_capacity/redis_capacity.py [--pages 3000]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ROOT, ensure_project_python  # noqa: E402

ensure_project_python("bench/redis_capacity/redis_capacity.py", "redis")
sys.path.insert(0, str(ROOT))  # crawler_tasks from this checkout first

import redis  # noqa: E402
from servers import Children, start_site  # noqa: E402
from site_gen import ensure_site  # noqa: E402

TESTS = "lpush,rpop,hset,sadd"


def redis_benchmark(port: int) -> dict[str, float]:
    """requests/s per command kind, 50 clients, no pipelining (as workers talk to Redis)."""
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-q", "-n", "200000", "-c", "50",
                          "-t", TESTS], capture_output=True, text=True, check=True).stdout
    rates = {m.group(1).lower(): float(m.group(2))
             for m in re.finditer(r"^(\w+)[^:]*: ([\d.]+) requests per second", out, re.M)}
    script = "redis.call('SADD', KEYS[1], ARGV[1]); redis.call('HINCRBY', KEYS[2], 'n', 1); return 1"
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-q", "-n", "100000", "-c", "50",
                          "eval", script, "2", "s:__rand_int__", "h", "__rand_int__"],
                         capture_output=True, text=True, check=True).stdout
    rates["eval (SADD+HINCRBY)"] = float(re.search(r"([\d.]+) requests per second", out).group(1))
    return rates


def cpu_and_counters(url: str) -> tuple[float, int, int]:
    client = redis.Redis.from_url(url)
    cpu = client.info("cpu")
    stats = client.info("stats")
    return (cpu["used_cpu_user"] + cpu["used_cpu_sys"], stats["total_commands_processed"],
            stats["total_net_input_bytes"])


def crawl(pages: int) -> dict[str, dict[str, float]]:
    site = ensure_site(pages)
    with tempfile.TemporaryDirectory() as tmp, Children() as group:
        url = start_site(group, site.root, latency=0.0, prefer="python", workdir=Path(tmp)).url
        return crawl_site(url)


def crawl_site(url: str) -> dict[str, dict[str, float]]:
    from crawler_tasks.cli.local import EmbeddedRedis, Workers, wait_drained

    broker, state = EmbeddedRedis().start(), EmbeddedRedis().start()
    os.environ.update({"CRAWLER_BROKER_URL": broker.url, "CRAWLER_REDIS_URL": state.url,
                       "CRAWLER_STORE": os.path.join(tempfile.mkdtemp(), "pages.db"),
                       # As bench/compare's rows: no delay, no host cap, no robots.txt, 32 threads.
                       "CRAWLER_DOWNLOAD_DELAY": "0", "CRAWLER_HOST_CONCURRENCY": "0",
                       "CRAWLER_ROBOTSTXT_OBEY": "0", "CRAWLER_WORKER_CONCURRENCY": "32",
                       "CRAWLER_PRIVATE_ALLOWLIST": "127.0.0.0/8"})  # the site is on loopback
    from crawler_tasks.core.settings import Settings
    from crawler_tasks.service.celery_app import app
    from crawler_tasks.stages.runtime import current
    from crawler_tasks.stages.seed import build_requests, submit_requests

    rt = current(app)
    workers = Workers(Settings.from_env(), name="capacity@%h").start()
    try:
        time.sleep(3)
        before = {name: cpu_and_counters(r.url) for name, r in (("broker", broker), ("state", state))}
        submit_requests(rt, build_requests(url, crawl_id="capacity"))
        wait_drained(lambda: rt.crawls.outstanding("capacity") == 0, poll=0.5, workers=workers)
        after = {name: cpu_and_counters(r.url) for name, r in (("broker", broker), ("state", state))}
        stored = rt.stats.read("capacity")["stored"]
    finally:
        workers.stop()
        broker.stop()
        state.stop()
    return {name: {"cpu_us_page": 1e6 * (after[name][0] - before[name][0]) / stored,
                   "cmds_page": (after[name][1] - before[name][1]) / stored,
                   "bytes_page": (after[name][2] - before[name][2]) / stored}
            for name in before}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pages", type=int, default=3000)
    args = p.parse_args()
    from crawler_tasks.cli.local import EmbeddedRedis

    bench_redis = EmbeddedRedis().start()
    try:
        rates = redis_benchmark(bench_redis.port)
    finally:
        bench_redis.stop()
    print("| command (redis-benchmark, 50 clients, no pipelining) | requests/s |")
    print("|---|---|")
    for name, rate in rates.items():
        print(f"| {name} | {rate:,.0f} |")
    per_page = crawl(args.pages)
    print("\n| Redis | commands/page | input bytes/page | Redis CPU µs/page | pages/s per Redis core |")
    print("|---|---|---|---|---|")
    for name, row in per_page.items():
        print(f"| {name} | {row['cmds_page']:.1f} | {row['bytes_page']:,.0f} | "
              f"{row['cpu_us_page']:.0f} | {1e6 / row['cpu_us_page']:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
