"""Profile one crawler_tasks worker process crawling the generated site with py-spy.

Writes a flame graph (SVG) and a top-20 table (self and total time per
function, from py-spy's raw stacks) so that per-page CPU can be read off
where it goes::

    python bench/profile/profile_crawl.py [--pages 3000] [--out bench/profile]

Needs ``py-spy`` (``pip install '.[bench]'``) and root or ptrace rights.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ROOT, ensure_project_python  # noqa: E402

ensure_project_python("bench/profile/profile_crawl.py")
sys.path.insert(0, str(ROOT))  # crawler_tasks from this checkout first

from servers import Children, start_site  # noqa: E402
from site_gen import ensure_site  # noqa: E402


def py_spy() -> str:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else "py-spy"


LAYERS = (  # a frame's file (py-spy gives it relative to its sys.path entry) names its layer
    ("celery/kombu", ("celery/", "kombu/", "billiard/", "vine/", "amqp/")),
    ("redis-py", ("redis/", "hiredis")),
    ("requests/urllib3", ("requests/", "urllib3/", "charset_normalizer/", "idna/")),
    ("lxml", ("lxml/",)),
    ("sqlite", ("sqlite3/",)),
    ("crawler_tasks", ("crawler_tasks/",)),
)


def layer_of(frames: list[str]) -> str:
    """The layer of a sample: its innermost library frame's; stdlib work (json, sockets,
    threading) counts for the library that called it, shown in brackets when it is json."""
    json_below = frames[-1].split("(")[-1].startswith("json/")
    for frame in reversed(frames):
        path = frame.rpartition("(")[2]
        for name, marks in LAYERS:
            if path.startswith(marks):
                return f"{name} (json)" if json_below else name
    return "stdlib, no library caller (threads, idle loops)"


#: A page's parts, for the decomposition: a sample counts for the innermost frame that
#: names a part (function and file, as py-spy shows them); a sample whose innermost
#: crawler_tasks frame names none is "other crawler_tasks"; Celery's and kombu's own work
#: is what is left under a task or the consumer with no crawler_tasks frame inside.
PARTS = (
    ("visible text", ("_visible_text (crawler_tasks/",)),
    ("links (extract, canonicalise, requests)", ("_links (crawler_tasks/", "crawler_tasks/stages/parse/links.py",
                                                 "followed (crawler_tasks/core/models.py")),
    ("HTML tree and title", ("crawler_tasks/stages/parse/",)),
    ("download (requests, urllib3)", ("crawler_tasks/net/download.py", "crawler_tasks/net/transport.py")),
    ("host slot: acquire (1 round trip)", ("acquire (crawler_tasks/state/hosts.py",)),
    ("gate: complete (1 round trip)", ("complete (crawler_tasks/state/gate.py",)),
    ("page's last round trip (children, store entry, release, ack)", ("crawler_tasks/state/round_trip.py",
                                                                     "crawler_tasks/broker/fetch_queue.py",
                                                                     "crawler_tasks/state/store_queue.py")),
    ("store (batch task, SQLite)", ("crawler_tasks/stages/store.py", "crawler_tasks/backends/", "sqlite3/")),
    ("broker take and ack (transport)", ("crawler_tasks/broker/",)),
    ("logging", ("logging/", "crawler_tasks/stages/page_log.py")),
    ("JSON codec", ("crawler_tasks/core/codec.py",)),
)


def part_of(frames: list[str]) -> str:
    """The part of a page a sample belongs to (:data:`PARTS`)."""
    for frame in reversed(frames):
        where = frame.rpartition("(")[2]
        for name, marks in PARTS:
            if any(mark in frame for mark in marks):
                return name
        if where.startswith("crawler_tasks/"):
            return "other crawler_tasks (tasks, policy, records)"
    if any(f.rpartition("(")[2].startswith(("celery/", "kombu/")) for f in frames):
        return "Celery and kombu (consumer, trace, request)"
    return "threads, idle loops"


def part_table(raw: Path, cpu_ms: float | None) -> str:
    """Markdown table: the share of samples per part of a page (:data:`PARTS`), and as ms
    of a page's CPU when ``cpu_ms`` (the process's CPU per page) is known."""
    own: collections.Counter[str] = collections.Counter()
    for frames, n in samples(raw):
        own[part_of(frames)] += n
    total = sum(own.values())
    rows = ["| part of a page | % of samples | ms per page |", "|---|---|---|"]
    for name, n in own.most_common():
        ms = f"{cpu_ms * n / total:.2f}" if cpu_ms else "–"
        rows.append(f"| {name} | {100 * n / total:.1f} | {ms} |")
    return "\n".join(rows)


def samples(raw: Path) -> Iterator[tuple[list[str], int]]:
    """py-spy's raw output: each stack's frames (outermost first, process and thread left
    out) and its sample count."""
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if frames and count.isdigit():
            yield frames, int(count)


def layer_table(raw: Path) -> str:
    """Markdown table: the share of samples spent in each layer."""
    own: collections.Counter[str] = collections.Counter()
    for frames, n in samples(raw):
        own[layer_of(frames)] += n
    total = sum(own.values())
    rows = ["| layer | % of samples |", "|---|---|"]
    rows += [f"| {name} | {100 * n / total:.1f} |" for name, n in own.most_common()]
    return "\n".join(rows)


def _short(frame: str) -> str:
    """``function (file.py)`` of a py-spy frame ``function (path/file.py:line)``."""
    return frame.split(" (")[0] + " (" + frame.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1] + ")"


def top_table(raw: Path, limit: int = 20) -> str:
    """Markdown table of the functions with the most samples (self and total)."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    for stack, n in samples(raw):
        frames = [_short(f) for f in stack]
        own[frames[-1]] += n
        for frame in set(frames):
            total[frame] += n
    count = sum(own.values())
    rows = ["| function (file) | self % | total % |", "|---|---|---|"]
    for frame, n in own.most_common(limit):
        rows.append(f"| `{frame}` | {100 * n / count:.1f} | {100 * total[frame] / count:.1f} |")
    return "\n".join(rows)


