#!/usr/bin/env python3
"""bench/shards: one crawl's state on one Redis against a local Redis Cluster of 3 and 6
masters: pages/s, and each master's share of the commands and the CPU.

    bench/shards/shards.py [--rows one,c3,c6] [--hosts 120] [--pages-per-host 15] [--delay 0.5]
                           [--pages 3000] [--runs 1] [--only broad,fast] [--broker amqp://…]

Two crawls, each ``crawler-tasks crawl SEEDS --workers 2`` timed from start to exit:

- **broad**: bench/broad's site (``--hosts`` loopback hosts × ``--pages-per-host``, 20 ms
  per answer) with the defaults (robots.txt obeyed, two requests per host, the guard open
  to loopback) and the delay shortened to ``--delay``;
- **fast**: the bench site on one host, 3,000 pages, unpaced as bench/compare (no delay,
  no cap: what is measured is Redis, not a host's pace).

The state (``CRAWLER_REDIS_URL``) is, per row of ``--rows``, one private redis-server
(``one``) or a cluster of N masters (``cN``) started here as ``redis-cli --cluster
create`` makes one (no replicas); ``:K`` after a row sets ``CRAWLER_HOST_SHARDS``,
``CRAWLER_GATE_SHARDS`` and ``CRAWLER_STORE_SHARDS`` to K (``c3:1``: the cluster with one tag for the politeness
state and one per crawl, as before they were split; ``one:4``: one Redis with four of
each, what the split costs there). The broker is one more private redis-server in every row (the cluster cannot
be a broker), so the rows differ only in where the state lives; ``--broker amqp://…`` makes
it a vhost of its own on that RabbitMQ instead, its CPU read off ``beam.smp``. Per master: commands
(``total_commands_processed``), Redis CPU (``used_cpu_user + used_cpu_sys``) and bytes
received (``total_net_input_bytes``) over the crawl; ``max/mean`` and ``min/mean`` say how evenly the crawl spread over them.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

LIB = Path(__file__).resolve().parent.parent / "lib"
BROAD = Path(__file__).resolve().parent.parent / "broad_crawl"
sys.path.insert(0, str(LIB))

from one_crawl import ONE_HOST, helper  # noqa: E402
from servers import Children, RedisServer, redis_binary  # noqa: E402
from site_gen import ensure_site  # noqa: E402

#: The broad crawl: the defaults, the guard open to the site's loopback addresses.
BROAD_ENV = {"CRAWLER_PRIVATE_ALLOWLIST": "127.0.0.0/8"}


def cluster_ports(n: int) -> list[int]:
    """Free ports whose cluster-bus port (+10000) is free too."""
    ports: list[int] = []
    port = 21000
    while len(ports) < n and port < 30000:
        port += 1
        try:
            for p in (port, port + 10000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", p))
        except OSError:
            continue
        ports.append(port)
    return ports


def start_cluster(group: Children, root: Path, masters: int) -> list[int]:
    """``masters`` cluster-enabled redis-servers joined with ``redis-cli --cluster create``."""
    ports = cluster_ports(masters)
    for port in ports:
        group.spawn([redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                     "--cluster-config-file", str(root / f"nodes-{port}.conf"), "--save", "", "--appendonly", "no",
                     "--dir", str(root), "--loglevel", "warning"], name=f"cluster {port}")
    for port in ports:
        _wait(lambda p=port: redis.Redis(port=p).ping())
    subprocess.run([shutil.which("redis-cli") or "redis-cli", "--cluster", "create",
                    *(f"127.0.0.1:{p}" for p in ports), "--cluster-replicas", "0", "--cluster-yes"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    _wait(lambda: all(redis.Redis(port=p).cluster("info")["cluster_state"] == "ok" for p in ports))
    return ports


def _wait(check, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except redis.RedisError:
            pass
        time.sleep(0.1)
    raise SystemExit("bench/shards: a Redis did not come up")


def reading(ports: list[int]) -> list[tuple[int, float, int]]:
    """(commands, CPU seconds, bytes received) of each server so far."""
    out = []
    for port in ports:
        client = redis.Redis(port=port)
        stats, cpu = client.info("stats"), client.info("cpu")
        out.append((int(stats["total_commands_processed"]), float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
                    int(stats["total_net_input_bytes"])))
        client.close()
    return out


def crawl(crawler: str, seeds: list[str], broker: str, state: str, work: Path,
          env: dict[str, str]) -> tuple[float, int, float]:
    """One ``crawler-tasks crawl``: wall seconds from start to exit, pages stored, and CPU
    seconds of it and the workers it reaped."""
    import os
    import resource

    full = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    store = work / "pages.db"
    full.update(env, CRAWLER_BROKER_URL=broker, CRAWLER_REDIS_URL=state, CRAWLER_STORE=str(store))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    code = subprocess.call([crawler, "crawl", *seeds, "--workers", "2", "--quiet", "--store", str(store)],
                           env=full, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if code != 0:
        raise SystemExit(f"bench/shards: crawler-tasks exited with code {code}")
    with sqlite3.connect(store) as db:
        pages = db.execute("SELECT count(*) FROM pages").fetchone()[0]
    return wall, pages, cpu


class Rabbit:
    """A vhost of its own on the machine's RabbitMQ (``--broker amqp``), its CPU read off
    the broker's process (``beam.smp``; it serves nothing else while the bench runs)."""

    def __init__(self, url: str) -> None:
        import os

        self.vhost = f"bench-shards-{os.getpid()}"
        base = url.rstrip("/")
        self.url = f"{base}/{self.vhost}"

    def __enter__(self) -> Rabbit:
        for cmd in (["add_vhost", self.vhost], ["set_permissions", "-p", self.vhost, "guest", ".*", ".*", ".*"]):
            subprocess.run(["rabbitmqctl", "-q", *cmd], check=True, capture_output=True, timeout=120)
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["rabbitmqctl", "-q", "delete_vhost", self.vhost], capture_output=True, timeout=120)

    @staticmethod
    def cpu() -> float:
        import psutil

        return sum(sum(p.cpu_times()[:2]) for p in psutil.process_iter(["name"]) if p.info["name"] == "beam.smp")


