#!/usr/bin/env python3
"""bench/defer: what waiting fetches cost: countdown (ETA) messages against the host waiting room.

--fetches fetches spread over --hosts hosts must wait --wait seconds, with one
real ``celery worker`` (threads, --concurrency) on a private redis-server as
broker and state. Two ways are measured:

``countdown``     each is published with a countdown (``publish_fetch(..., countdown=)``,
                  how a ``Defer`` was applied before the waiting room): a countdown
                  message is pulled at once and held unacknowledged until it is due,
                  whatever the prefetch.
``waiting-room``  each is published as a plain fetch to a host paused by a 429 with
                  ``Retry-After: --wait``: the worker takes it, the host limiter says
                  wait, and the fetch is parked in Redis (:mod:`crawler_tasks.state.hosts`)
                  and its message acknowledged.

It prints how many messages the worker holds, the worker's RSS growth, what is
left in the broker queue, and Redis memory per waiting fetch.

    bench/defer                                   # both, 10,000 fetches, 200 hosts, 120 s away
    bench/defer --mode waiting-room --fetches 2000 --hosts 50 --wait 60
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ROOT, ensure_project_python  # noqa: E402

ensure_project_python("bench/defer", "psutil", "redis")
sys.path.insert(0, str(ROOT))  # crawler_tasks from this checkout first

import redis  # noqa: E402
from measure import tree_rss  # noqa: E402
from servers import private_redis  # noqa: E402

from crawler_tasks.broker.lists import redis_list  # noqa: E402
from crawler_tasks.cli.local import Workers  # noqa: E402
from crawler_tasks.core.models import CrawlRequest  # noqa: E402
from crawler_tasks.core.politeness import Feedback, host_key  # noqa: E402
from crawler_tasks.core.routing import FETCH_QUEUE, MAX_BAND  # noqa: E402
from crawler_tasks.core.settings import Settings  # noqa: E402
from crawler_tasks.service.celery_app import create_app  # noqa: E402
from crawler_tasks.stages import enqueue  # noqa: E402
from crawler_tasks.stages.runtime import Runtime  # noqa: E402


def waiting_in_queue(client: redis.Redis) -> int:
    return sum(client.llen(redis_list(FETCH_QUEUE, band)) for band in range(MAX_BAND + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetches", type=int, default=10_000)
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--wait", type=float, default=120.0, help="seconds each fetch is deferred")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds to let the worker take them")
    parser.add_argument("--mode", choices=("both", "countdown", "waiting-room"), default="both")
    args = parser.parse_args()
    for mode in ("countdown", "waiting-room") if args.mode == "both" else (args.mode,):
        measure(args, mode)


def measure(args: argparse.Namespace, mode: str) -> None:
    with private_redis("defer", binary="redis-server") as server:
        measure_on(args, mode, server.url)


def measure_on(args: argparse.Namespace, mode: str, url: str) -> None:
    client = redis.Redis.from_url(url)
    settings = Settings.from_env(broker_url=url, redis_url=url, key_prefix="bdefer",
                                 visibility_timeout=int(args.wait * 3),
                                 retry_backoff_max=args.wait * 2, robotstxt_obey=False)
    rt = Runtime(settings, create_app(settings))
    workers = Workers(settings, name="defer@%h", pool="threads", concurrency=args.concurrency)
    try:
        workers.start()
        time.sleep(3)
        base_rss = tree_rss(workers.proc.pid)
        base_mem = client.info("memory")["used_memory"]
        if mode == "waiting-room":  # every host answered 429, Retry-After: --wait
            for h in range(args.hosts):
                rt.hosts.release(host_key(f"http://host{h}.test/"), "-",
                                 Feedback("throttled", 429, retry_after=args.wait))
        start = time.perf_counter()
        for i in range(args.fetches):
            req = CrawlRequest(url=f"http://host{i % args.hosts}.test/p/{i}", crawl_id="defer")
            enqueue.publish_fetch(rt, req, f"defer-{i}",
                                  countdown=args.wait if mode == "countdown" else 0)
        published = time.perf_counter() - start
        time.sleep(args.settle)
        unacked = client.hlen("unacked")
        queued = waiting_in_queue(client)
        rss = tree_rss(workers.proc.pid)
        mem = client.info("memory")["used_memory"]
        n = args.fetches
        parked = rt.hosts.waiting() if mode == "waiting-room" else 0
        title = ("countdown messages" if mode == "countdown"
                 else f"the host waiting room ({parked:,} parked in Redis)")
        print(f"### Deferred fetches as {title}: {n:,} fetches over {args.hosts} hosts, "
              f"{args.wait:g} s away, one worker (threads, {args.concurrency})\n")
        print("| figure | value |")
        print("|---|---|")
        print(f"| published/s | {n / published:,.0f} |")
        print(f"| held by the worker (unacked) | {unacked:,} of {n:,} (its prefetch: "
              f"{args.concurrency}) |")
        print(f"| still in the broker queue | {queued:,} |")
        print(f"| worker RSS growth | {(rss - base_rss) / 1e6:,.1f} MB "
              f"({(rss - base_rss) / n:,.0f} B per waiting fetch) |")
        print(f"| Redis memory growth | {(mem - base_mem) / 1e6:,.1f} MB "
              f"({(mem - base_mem) / n:,.0f} B per waiting fetch) |")
        print(f"\nEvery message the worker holds is redelivered if it dies or if it waits past "
              f"the visibility timeout ({settings.visibility_timeout} s here).")
    finally:
        workers.kill()
        rt.close()


if __name__ == "__main__":
    main()
