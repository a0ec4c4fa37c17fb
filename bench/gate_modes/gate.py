#!/usr/bin/env python3
"""bench/gate: 1,000,000 URLs through the gate in each mode, in page-sized batches.

Starts a private redis-server on a free port (so its memory is the gate's
alone), then for each mode admits N fresh URLs in batches of --batch (one
gate call per batch, as a page's links are gated), then offers the first
--dups of them again (the common case of a crawl: links already seen).
Prints one markdown table: admissions/s end to end (this Python client and
Redis on one machine), Redis-side µs per URL (from INFO commandstats), round trips
and Redis commands (those the script runs included) per batch, bytes per URL (the gate's own keys, and Redis'
used_memory growth), and refusals of fresh URLs (a Bloom gate's false
positives).

    bench/gate                       # 1,000,000 URLs, batches of 100, modes set and bloom
    bench/gate --urls 200000 --modes set,bloom,set-window,bloom-window
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ROOT, ensure_project_python  # noqa: E402

ensure_project_python("bench/gate", "redis")
sys.path.insert(0, str(ROOT))  # crawler_tasks from this checkout first

import redis  # noqa: E402
from servers import private_redis  # noqa: E402

from crawler_tasks.state.gate import Admission, Candidate, Gate  # noqa: E402
from crawler_tasks.state.keys import Keys  # noqa: E402
from crawler_tasks.state.seen import Bloom, SeenRecent, SeenSet  # noqa: E402

MODES = {
    "set": lambda keys, a: SeenSet(keys),
    "bloom": lambda keys, a: Bloom(keys, a.capacity, a.error_rate),
    "set-window": lambda keys, a: SeenRecent(keys, 3600),
    "bloom-window": lambda keys, a: Bloom(keys, a.capacity, a.error_rate, window=3600),
}


def batches(n: int, size: int, salt: str) -> list[list[Candidate]]:
    fps = [hashlib.sha1(f"GET http://site{i % 997}.test/p/{i}{salt}".encode()).hexdigest() for i in range(n)]
    return [[Candidate(fp, f"t{j}") for j, fp in enumerate(fps[i:i + size])] for i in range(0, n, size)]


def run(client: redis.Redis, mode: str, args: argparse.Namespace) -> dict[str, float]:
    client.flushdb()
    keys = Keys("bench")
    gate = Gate(client, keys, replay_ttl=60, seen=MODES[mode](keys, args))
    fresh = batches(args.urls, args.batch, "")
    gate.complete("warm", fresh[0][:1])  # loads the script
    client.flushdb()
    base_memory = client.info("memory")["used_memory"]
    client.config_resetstat()
    refused, start, cpu = 0, time.perf_counter(), time.process_time()
    for i, batch in enumerate(fresh):
        refused += gate.complete("c", batch).admissions.count(Admission.DUPLICATE)
        if i % 100 == 99:  # the bench has no workers: drop the outstanding ids now and then
            client.delete(keys.outstanding("c"))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    stats = client.info("commandstats")
    calls = sum(v["calls"] for k, v in stats.items() if k.startswith("cmdstat_"))
    trips = stats["cmdstat_evalsha"]["calls"] + stats.get("cmdstat_del", {}).get("calls", 0)
    server_us = stats["cmdstat_evalsha"]["usec"]
    client.delete(keys.outstanding("c"))
    info = gate.info("c")
    memory = client.info("memory")["used_memory"] - base_memory

    dups = fresh[: max(1, args.dups // args.batch)]
    client.config_resetstat()
    start = time.perf_counter()
    for batch in dups:
        gate.complete("c", batch)
    dup_wall = time.perf_counter() - start
    dup_us = client.info("commandstats")["cmdstat_evalsha"]["usec"]
    n_dups = sum(map(len, dups))
    return {"admitted/s": args.urls / wall, "client CPU us/URL": cpu / args.urls * 1e6,
            "server us/URL": server_us / args.urls, "round trips/batch": trips / len(fresh),
            "commands/batch (in script too)": calls / len(fresh),
            "gate bytes/URL": info.bytes / info.items, "used_memory bytes/URL": memory / args.urls,
            "fresh refused": refused, "dup checks/s": n_dups / dup_wall, "dup server us/URL": dup_us / n_dups}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--urls", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=100, help="URLs per gate call (a page's links)")
    p.add_argument("--dups", type=int, default=200_000, help="URLs offered again afterwards")
    p.add_argument("--modes", default="set,bloom")
    p.add_argument("--capacity", type=int, default=None, help="Bloom capacity (default: --urls)")
    p.add_argument("--error-rate", type=float, default=0.001)
    args = p.parse_args()
    args.capacity = args.capacity or args.urls
    if not shutil.which("redis-server"):
        raise SystemExit("bench/gate: needs redis-server on PATH")
    with private_redis("gate", binary="redis-server") as server:  # the system's, as its version is printed
        client = redis.Redis(host="127.0.0.1", port=server.port)
        rows = {mode: run(client, mode, args) for mode in args.modes.split(",")}
    print(f"`bench/gate --urls {args.urls} --batch {args.batch}`; Bloom capacity {args.capacity:,} "
          f"at {args.error_rate}; redis-server {client_version()}, a private instance\n")
    columns = list(next(iter(rows.values())))
    print("| mode | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for mode, row in rows.items():
        print(f"| {mode} | " + " | ".join(_fmt(row[c]) for c in columns) + " |")
    return 0


def client_version() -> str:
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    return next((part.split("=")[1] for part in out.split() if part.startswith("v=")), "?")


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


if __name__ == "__main__":
    sys.exit(main())