def spread(values: list[float]) -> str:
    mean = sum(values) / len(values)
    return f"{max(values) / mean:.2f} / {min(values) / mean:.2f}" if mean else "–"


def one_row(args: argparse.Namespace, workload: str, seeds: list[str], env: dict[str, str], row: str) -> str:
    where, _, shards = row.partition(":")
    masters = 1 if where == "one" else int(where.removeprefix("c"))
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as tmp, Children() as group:
        work = Path(tmp)
        rabbit = Rabbit(args.broker) if args.broker.startswith("amqp") else None
        broker = RedisServer(group, work, "broker").start()  # idle when the broker is RabbitMQ
        broker_url = broker.url if rabbit is None else rabbit.url
        if masters == 1:
            state = RedisServer(group, work, "state").start()
            ports, state_url = [state.port], state.url
        else:
            ports = start_cluster(group, work, masters)
            state_url = f"redis+cluster://127.0.0.1:{ports[0]}"
        if shards:
            env = {**env, "CRAWLER_HOST_SHARDS": shards, "CRAWLER_GATE_SHARDS": shards, "CRAWLER_STORE_SHARDS": shards}
        with rabbit or contextlib.nullcontext():
            before, broker_before, rabbit_before = reading(ports), reading([broker.port]), Rabbit.cpu()
            wall, pages, crawler_cpu = crawl(args.crawler, seeds, broker_url, state_url, work, env)
            after, broker_after, rabbit_after = reading(ports), reading([broker.port]), Rabbit.cpu()
    commands = [a[0] - b[0] for a, b in zip(after, before)]
    cpu = [a[1] - b[1] for a, b in zip(after, before)]
    received = [a[2] - b[2] for a, b in zip(after, before)]
    broker_cmds = broker_after[0][0] - broker_before[0][0] if rabbit is None else 0
    broker_cpu = broker_after[0][1] - broker_before[0][1] if rabbit is None else rabbit_after - rabbit_before
    where = "one Redis" if masters == 1 else f"cluster, {masters} masters"
    if rabbit is not None:
        where += ", RabbitMQ broker"
    if shards:
        where += f", {shards} shard{'s' if shards != '1' else ''}"
    per_master = " ".join(f"{c / pages:.1f}" for c in commands)
    bytes_per_master = " ".join(f"{b / pages / 1000:.1f}" for b in received)
    return (f"| {workload} | {where} | {pages} | {pages / wall:.0f} | {sum(commands) / pages:.1f} | {per_master} | "
            f"{spread([float(c) for c in commands])} | {sum(cpu) / pages * 1e6:.0f} | {spread(cpu)} | "
            f"{sum(received) / pages / 1000:.1f} | {bytes_per_master} | "
            f"{broker_cmds / pages:.1f} | {broker_cpu / pages * 1e6:.0f} | {crawler_cpu / pages * 1000:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="one,c3,c6",
                        help="where the state lives, comma list: one, cN, with :K for K shards (default one,c3,c6)")
    parser.add_argument("--hosts", type=int, default=120, help="hosts of the broad crawl (default 120)")
    parser.add_argument("--pages-per-host", type=int, default=15, help="pages of each (default 15)")
    parser.add_argument("--delay", type=float, default=0.5, help="the broad crawl's delay (default 0.5 s)")
    parser.add_argument("--pages", type=int, default=3000, help="pages of the fast crawl (default 3000)")
    parser.add_argument("--runs", type=int, default=1, help="rounds (default 1)")
    parser.add_argument("--only", default="broad,fast", help="workloads, comma list (default broad,fast)")
    parser.add_argument("--crawler", default=shutil.which("crawler-tasks") or "crawler-tasks")
    parser.add_argument("--broker", default="redis",
                        help="redis (a private redis-server, the default) or an AMQP URL such as "
                             "amqp://guest:guest@127.0.0.1:5672 (a vhost of its own on that RabbitMQ)")
    args = parser.parse_args()
    rows = [r for r in args.rows.split(",") if r]
    print("| crawl | state | pages | pages/s | state cmds/page | per master | cmds max/mean / min/mean "
          "| state CPU µs/page | CPU max/mean / min/mean | state KB in/page | KB in/page per master "
          "| broker cmds/page | broker CPU µs/page | crawler CPU ms/page |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for _ in range(args.runs):
        for workload in args.only.split(","):
            if workload == "broad":
                with helper(BROAD / "broad_site.py", "--hosts", str(args.hosts), "--pages-per-host",
                            str(args.pages_per_host), "--latency", "0.02", "--log", "/dev/null") as port:
                    hosts = [f"127.0.{1 + i // 254}.{1 + i % 254}" for i in range(args.hosts)]
                    seeds = [f"http://{h}:{port}/" for h in hosts]
                    env = {**BROAD_ENV, "CRAWLER_DOWNLOAD_DELAY": f"{args.delay:g}"}
                    for row in rows:
                        print(one_row(args, "broad", seeds, env, row), flush=True)
            else:
                root = ensure_site(args.pages).root
                with helper(LIB / "timed_site.py", root, 0, "/dev/null") as port:
                    for row in rows:
                        print(one_row(args, "fast", [f"http://127.0.0.1:{port}/"], dict(ONE_HOST), row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
