#!/usr/bin/env python3
"""What a short crawl pays before and after its pages: a one-page crawl, whole process tree,
beside Scrapy's, and the time a worker takes to be ready for tasks.

    bench/startup/startup.py [--runs 5] [--before CHECKOUT]

The site is the quick start's demo site cut to one page that links only to itself, on
loopback (and a 404 for robots.txt). Rows:

- ``crawler-tasks crawl URL`` as a user types it (its defaults: one worker process per core,
  robots.txt obeyed), on a private redis-server that is broker and state;
- ``scrapy runspider`` of a one-page spider writing a JSON-lines feed (its defaults);
- ``celery -A crawler_tasks worker`` from its start to its ``ready.`` line.

``--before`` adds the same crawler rows run with another checkout's package
(``PYTHONPATH``), in the same rounds. Prints min, median and max wall seconds per row.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ensure_project_python  # noqa: E402

ensure_project_python("bench/startup/startup.py")

from harness import ensure_scrapy_venv  # noqa: E402
from servers import private_redis  # noqa: E402

from crawler_tasks.cli.demo_site import DemoSite  # noqa: E402

SPIDER = '''import scrapy
class One(scrapy.Spider):
    name = "one"
    start_urls = ["{url}"]
    def parse(self, response):
        yield {{"url": response.url, "title": response.css("title::text").get()}}
'''


def timed(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    started = time.monotonic()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])}... failed: {done.stderr[-500:]}")
    return took


def ready_after(env: dict[str, str], cwd: str) -> float:
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "crawler_tasks", "worker", "-l", "INFO",
                             "-n", f"startup{os.getpid()}@%h", "--without-mingle", "--without-gossip"],
                            env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if " ready." in line:
                return time.monotonic() - started
        raise SystemExit("the worker exited before it was ready")
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--before", help="another checkout of the project, for rows beside these")
    args = p.parse_args()
    scrapy = ensure_scrapy_venv().parent / "scrapy"
    rows: dict[str, list[float]] = {}
    with DemoSite(pages=1) as site, private_redis("startup") as redis, tempfile.TemporaryDirectory() as work:
        url = f"{site.url}page/0"  # links only to itself
        Path(work, "one.py").write_text(SPIDER.format(url=url))
        # As a user's machine runs it: bytecode cached (an environment that says not to write
        # it would have every run compile the package again, a few hundred ms).
        base = {k: v for k, v in os.environ.items()
                if not k.startswith("CRAWLER_") and k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
        env = {**base, "CRAWLER_BROKER_URL": redis.url, "CRAWLER_REDIS_URL": redis.url}
        sides = [("", env)]
        if args.before:
            rev = subprocess.run(["git", "-C", args.before, "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip() or Path(args.before).name
            sides.append((f" (at {rev})", {**env, "PYTHONPATH": str(Path(args.before).resolve())}))
        crawler = str(Path(sys.executable).parent / "crawler-tasks")
        for tag, side in sides:  # a first, uncounted run writes the bytecode
            timed([sys.executable, crawler, "crawl", "--quiet", "--store", f"{work}/warm{len(tag)}.db", url], side, work)
        for n in range(args.runs):
            for tag, side in sides:
                rows.setdefault(f"`crawler-tasks crawl` of one page{tag}", []).append(
                    timed([sys.executable, crawler, "crawl", "--quiet", "--store", f"{work}/p{n}{len(tag)}.db", url],
                          side, work))
                rows.setdefault(f"`celery -A crawler_tasks worker` ready{tag}", []).append(ready_after(side, work))
            rows.setdefault("`scrapy runspider` of one page", []).append(
                timed([str(scrapy), "runspider", "one.py", "-o", f"{work}/out{n}.jsonl", "-s", "LOG_LEVEL=ERROR"],
                      base, work))
            print(f"round {n + 1}/{args.runs} done", file=sys.stderr)
    print(f"### Start-up, {args.runs} runs, one Redis (private) as broker and state\n")
    print("| Row | Wall s (median, min–max) |\n|---|---|")
    for name, times in rows.items():
        print(f"| {name} | {statistics.median(times):.2f} ({min(times):.2f}–{max(times):.2f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