def report(raw: Path) -> str:
    return f"{layer_table(raw)}\n\n{top_table(raw)}\n\n{part_table(raw, None)}\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pages", type=int, default=3000)
    p.add_argument("--out", type=Path, default=HERE)
    p.add_argument("--report", type=Path, help="only print the tables of an earlier run's profile.raw.txt")
    args = p.parse_args()
    if args.report:
        print(report(args.report))
        return 0
    site = ensure_site(args.pages)
    with tempfile.TemporaryDirectory() as tmp, Children() as group:
        url = start_site(group, site.root, latency=0.0, prefer="python", workdir=Path(tmp)).url
        return profile_site(args, site, url)


def profile_site(args: argparse.Namespace, site: Any, url: str) -> int:
    from crawler_tasks.cli.local import EmbeddedRedis, Workers

    broker = EmbeddedRedis().start()
    args.out.mkdir(parents=True, exist_ok=True)
    store = os.path.join(tempfile.mkdtemp(prefix="profile-"), "pages.db")
    # As bench/compare's crawler_tasks rows: one Redis, no delay, no host cap, no robots.txt.
    os.environ.update({"CRAWLER_BROKER_URL": broker.url, "CRAWLER_STORE": store,
                       "CRAWLER_DOWNLOAD_DELAY": "0",
                       "CRAWLER_HOST_CONCURRENCY": os.environ.get("CRAWLER_HOST_CONCURRENCY", "0"),
                       "CRAWLER_ROBOTSTXT_OBEY": "0", "CRAWLER_TASK_EVENTS": os.environ.get("CRAWLER_TASK_EVENTS", "auto"),
                       "CRAWLER_PRIVATE_ALLOWLIST": "127.0.0.0/8"})  # the site is on loopback
    from crawler_tasks.core.settings import Settings
    from crawler_tasks.service.celery_app import app
    from crawler_tasks.stages.runtime import current

    settings = Settings.from_env()
    rt = current(app)
    workers = Workers(settings, name="profile@%h", processes=1).start()
    try:
        return profile(args, site, url, rt, settings, workers)
    finally:
        workers.stop()
        broker.stop()


def profile(args: argparse.Namespace, site, url: str, rt, settings, workers) -> int:
    from crawler_tasks.cli.local import wait_drained
    from crawler_tasks.stages.seed import build_requests, submit_requests

    time.sleep(3)
    assert workers.proc is not None
    raw = args.out / "profile.raw.txt"
    spy = subprocess.Popen([py_spy(), "record", "--pid", str(workers.proc.pid), "--rate", "200", "--gil",
                            "--format", "raw", "--output", str(raw), "--nonblocking"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    worker = psutil.Process(workers.proc.pid)
    cpu_before = sum(worker.cpu_times()[:2])
    started = time.monotonic()
    submit_requests(rt, build_requests(url, crawl_id="profile"))
    wait_drained(lambda: rt.crawls.outstanding("profile") == 0, poll=0.2, workers=workers)
    elapsed = time.monotonic() - started
    cpu_s = sum(worker.cpu_times()[:2]) - cpu_before
    spy.send_signal(2)
    spy.wait(30)
    stored = rt.stats.read("profile").get("stored", 0)
    table = top_table(raw)
    parts = part_table(raw, 1000 * cpu_s / max(stored, 1))
    (args.out / "top20.md").write_text(
        f"# Where a worker's CPU goes\n\n{stored} pages of the generated site "
        f"({site.mean_page_kb:.0f} KB, {args.pages} pages) in {elapsed:.1f}s, one worker process "
        f"({settings.worker_pool}, {settings.worker_concurrency}). py-spy samples of the thread holding the GIL (--gil) "
        f", i.e. where the CPU goes; self = in that function, total = "
        f"in it or below. Flame graph: `py-spy record --format flamegraph` on the same run.\n\n"
        f"{layer_table(raw)}\n\n{table}\n\n"
        f"A page's CPU by part ({1000 * cpu_s / max(stored, 1):.2f} ms of the worker process's CPU "
        f"per page in this run, shared out by samples):\n\n{parts}\n")
    print(layer_table(raw))
    print(parts)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
