"""Crawl a generated local site of N pages with 1 and 2 worker processes (quick check).

``bench/compare`` is the side-by-side benchmark against Scrapy and scrapy-redis;
this one only measures crawler_tasks on the small demo site.

Prints pages/s, CPU ms per page (all worker processes), Redis commands per
page and broker bytes per page. The broker and the state Redis are two private
embedded Redis servers, so their counters hold only this crawl's traffic.

    python bench/crawl_bench/crawl_bench.py [--pages 5000] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ROOT, ensure_project_python  # noqa: E402

ensure_project_python("bench/crawl_bench/crawl_bench.py", "redis")
sys.path.insert(0, str(ROOT))  # crawler_tasks from this checkout first

import redis  # noqa: E402


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _counters(url: str) -> tuple[int, int]:
    info = redis.Redis.from_url(url).info("stats")
    return info["total_commands_processed"], info["total_net_input_bytes"]


def run(pages: int, workers: int, site_url: str, pool: str | None = None) -> dict[str, float]:
    from crawler_tasks.cli.local import EmbeddedRedis, Workers, wait_drained
    from crawler_tasks.core.settings import Settings

    broker, state = EmbeddedRedis().start(), EmbeddedRedis().start()
    store = os.path.join(tempfile.mkdtemp(prefix="bench-"), "pages.db")
    settings = Settings(broker_url=broker.url, redis_url=state.url, store=store, download_delay=0,
                        host_concurrency=0, robotstxt_obey=False,
                        private_allowlist=("127.0.0.0/8",))  # the demo site is on loopback
    os.environ.update(settings.to_env())
    from crawler_tasks.service.celery_app import create_app
    from crawler_tasks.stages.runtime import Runtime
    from crawler_tasks.stages.seed import build_requests, submit_requests

    rt = Runtime(settings, create_app(settings))
    crawl_id = f"bench{workers}"
    cpu0 = _cpu_children()
    w = Workers(settings, processes=workers, pool=pool, name=f"bench{workers}@%h").start()
    time.sleep(2.0)  # worker start-up is not crawl time
    b0, s0 = _counters(broker.url), _counters(state.url)
    t0 = time.monotonic()
    submit_requests(rt, build_requests(site_url, crawl_id=crawl_id))
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, poll=0.1, workers=w)
    elapsed = time.monotonic() - t0
    b1, s1 = _counters(broker.url), _counters(state.url)
    stored = rt.stats.read(crawl_id).get("stored", 0)
    w.stop()
    cpu = _cpu_children() - cpu0
    rt.close()
    broker.stop()
    state.stop()
    return {
        "workers": workers, "pages": stored, "seconds": elapsed, "pages_s": stored / elapsed,
        "cpu_ms_page": 1000 * cpu / stored,
        "broker_cmds_page": (b1[0] - b0[0]) / stored, "state_cmds_page": (s1[0] - s0[0]) / stored,
        "broker_bytes_page": (b1[1] - b0[1]) / stored, "state_bytes_page": (s1[1] - s0[1]) / stored,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--pool", default=None,
                        help="celery pool of each worker process (default: CRAWLER_WORKER_POOL)")
    args = parser.parse_args()
    from crawler_tasks.cli.demo_site import DemoSite

    rows = []
    with DemoSite(args.pages) as site:
        for n in args.workers:
            rows.append(run(args.pages, n, site.url, args.pool))
            r = rows[-1]
            print(f"workers={r['workers']}: {r['pages']} pages in {r['seconds']:.1f}s", flush=True)
    print()
    print("| worker processes | pages | pages/s | CPU ms/page | Redis cmds/page (broker + state) "
          "| broker bytes/page | state bytes/page |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workers']} | {r['pages']} | {r['pages_s']:.1f} | {r['cpu_ms_page']:.1f} "
              f"| {r['broker_cmds_page']:.1f} + {r['state_cmds_page']:.1f} "
              f"| {r['broker_bytes_page']:.0f} | {r['state_bytes_page']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
