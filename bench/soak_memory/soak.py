#!/usr/bin/env python3
"""Bounded soak benchmark: does memory or the key count grow with pages crawled?

    bench/soak [--pages 50000] [--workers 2] [--interval 5] [--latency MS] [--json PATH]

Serves the generated bench site (bench/lib/site_gen.py) on 127.0.0.1 (nginx when
installed and no latency, else bench/lib/site_server.py), starts one private
redis-server as broker and state Redis, and crawls the site with ``--workers``
real ``celery worker`` processes (crawler_tasks.cli.local.Workers), as
``crawler-tasks crawl`` does. Every ``--interval`` seconds it prints a sample:
pages stored, pages/s, worker RSS, Redis used_memory, DBSIZE and the crawl's
keys. Once the crawl drains it prints least-squares slopes (per 10k pages
stored, after a warm-up) and every key the crawl left in Redis.
How to read it: README.md here.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ensure_project_python  # noqa: E402

ensure_project_python("bench/soak", "psutil")

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shlex  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any  # noqa: E402

import redis  # noqa: E402
from measure import slope, tree_rss  # noqa: E402
from servers import BenchError, Children, RedisServer, _watchdog_note, log, session, start_site, tail  # noqa: E402
from site_gen import ensure_site  # noqa: E402

from crawler_tasks.cli.local import CrawlWatch, Workers, wait_drained  # noqa: E402
from crawler_tasks.core.errors import CrawlerError  # noqa: E402
from crawler_tasks.core.settings import Settings  # noqa: E402
from crawler_tasks.state.keys import Keys  # noqa: E402

MB = 1024 * 1024
PER = 10_000  # slopes are per this many pages stored
#: Kinds of per-crawl key that stay after a crawl by design.
EXPECTED_KINDS = ("stats", "seen", "crawls")
#: Key kind -> the Keys method that builds it (where the names differ).
KIND_METHOD = {"config": "crawl"}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/soak", description=__doc__.splitlines()[0])
    p.add_argument("--pages", type=int, default=50_000, help="pages in the generated site (default 50000)")
    p.add_argument("--workers", type=int, default=2, help="celery worker processes (default 2)")
    p.add_argument("--interval", type=float, default=5.0, help="seconds between samples (default 5)")
    p.add_argument("--latency", type=float, default=0.0, metavar="MS",
                   help="milliseconds before each response (Python site server); default 0")
    p.add_argument("--warmup", type=float, default=0.2, metavar="FRACTION",
                   help="slopes skip samples before this fraction of the final pages stored (default 0.2)")
    p.add_argument("--timeout", type=float, default=0.0,
                   help="give up after this many seconds of crawling (default 0: no limit)")
    p.add_argument("--seed", type=int, default=1, help="RNG seed of the site (default 1)")
    p.add_argument("--json", metavar="PATH", help="write the samples and the summary here")
    args = p.parse_args(argv)
    if args.pages < 10 or args.workers < 1 or args.interval <= 0 or args.latency < 0:
        p.error("--pages >= 10, --workers >= 1, --interval > 0, --latency >= 0")
    if not 0 <= args.warmup < 1 or args.timeout < 0:
        p.error("--warmup in [0, 1), --timeout >= 0")
    return args


# --------------------------------------------------------------------------- sampling


@dataclass
class Sample:
    elapsed_s: float
    stored: int
    pages_per_s: float  # over the interval since the previous sample
    worker_rss_mb: float  # worker processes and their children
    used_memory_mb: float  # INFO memory
    dbsize: int
    crawl_keys: int  # SCAN MATCH <prefix>:*
    gate_mb: float  # MEMORY USAGE of the seen SET
    outstanding: int  # SCARD of the outstanding SET
    frontier_mb: float  # MEMORY USAGE of the outstanding SET and of every broker key

    @property
    def non_gate_mb(self) -> float:
        return self.used_memory_mb - self.gate_mb

    @property
    def residual_mb(self) -> float:
        return self.used_memory_mb - self.gate_mb - self.frontier_mb

    def line(self) -> str:
        return (f"{self.elapsed_s:8.1f} {self.stored:8d} {self.pages_per_s:8.1f} {self.worker_rss_mb:9.1f} "
                f"{self.used_memory_mb:9.1f} {self.gate_mb:8.2f} {self.non_gate_mb:9.1f} {self.dbsize:7d} "
                f"{self.crawl_keys:6d} {self.outstanding:8d}")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "non_gate_mb": self.non_gate_mb, "residual_mb": self.residual_mb}


HEADER = (f"{'elapsed':>8} {'stored':>8} {'pages/s':>8} {'rss MB':>9} {'redis MB':>9} {'gate MB':>8} "
          f"{'non-gate':>9} {'dbsize':>7} {'keys':>6} {'in flight':>8}")


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


class Sampler:
    """Reads the worker processes (psutil) and the private Redis; one :class:`Sample` per call."""

    def __init__(self, client: redis.Redis, keys: Keys, crawl_id: str, workers: Workers, started: float) -> None:
        self.client, self.keys, self.crawl_id, self.workers = client, keys, crawl_id, workers
        self.match = _glob_escape(keys.prefix) + ":*"
        self.started = started
        self.samples: list[Sample] = []

    def worker_rss(self) -> int:
        return tree_rss(*(popen.pid for popen in self.workers.procs))

    def take(self) -> Sample:
        now = time.monotonic()
        c, prefix = self.client, self.keys.prefix + ":"
        stored = int(c.hget(self.keys.stats(self.crawl_id), "stored") or 0)
        rss = self.worker_rss()
        used = int(c.info("memory")["used_memory"])
        dbsize = int(c.dbsize())
        crawl_keys = sum(1 for _ in c.scan_iter(match=self.match, count=1000))
        broker_keys = [k for k in c.scan_iter(count=1000) if not k.decode(errors="replace").startswith(prefix)]
        seen, outstanding = self.keys.seen(self.crawl_id), self.keys.outstanding(self.crawl_id)
        pipe = c.pipeline(transaction=False)
        pipe.memory_usage(seen, samples=0)
        pipe.memory_usage(outstanding, samples=0)
        pipe.scard(outstanding)
        for key in broker_keys:
            pipe.memory_usage(key, samples=0)
        gate, out_bytes, out_count, *broker = pipe.execute()
        prev = self.samples[-1] if self.samples else None
        elapsed = now - self.started
        if prev is None:
            rate = stored / elapsed if elapsed > 0 else 0.0
        else:
            span = elapsed - prev.elapsed_s
            rate = (stored - prev.stored) / span if span > 0 else 0.0
        sample = Sample(elapsed_s=elapsed, stored=stored, pages_per_s=rate, worker_rss_mb=rss / MB,
                        used_memory_mb=used / MB, dbsize=dbsize, crawl_keys=crawl_keys,
                        gate_mb=(gate or 0) / MB, outstanding=int(out_count),
                        frontier_mb=((out_bytes or 0) + sum(b or 0 for b in broker)) / MB)
        self.samples.append(sample)
        return sample


# --------------------------------------------------------------------------- slopes


SERIES = (  # (name, label, unit, value of a sample)
    ("worker_rss_mb", "worker RSS (all worker processes)", "MB", lambda s: s.worker_rss_mb),
    ("used_memory_mb", "Redis used_memory", "MB", lambda s: s.used_memory_mb),
    ("gate_mb", "  of which the gate (seen SET)", "MB", lambda s: s.gate_mb),
    ("non_gate_mb", "Redis used_memory minus the gate", "MB", lambda s: s.non_gate_mb),
    ("residual_mb", "  minus also queued work (outstanding SET, broker keys)", "MB",
     lambda s: s.residual_mb),
    ("crawl_keys", "crawl keys (SCAN MATCH prefix:*)", "keys", lambda s: float(s.crawl_keys)),
    ("dbsize", "DBSIZE", "keys", lambda s: float(s.dbsize)),
)


def slopes(samples: list[Sample], warmup: float) -> dict[str, Any]:
    final = samples[-1].stored if samples else 0
    start = warmup * final
    window = [s for s in samples if s.stored >= start and s.stored > 0]
    out: dict[str, Any] = {"from_stored": int(start), "samples": len(window), "per_pages": PER, "series": {}}
    for name, label, unit, value in SERIES:
        fitted = slope([(s.stored / PER, value(s)) for s in window])
        out["series"][name] = {
            "label": label, "unit": unit, "slope_per_10k": fitted,
            "first": value(window[0]) if window else None, "last": value(window[-1]) if window else None,
        }
    return out


# --------------------------------------------------------------------------- leftover keys


def key_kind(key: str, prefix: str) -> str:
    """``crawler:{id}:replay:abc`` -> ``replay``; ``crawler:crawls`` -> ``crawls``."""
    rest = key[len(prefix) + 1:]
    if rest.startswith("{") and "}:" in rest:
        rest = rest.split("}:", 1)[1]
    return rest.split(":", 1)[0]


def kind_doc(kind: str) -> str:
    method = getattr(Keys, KIND_METHOD.get(kind, kind), None)
    doc = (getattr(method, "__doc__", None) or "").strip()
    return doc.split("\n")[0] if doc else "not a key of crawler_tasks/keys.py"


_SIZE = {"set": "scard", "hash": "hlen", "list": "llen", "zset": "zcard", "string": "strlen", "stream": "xlen"}


def leftover(client: redis.Redis, prefix: str) -> dict[str, Any]:
    """Every key still in Redis: the crawler's grouped by kind, then the broker's (everything else)."""
    names = sorted(k.decode(errors="replace") for k in client.scan_iter(count=1000))
    pipe = client.pipeline(transaction=False)
    for key in names:
        pipe.type(key)
        pipe.ttl(key)
        pipe.memory_usage(key, samples=0)
    raw = pipe.execute()
    types = [t.decode() if isinstance(t, bytes) else t for t in raw[0::3]]
    pipe = client.pipeline(transaction=False)
    for key, kind in zip(names, types, strict=True):
        getattr(pipe, _SIZE.get(kind, "exists"))(key)
    sizes = pipe.execute()
    crawl: dict[str, dict[str, Any]] = {}
    broker: list[dict[str, Any]] = []
    for i, key in enumerate(names):
        entry = {"key": key, "type": types[i], "ttl": raw[3 * i + 1], "size": sizes[i],
                 "bytes": raw[3 * i + 2] or 0}
        if key.startswith(prefix + ":"):
            kind = key_kind(key, prefix)
            group = crawl.setdefault(kind, {"kind": kind, "doc": kind_doc(kind), "keys": []})
            group["keys"].append(entry)
        else:
            broker.append(entry)
    unexpected = sorted(k for k in crawl if k not in EXPECTED_KINDS)
    return {"crawl": crawl, "broker": broker, "unexpected_kinds": unexpected}


# --------------------------------------------------------------------------- report


def _fmt_slope(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a (too few samples)"
    digits = 3 if unit == "MB" else 1
    return f"{value:+.{digits}f} {unit}"


def render_summary(meta: dict[str, Any], fit: dict[str, Any], left: dict[str, Any], prefix: str) -> str:
    st = meta["stats"]
    lines = ["", (f"crawl {meta['crawl_id']}: {meta['stored']:,} pages stored of {meta['expected_urls']:,} "
                  f"distinct URLs in {meta['elapsed_s']:.1f}s = {meta['pages_per_s']:.1f} pages/s "
                  f"({meta['workers']} worker processes, pool {meta['pool']} × {meta['concurrency']}; "
                  f"site: {meta['server']})")]
    lines.append(f"counters: failures {st.get('failures', 0)}, errors {st.get('errors', 0)}, "
                 f"retries {st.get('retries', 0)}, duplicates {st.get('duplicates', 0)}, "
                 f"gate/admitted {st.get('gate/admitted', 0)}")
    lines += ["", (f"slopes per {PER:,} pages stored (least squares over {fit['samples']} samples from "
                   f"{fit['from_stored']:,} pages stored on; value at the first and last of them):")]
    for series in fit["series"].values():
        first, last = series["first"], series["last"]
        ends = "" if first is None else f"   ({first:,.1f} -> {last:,.1f} {series['unit']})"
        lines.append(f"  {series['label']:<58}{_fmt_slope(series['slope_per_10k'], series['unit']):>14}{ends}")
    if meta.get("seen_members"):
        per = meta["seen_bytes"] / meta["seen_members"]
        lines.append(f"  (the gate holds {meta['seen_members']:,} fingerprints, {per:.0f} bytes each, "
                     f"so it grows by about {per * PER / MB:.2f} MB per {PER:,} URLs admitted)")
    lines += ["", "keys of the crawl still in Redis after it drained and the workers stopped:"]
    for kind in sorted(left["crawl"]):
        group = left["crawl"][kind]
        entries = group["keys"]
        types = ",".join(sorted({e["type"] for e in entries}))
        size = sum(int(e["size"] or 0) for e in entries)
        total = sum(e["bytes"] for e in entries) / MB
        ttls = sorted({e["ttl"] for e in entries})
        ttl = "no TTL" if ttls == [-1] else "TTL " + ",".join(str(t) for t in ttls[:3]) + ("…" if len(ttls) > 3 else "")
        lines.append(f"  {kind:<12}{len(entries):>6} key(s)  {types:<6} {size:>9,} entries  {total:8.2f} MB  {ttl}")
        lines.append(f"  {'':<12}{group['doc']}")
        for e in entries[:3]:
            lines.append(f"  {'':<12}{e['key']}")
        if len(entries) > 3:
            lines.append(f"  {'':<12}… and {len(entries) - 3:,} more")
    if not left["crawl"]:
        lines.append("  (none)")
    unexpected = left["unexpected_kinds"]
    if unexpected:
        extra = ", ".join(f"{k} ×{len(left['crawl'][k]['keys'])}" for k in unexpected)
        lines.append(f"besides stats, seen and the crawl registry ({prefix}:crawls), these remain: {extra}")
    else:
        lines.append(f"nothing remains besides stats, seen and the crawl registry ({prefix}:crawls)")
    broker = left["broker"]
    names = ", ".join(f"{e['key']} ({e['type']}, {e['size']})" for e in broker[:12])
    lines.append(f"other keys (broker / kombu): {len(broker)}" + (f": {names}" if broker else ""))
    if len(broker) > 12:
        lines.append(f"  … and {len(broker) - 12} more")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    return session("bench/soak", "crawler-soak-", lambda workdir: _soak(args, workdir, argv), errors=(CrawlerError,))


def _soak(args: argparse.Namespace, workdir: Path, argv: list[str]) -> int:
    command = "bench/soak " + shlex.join(argv) if argv else "bench/soak"
    log(f"generating or reusing the {args.pages}-page site (seed {args.seed}) ...")
    site = ensure_site(args.pages, args.seed)
    with Children() as group:
        server = start_site(group, site.root, latency=args.latency / 1000, prefer="auto", workdir=workdir)
        log(f"site: {site.root} ({site.expected_urls:,} distinct URLs) served by {server.kind} at {server.url}")
        store = RedisServer(group, workdir, "soak").start()
        log(f"redis: {store.url} (broker and state)")
        # Unpaced, as bench/compare's rows: no delay, no host cap, no robots.txt (one host
        # at the default delay would take 14 hours for 50,000 pages).
        settings = Settings.from_env(broker_url=store.url, redis_url=store.url,
                                     store=str(workdir / "pages.db"), download_delay=0.0, host_concurrency=0,
                                     robotstxt_obey=False,
                                     private_allowlist=("127.0.0.0/8",))  # the site is on loopback
        os.environ.update(settings.to_env())  # as run_crawl does, before the app is built
        return _crawl(args, settings, site, server, store, workdir, command)


def _crawl(args: argparse.Namespace, settings: Settings, site: Any, server: Any, store: RedisServer,
           workdir: Path, command: str) -> int:
    from crawler_tasks.service.celery_app import create_app
    from crawler_tasks.stages.runtime import Runtime
    from crawler_tasks.stages.seed import build_requests, submit_requests

    rt = Runtime(settings, create_app(settings))
    crawl_id = "soak-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    requests = build_requests([server.url], crawl_id=crawl_id)
    workers_log = workdir / "workers.log"
    workers = Workers(settings, processes=args.workers, name=f"{crawl_id}@%h", log_path=str(workers_log))
    interrupted = True
    try:
        workers.start()
        for proc in workers.procs:
            _watchdog_note(f"+{proc.pid}")  # lib/watchdog.py kills them if this process is killed
        started = time.monotonic()
        submit_requests(rt, requests, max_depth=None, max_pages=0, store=settings.store)
        sampler = Sampler(store.client(), rt.keys, crawl_id, workers, started)
        log(f"crawl {crawl_id}: {args.workers} worker processes ({settings.worker_pool} × "
             f"{settings.worker_concurrency}), a sample every {args.interval:g}s")
        print(HEADER, flush=True)
        next_at = started + args.interval

        def tick() -> None:
            nonlocal next_at
            if not server.alive():
                raise BenchError("the site server died")
            if time.monotonic() >= next_at:
                print(sampler.take().line(), flush=True)
                next_at = max(next_at + args.interval, time.monotonic() + args.interval / 2)

        watch = CrawlWatch(rt, crawl_id, settings.stall_timeout)
        try:
            wait_drained(watch.drained, tick=tick, workers=workers, timeout=args.timeout or None)
        except CrawlerError as exc:
            raise BenchError(f"{exc} (workers' log: {tail(workers_log) or 'empty'})") from None
        elapsed = time.monotonic() - started
        print(sampler.take().line() + "   (drained)", flush=True)
        stats = rt.stats.read(crawl_id)
        workers.stop()
        interrupted = False
    finally:
        if interrupted:
            workers.kill()
        for proc in workers.procs:
            _watchdog_note(f"-{proc.pid}")
        rt.close()

    client = store.client()
    seen = rt.keys.seen(crawl_id)
    left = leftover(client, rt.keys.prefix)
    fit = slopes(sampler.samples, args.warmup)
    meta = {"command": command, "crawl_id": crawl_id, "stored": stats.get("stored", 0),
            "expected_urls": site.expected_urls, "elapsed_s": elapsed,
            "pages_per_s": stats.get("stored", 0) / max(elapsed, 1e-6), "workers": args.workers,
            "pool": settings.worker_pool, "concurrency": settings.worker_concurrency,
            "server": server.kind, "stats": stats,
            "seen_members": int(client.scard(seen)), "seen_bytes": int(client.memory_usage(seen, samples=0) or 0)}
    print(render_summary(meta, fit, left, rt.keys.prefix), flush=True)
    if args.json:
        data = {"command": command, "finished": datetime.now(UTC).isoformat(timespec="seconds"),
                "args": vars(args), "cpus": os.cpu_count(),
                "site": {"root": str(site.root), "pages": site.pages, "seed": site.seed,
                         "expected_urls": site.expected_urls},
                "summary": meta, "slopes": fit, "leftover": left,
                "samples": [s.to_dict() for s in sampler.samples]}
        Path(args.json).write_text(json.dumps(data, indent=2, default=str))
        log(f"samples and summary: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
