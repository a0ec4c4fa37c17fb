#!/usr/bin/env python3
"""What one scrape of ``crawler-tasks metrics`` costs on a busy cluster's Redis.

    bench/metrics_scrape/metrics_scrape.py [--crawls 100] [--hosts 10000] [--seen 5000] [--scrapes 20]

Fills a private redis-server with ``--crawls`` crawls (each with its counters, an
outstanding set and an exact gate of ``--seen`` URLs) and ``--hosts`` hosts with
fetches in their waiting rooms, then times the exporter's collector (the work of one
scrape: every Redis command and the metric families built) and an HTTP scrape of a
real exporter process. Prints milliseconds and Redis commands per scrape.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ensure_project_python  # noqa: E402

ensure_project_python("bench/metrics_scrape/metrics_scrape.py")

from servers import free_port, private_redis  # noqa: E402

from crawler_tasks.core.settings import Settings  # noqa: E402
from crawler_tasks.service.celery_app import create_app  # noqa: E402
from crawler_tasks.service.metrics import CrawlCollector  # noqa: E402
from crawler_tasks.stages.runtime import Runtime  # noqa: E402
from crawler_tasks.state.keys import Keys  # noqa: E402


def fill(client, keys: Keys, crawls: int, hosts: int, seen: int) -> None:
    now = time.time()
    for c in range(crawls):
        cid = f"crawl{c:03d}"
        pipe = client.pipeline(transaction=False)
        pipe.sadd(keys.crawls(), cid)
        pipe.hset(keys.stats(cid), mapping={"status/200": 900 + c, "status/404": 12, "status/500": 3,
                                            "stored": 915, "retries": 9, "failures": 3,
                                            "retry/max_reached/http_500": 3, "redirects": 40,
                                            "total_request_size": 250_000, "total_response_size": 18_000_000,
                                            "duplicates": 5000, "gate/admitted": 1000, "items/kept": 300})
        pipe.sadd(keys.outstanding(cid), *[f"t{c}-{i}" for i in range(10)])
        for start in range(0, seen, 1000):
            pipe.sadd(keys.seen(cid), *[f"{c:03d}{i:037x}" for i in range(start, min(seen, start + 1000))])
        pipe.execute()
    pipe = client.pipeline(transaction=False)
    for h in range(hosts):
        host = f"host{h:04d}.test:80"
        pipe.zadd(keys.hosts_due(0), {host: now + h})
        pipe.zadd(keys.hosts_recent(0), {host: now - h})
        pipe.zadd(keys.host_wait(host), {f"task{h}-{i}\t{{}}": i for i in range(5)})
        pipe.hset(keys.host(host), mapping={"delay": 1, "requests": 100})
    # The waiting fetches per crawl, as the waiting rooms' scripts keep them; a tenth of the
    # crawls paused, each holding 500 fetches.
    pipe.hset(keys.hosts_waiting_crawls(0), mapping={f"crawl{c:03d}": hosts * 5 // crawls for c in range(crawls)})
    for c in range(0, crawls, 10):
        pipe.hset(keys.crawl(f"crawl{c:03d}"), "control", "paused")
        pipe.rpush(keys.held(f"crawl{c:03d}"), *[f"held-{i}" for i in range(500)])
    pipe.execute()


def commands(client) -> int:
    return int(client.info("stats")["total_commands_processed"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--crawls", type=int, default=100)
    p.add_argument("--hosts", type=int, default=10_000)
    p.add_argument("--seen", type=int, default=5000)
    p.add_argument("--scrapes", type=int, default=20)
    args = p.parse_args()
    with private_redis("metrics") as server:
        client = server.client()
        settings = Settings(broker_url=server.url, redis_url=server.url)
        fill(client, Keys(settings.key_prefix), args.crawls, args.hosts, args.seen)
        rt = Runtime(settings, create_app(settings))
        collector = CrawlCollector(rt)
        list(collector.collect())  # connections and scripts warmed
        before, started = commands(client), time.perf_counter()
        for _ in range(args.scrapes):
            samples = sum(len(m.samples) for m in collector.collect())
        ms = (time.perf_counter() - started) * 1000 / args.scrapes
        per_scrape = (commands(client) - before - 1) / args.scrapes
        port = free_port()
        exporter = subprocess.Popen([sys.executable, "-m", "crawler_tasks.cli.main", "metrics", "--port",
                                     str(port)], env={**os.environ, **settings.to_env()},
                                    stderr=subprocess.PIPE, text=True)
        try:
            assert exporter.stderr is not None
            exporter.stderr.readline()
            url = f"http://127.0.0.1:{port}/metrics"
            urllib.request.urlopen(url, timeout=30).read()
            started = time.perf_counter()
            for _ in range(args.scrapes):
                size = len(urllib.request.urlopen(url, timeout=30).read())
            http_ms = (time.perf_counter() - started) * 1000 / args.scrapes
        finally:
            exporter.terminate()
            exporter.wait(10)
    print(f"{args.crawls} crawls (gates of {args.seen:,} URLs each), {args.hosts:,} hosts with waiting fetches")
    print(f"collector: {ms:.1f} ms per scrape, {per_scrape:.0f} Redis commands per scrape, {samples:,} samples")
    print(f"HTTP scrape of a running exporter: {http_ms:.1f} ms, {size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
