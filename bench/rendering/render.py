#!/usr/bin/env python3
"""bench/render: rendered pages against plain fetches of the same site, and the memory of a
render worker over a long run.

    .venv/bin/python bench/render [--pages 2000] [--runs 1] [--only plain,render,render-keep] [--before DIR]

The site (render_site.py here, a process of its own) builds each page's text and links
with a script. Every row is ``crawler-tasks crawl`` as a user runs it (one Redis for broker
and state: a private redis-server per run), with the same N page URLs as seeds,
``--workers 1 --delay 0 --host-concurrency 0 --max-depth 1``:

``plain``        the pages fetched as served (no text, no links: what a crawler without a
                 browser gets), by the fetch worker;
``render``       ``--render``: the same pages rendered by the crawl's render worker (4 pages
                 at once in one Chromium), the browser replaced every
                 ``CRAWLER_RENDER_PAGES_PER_BROWSER`` (500) pages;
``render-keep``  as ``render`` with one browser for the whole run (no replacement).

Printed per row: pages stored, wall time of the whole process tree from start, pages/s, CPU
of the tree (Chromium's processes included), the peak memory of the render worker (its
Python process plus its browser's processes: the sum of their RSS, which counts the pages
they share once per process, and of their PSS, which counts them once), and its PSS at each
quarter of the run: flat when the browser's memory does not grow with the pages.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "lib"))
from entry import ensure_project_python  # noqa: E402

ensure_project_python("bench/render", "psutil")

import psutil  # noqa: E402
import redis  # noqa: E402
from measure import ReapedCpu, TreeSampler  # noqa: E402
from servers import Children, RedisServer, read_line  # noqa: E402

ROWS = {
    "plain": ([], {}),
    "render": (["--render"], {}),
    "render-keep": (["--render"], {"CRAWLER_RENDER_PAGES_PER_BROWSER": "1000000"}),
}
CRAWLER_TASKS = str(Path(sys.executable).parent / "crawler-tasks")


class RenderWorkerMemory:
    """Every 0.5 s: the RSS of the render worker (the process serving crawl.render) and its
    descendants, with the pages stored so far."""

    def __init__(self, root: int, stats: redis.Redis, key: str) -> None:
        self.root, self.stats, self.key = root, stats, key
        self.samples: list[tuple[int, int, int]] = []  # (pages stored, RSS sum, PSS sum)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> RenderWorkerMemory:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            rss, pss = self._memory()
            if rss:
                stored = int(self.stats.hget(self.key, "stored") or 0)
                self.samples.append((stored, rss, pss))

    def _memory(self) -> tuple[int, int]:
        """(RSS, PSS) summed over the render worker and its descendants."""
        try:
            tree = psutil.Process(self.root).children(recursive=True)
        except psutil.Error:
            return 0, 0
        for proc in tree:
            try:
                if "crawl.render" not in " ".join(proc.cmdline()):
                    continue
                rss = pss = 0
                for member in [proc, *proc.children(recursive=True)]:
                    try:
                        full = member.memory_full_info()
                    except psutil.Error:
                        continue
                    rss, pss = rss + full.rss, pss + full.pss
                return rss, pss
            except psutil.Error:
                continue
        return 0, 0

    def peak(self, index: int) -> float:
        return max((sample[index] for sample in self.samples), default=0) / 2**20

    def quarters(self, pages: int) -> list[float]:
        """Mean PSS (MiB) of the samples in each quarter of the pages."""
        out = []
        for q in range(4):
            lo, hi = pages * q / 4, pages * (q + 1) / 4
            inside = [pss for stored, _, pss in self.samples if lo <= stored < hi or (q == 3 and stored >= hi)]
            out.append(statistics.mean(inside) / 2**20 if inside else float("nan"))
        return out


def run_row(name: str, urls: list[str], workdir: Path, before: str | None = None) -> dict:
    options, extra_env = ROWS[name.removesuffix("@before")]
    if name.endswith("@before"):  # the crawler_tasks of another checkout, through PYTHONPATH
        extra_env = {**extra_env, "PYTHONPATH": str(before)}
    workdir.mkdir(parents=True, exist_ok=True)
    with Children() as group:
        server = RedisServer(group, workdir, name).start()
        crawl_id = f"bench-{name}"
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("CRAWLER_")},
               "CRAWLER_BROKER_URL": server.url, "CRAWLER_REDIS_URL": server.url, **extra_env}
        store = workdir / f"{name}.db"
        cpu = ReapedCpu()
        sampler = TreeSampler(0.5).start()
        started = time.monotonic()
        with cpu.reaping():
            proc = subprocess.Popen([CRAWLER_TASKS, "crawl", *urls, "--workers", "1", "--delay", "0",
                                     "--host-concurrency", "0", "--max-depth", "1", "--quiet", "--crawl-id",
                                     crawl_id, "--store", str(store), *options],
                                    env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            sampler.watch(proc.pid)
            memory = RenderWorkerMemory(proc.pid, server.client(), f"crawler:{{{crawl_id}}}:stats").start()
            out, err = proc.communicate(timeout=3600)
        elapsed = time.monotonic() - started
        memory.stop()
        usage = sampler.stop()
        if proc.returncode != 0:
            raise SystemExit(f"{name}: crawler-tasks crawl failed ({proc.returncode}): {err.strip()[-500:]}")
        stored = int(next(line.split()[-1] for line in out.splitlines() if line.startswith("pages stored")))
        return {"row": name, "pages": stored, "elapsed": elapsed, "rate": stored / elapsed,
                "cpu": max(cpu.seconds, usage.cpu_seconds), "peak": memory.peak(1), "peak_pss": memory.peak(2),
                "quarters": memory.quarters(stored)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--only", default=",".join(ROWS))
    ap.add_argument("--before", default=None, metavar="CHECKOUT",
                    help="for each row, a twin ROW@before running the crawler_tasks of another checkout "
                         "(a git worktree of an earlier commit), interleaved")
    args = ap.parse_args()
    rows = [r.strip() for r in args.only.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        print(f"bench/render: unknown row(s) {', '.join(unknown)}; rows: {', '.join(ROWS)}", file=sys.stderr)
        return 2
    if args.before:
        rows = [r for name in rows for r in (f"{name}@before", name)]
    results = []
    with tempfile.TemporaryDirectory(prefix="render-bench-") as tmp, Children() as site_group:
        workdir = Path(tmp)
        site = site_group.spawn([sys.executable, HERE / "render_site.py", "--pages", str(args.pages)],
                                name="render site", stdout=subprocess.PIPE)
        url = read_line(site.popen.stdout, 10, site).split()[-1]
        urls = [f"{url}/p/{n}" for n in range(args.pages)]
        for run in range(args.runs):
            for name in rows:
                r = run_row(name, urls, workdir / f"{name}-{run}", args.before)
                print(f"run {run + 1} {name}: {r['pages']} pages in {r['elapsed']:.1f}s", file=sys.stderr, flush=True)
                results.append(r)
    print(f"\n{args.pages} pages, {os.cpu_count()} cores; memory of the render worker with its browser: the sum "
          "of their RSS (shared pages counted in every process) and of their PSS (counted once)\n")
    print("| row | pages | wall s | pages/s | CPU s | CPU ms/page | peak RSS sum MiB | peak PSS MiB | "
          "PSS by quarter of the run, MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        quarters = " / ".join("–" if q != q else f"{q:.0f}" for q in r["quarters"]) if r["peak"] else "–"
        peak = f"{r['peak']:.0f} | {r['peak_pss']:.0f}" if r["peak"] else "– | –"
        print(f"| {r['row']} | {r['pages']} | {r['elapsed']:.1f} | {r['rate']:.1f} | {r['cpu']:.1f} | "
              f"{1000 * r['cpu'] / max(r['pages'], 1):.1f} | {peak} | {quarters} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
