#!/usr/bin/env python3
"""bench/revisit: what a revisit schedule costs in Redis, and what one Beat tick costs.

Starts a private redis-server (as broker and state, as a user runs it), schedules --urls
URLs of one crawl (realistic URLs of 200 hosts, 40–90 bytes), and prints Redis' memory
growth per URL; then makes --due of them due and times one ``crawl.revisit`` tick
(``stages.revisit.send_due``: take the due URLs, build their requests, gate them and
write them to the broker), and the Redis memory the sent messages hold. The model for a
larger schedule: bytes per URL times URLs (one sorted-set member each, nothing else).

    bench/revisit                       # 25,000 URLs (1/40 of a million), 10,000 due
    bench/revisit --urls 1000000 --due 10000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ROOT, ensure_project_python  # noqa: E402

ensure_project_python("bench/revisit", "redis")
sys.path.insert(0, str(ROOT))

from servers import private_redis  # noqa: E402

from crawler_tasks.core.revisit import Slot  # noqa: E402
from crawler_tasks.core.settings import Settings  # noqa: E402


def url(i: int) -> str:
    return f"https://forum{i % 200}.example.org/t/{i * 7919 % 1_000_003}/post-{i}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--urls", type=int, default=25_000)
    ap.add_argument("--due", type=int, default=10_000)
    args = ap.parse_args()
    with private_redis("revisit", binary="redis-server") as server:
        from crawler_tasks.service.celery_app import create_app
        from crawler_tasks.stages import revisit
        from crawler_tasks.stages.runtime import Runtime

        settings = Settings(broker_url=server.url, redis_url=server.url, revisit_batch=args.due,
                            private_allowlist=("0.0.0.0/0",))
        rt = Runtime(settings, create_app(settings))
        client = rt.redis
        crawl = "bench"
        rt.crawls.register(crawl, domains=["example.org"], revisit=86400)
        client.execute_command("MEMORY", "PURGE")
        before = int(client.info("memory")["used_memory"])
        now, chunk = time.time(), 5000
        lengths = 0
        for start in range(0, args.urls, chunk):
            pipe = client.pipeline(transaction=False)
            for i in range(start, min(args.urls, start + chunk)):
                u = url(i)
                lengths += len(u)
                due = now - 1 if i < args.due else now + 86400
                rt.revisits.schedule(crawl, u, Slot(due, 86400.0, False, 1 + i % 3), pipe)
            pipe.execute()
        grown = int(client.info("memory")["used_memory"]) - before
        per_url = grown / args.urls
        started = time.perf_counter()
        cpu = time.process_time()
        sent = revisit.send_due(rt).get(crawl, 0)
        tick_s, tick_cpu = time.perf_counter() - started, time.process_time() - cpu
        after = int(client.info("memory")["used_memory"]) - before - grown
        print(f"### bench/revisit: {args.urls:,} URLs scheduled, {args.due:,} due\n")
        print("| Figure | Value |\n|---|---|")
        print(f"| Redis memory per scheduled URL (mean URL {lengths / args.urls:.0f} bytes) | {per_url:.0f} B |")
        print(f"| Model: 1,000,000 URLs | {per_url * 1e6 / 2**20:.0f} MiB |")
        print(f"| One tick: URLs sent | {sent:,} |")
        print(f"| One tick: wall time | {tick_s:.2f} s ({tick_s / max(sent, 1) * 1e6:.0f} µs a URL) |")
        print(f"| One tick: the ticking process's CPU | {tick_cpu:.2f} s |")
        print(f"| Broker memory the sent fetches hold | {after / max(sent, 1):.0f} B a fetch |")
        rt.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
