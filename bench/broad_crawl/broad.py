#!/usr/bin/env python3
"""bench/broad: a broad polite crawl of many loopback hosts, crawler_tasks beside Scrapy.

    bench/broad [--hosts 200] [--pages-per-host 30] [--delay 1.0] [--latency 0.02] [--skew 20] [--only ROWS]

Serves the site from broad_site.py (one process, every request logged), crawls
it with each row in turn (round 1 runs every row once, then round 2, ...), and
prints the crawl's speed against the politeness limit, its cost, and the
politeness the server saw; then the JSON with ``--json``. Every child process
is stopped when the run ends, on an error, on Ctrl-C and on SIGTERM
(:func:`servers.session`). What each column means: README.md here.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ensure_project_python  # noqa: E402

ensure_project_python("bench/broad", "psutil")

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any  # noqa: E402

import broad_realweb as realweb  # noqa: E402
from broad_log import GAP_TOLERANCE, LogFigures, analyse, read_log  # noqa: E402
from broad_rows import DEFAULT_ROWS, ROWS, ROWS_BY_KEY, SCRAPY_CONCURRENCY, BroadContext, BroadRow, run_broad_row  # noqa: E402
from broad_site import addresses, pages_per_host  # noqa: E402
from harness import RunResult, scrapy_python_for, versions  # noqa: E402
from servers import BenchError, Children, SiteServer, log, read_line, session  # noqa: E402
from tables import DASH, head, median, num  # noqa: E402

DESCRIPTION = ("A broad polite crawl: M loopback hosts of K pages each, crawled with a per-host delay by "
               "crawler_tasks and Scrapy; speed, cost and politeness from the site's request log "
               "(see bench/broad_crawl/README.md).")


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="bench/broad", description=DESCRIPTION)
    p.add_argument("--hosts", type=int, default=200, help="hosts M (default 200)")
    p.add_argument("--pages-per-host", type=int, default=30, help="pages K of each host (default 30)")
    p.add_argument("--delay", type=float, default=1.0, help="politeness delay d in seconds (default 1.0)")
    p.add_argument("--latency", type=float, default=0.02, help="seconds before each response (default 0.02)")
    p.add_argument("--runs", type=int, default=1, help="rounds; each row runs once per round (default 1)")
    p.add_argument("--only", default="", help=f"comma list of rows: {','.join(ROWS_BY_KEY)} "
                   f"(default: {','.join(DEFAULT_ROWS)})")
    p.add_argument("--skew", type=float, default=0.0,
                   help="also crawl a site whose first host holds SKEW × K pages, and compare (e.g. 20)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run before it fails (default 900)")
    p.add_argument("--seed", type=int, default=1, help="RNG seed of the site (default 1)")
    p.add_argument("--json", metavar="PATH", help="write the raw per-run numbers here")
    p.add_argument("--realweb", action="store_true",
                   help="hosts that serve robots.txt with disallowed links, errors and redirects, each "
                        "crawler with its defaults (broad_realweb.py)")
    args = p.parse_args(argv)
    if (args.hosts < 2 or args.pages_per_host < 2 or args.delay <= 0 or args.latency < 0 or args.runs < 1
            or args.timeout <= 0 or (args.skew and args.skew <= 1)):
        p.error("--hosts >= 2, --pages-per-host >= 2, --delay > 0, --latency >= 0, --runs >= 1, "
                "--timeout > 0, --skew > 1")
    return args


def selected_rows(only: str) -> list[BroadRow]:
    """The rows of ``--only`` (:data:`DEFAULT_ROWS` without it)."""
    keys = [k.strip() for k in only.split(",") if k.strip()] or list(DEFAULT_ROWS)
    unknown = [k for k in keys if k not in ROWS_BY_KEY]
    if unknown:
        raise SystemExit(f"bench/broad: unknown row(s) {', '.join(unknown)}; rows: {', '.join(ROWS_BY_KEY)}")
    return [row for row in ROWS if row.key in keys]


# --------------------------------------------------------------------------- the site of one run


@dataclass(frozen=True)
class Variant:
    """One site shape: ``skew`` 1 is M equal hosts; over 1, host 0 holds skew × K pages."""

    name: str
    skew: float

    def counts(self, args: argparse.Namespace) -> list[int]:
        return pages_per_host(args.hosts, args.pages_per_host, self.skew)

    def ideal_pages_per_s(self, args: argparse.Namespace) -> float:
        """min(M/t, pages ÷ the time the largest host needs at one request per t), t the
        spacing one request at a time allows a host: the delay, or the response time
        when it is longer (the next request waits for the answer)."""
        counts = self.counts(args)
        spacing = max(args.delay, args.latency)
        longest = (max(counts) - 1) * spacing + args.latency
        return min(args.hosts / spacing, sum(counts) / longest)


@dataclass
class SiteRun:
    """The site server of one run: its URL, seeds, pages and request log."""

    server: SiteServer
    seeds: tuple[str, ...]
    pages: int
    body_bytes: int
    log: Path


def start_site(group: Children, args: argparse.Namespace, variant: Variant, log: Path) -> SiteRun:
    """broad_site.py in its own process, listening on every host's address."""
    cmd: list[str | os.PathLike[str]] = [sys.executable, Path(__file__).resolve().parent / "broad_site.py", "--hosts", str(args.hosts), "--pages-per-host",
           str(args.pages_per_host), "--skew", f"{variant.skew:g}", "--latency", f"{args.latency:g}",
           "--seed", str(args.seed), "--log", log, *(["--realweb"] if args.realweb else [])]
    child = group.spawn(cmd, name="site server", stdout=subprocess.PIPE)
    line = read_line(child.popen.stdout, 120, child)
    match = re.match(r"listening (\d+) (\d+) (\d+)", line)
    if not match:
        raise BenchError(f"site server: unexpected first line {line!r}")
    port, pages, size = (int(g) for g in match.groups())
    seeds = tuple(f"http://{host}:{port}/" for host in addresses(args.hosts))
    kind = "bench/broad_crawl/broad_site.py" + (f", {args.latency * 1000:g} ms per response" if args.latency else "")
    return SiteRun(SiteServer(seeds[0], kind, child), seeds, pages, size, log)


# --------------------------------------------------------------------------- runs


@dataclass
class BroadRun:
    """One run of one row on one variant: the crawler's numbers and the server's."""

    row: BroadRow
    variant: Variant
    result: RunResult
    expected: int
    log: LogFigures = field(default_factory=LogFigures)

    @property
    def ok(self) -> bool:
        return self.result.ok

    def to_dict(self) -> dict[str, Any]:
        return {"row": self.row.key, "variant": self.variant.name, "skew": self.variant.skew,
                "expected_pages": self.expected, **self.result.to_dict(), "server_log": self.log.to_dict()}


@dataclass(frozen=True)
class Setup:
    """What every run shares: the temporary directory and the Scrapy venv."""

    workdir: Path
    scrapy_python: Path | None
    scrapy_error: str

    def context(self, args: argparse.Namespace, site: SiteRun) -> BroadContext:
        """The context of one run on ``site``."""
        return BroadContext(site=site.server, expected_pages=site.pages, timeout=args.timeout,
                            workdir=self.workdir, project_bin=Path(sys.executable).parent,
                            key_prefix=os.environ.get("CRAWLER_KEY_PREFIX", "crawler"),
                            scrapy_python=self.scrapy_python, scrapy_error=self.scrapy_error,
                            seeds=site.seeds, delay=args.delay, realweb=args.realweb)


def one_run(setup: Setup, args: argparse.Namespace, row: BroadRow, variant: Variant, round_no: int) -> BroadRun:
    """A fresh site server, one crawl of it, the server stopped and its log read."""
    log = setup.workdir / f"requests-{variant.name.replace(' ', '-')}-{row.key}-r{round_no}.log"
    with Children() as group:
        site = start_site(group, args, variant, log)
        result = run_broad_row(setup.context(args, site), row, round_no)
        alive = site.server.alive()
    big = addresses(1)[0] if args.skew else ""
    hits = read_log(log)
    figures = analyse(hits, args.delay, big_host=big)
    if os.environ.get("BENCH_KEEP_LOGS"):  # a directory: the request logs are kept there
        shutil.copy(log, Path(os.environ["BENCH_KEEP_LOGS"]) / log.name)
    log.unlink(missing_ok=True)
    if args.realweb:
        result.notes["realweb"] = realweb.figures(hits, args.delay, args.latency, args.hosts).to_dict()
    if not alive:
        raise BenchError("the site server died; stopping")
    result.notes["body_bytes"] = site.body_bytes
    return BroadRun(row, variant, result, site.pages, figures)


def _brief(run: BroadRun) -> str:
    r, f = run.result, run.log
    if not r.ok:
        return f"failed: {r.error}"
    gap = DASH if f.min_gap_s is None else f"{f.min_gap_s:.3f}s"
    return (f"{r.pages} pages in {r.elapsed_s:.1f}s = {r.pages_per_s:.1f} pages/s, CPU {r.cpu_ms_per_page:.2f} "
            f"ms/page, peak RSS {r.peak_rss_mb:.0f} MB; server: {f.pages} pages, min gap {gap}, "
            f"{f.gaps_under_tolerance} gaps < {GAP_TOLERANCE:g} d, max {f.max_in_flight_per_host} in flight/host")


def rounds(setup: Setup, args: argparse.Namespace, rows: list[BroadRow], variants: list[Variant]) -> list[BroadRun]:
    """Round 1 runs every row on every variant, then round 2, ..."""
    runs = []
    for round_no in range(1, args.runs + 1):
        for variant in variants:
            for row in rows:
                tag = f"[round {round_no}/{args.runs}] {variant.name} {row.key}"
                log(f"{tag} ...")
                runs.append(one_run(setup, args, row, variant, round_no))
                log(f"{tag}: {_brief(runs[-1])}")
    return runs


# --------------------------------------------------------------------------- tables


def _pages(runs: list[BroadRun]) -> str:
    counts = sorted(r.result.pages for r in runs)
    text = f"{counts[0]:,}" if counts[0] == counts[-1] else f"{counts[0]:,}–{counts[-1]:,}"
    return text if all(r.result.pages == r.expected for r in runs) else f"{text} ⚠"


def _ratio(a: float | None, b: float) -> str:
    return DASH if a is None else f"{a / b:.2f}"


def _redis(runs: list[BroadRun]) -> tuple[str, str]:
    """(peak used_memory MB, bytes per waiting fetch: direct, slope, at the peak count) medians."""
    figs = [f for f in (r.result.notes.get("redis") for r in runs) if f]
    if not figs:
        return DASH, DASH
    peak = median([f["used_memory_peak"] / 2**20 for f in figs])
    direct = median([f["rooms_bytes"] / f["peak_waiting"] if f["peak_waiting"] else None for f in figs])
    per = median([f["bytes_per_waiting"] for f in figs])
    waiting = max(f["peak_waiting"] for f in figs)
    if direct is None:
        return num(peak, 1), DASH
    return num(peak, 1), f"{direct:,.0f} / {num(per)} (peak {waiting:,} waiting)"


MAIN_HEADER = ("| Row | Pages | Elapsed s | Pages/s | Steady pages/s | Ideal pages/s | Overall ÷ ideal "
               "| Steady ÷ ideal | CPU ms/page | Peak RSS MB | Redis peak MB | Redis B/waiting fetch "
               "| Min gap s | Gaps < 0.95 d | Max in flight/host |")


def main_line(row: BroadRow, runs: list[BroadRun], ideal: float) -> str:
    """One row of the main table: medians over the good runs, the worst politeness."""
    ok = [r for r in runs if r.ok]
    label = row.label + (f" ({len(runs) - len(ok)} of {len(runs)} runs failed)" if len(ok) < len(runs) else "")
    if not ok:
        return f"| {label}: failed: {runs[0].result.error if runs else 'not run'} |" + f" {DASH} |" * 14
    rate = median([r.result.pages_per_s for r in ok])
    steady = median([r.log.steady_pages_per_s for r in ok])
    gaps = [r.log.min_gap_s for r in ok if r.log.min_gap_s is not None]
    peak, per_waiting = _redis(ok)
    cells = [label, _pages(ok), num(median([r.result.elapsed_s for r in ok]), 1), num(rate, 1),
             num(steady, 1), num(ideal, 1), _ratio(rate, ideal), _ratio(steady, ideal),
             num(median([r.result.cpu_ms_per_page for r in ok]), 2),
             num(median([r.result.peak_rss_mb for r in ok])), peak, per_waiting,
             num(min(gaps) if gaps else None, 3), f"{max(r.log.gaps_under_tolerance for r in ok):,} of "
             f"{max(r.log.gaps for r in ok):,}", str(max(r.log.max_in_flight_per_host for r in ok))]
    return "| " + " | ".join(cells) + " |"


def main_table(rows: list[BroadRow], runs: list[BroadRun], variant: Variant, args: argparse.Namespace) -> str:
    """The markdown table of one variant."""
    ideal = variant.ideal_pages_per_s(args)
    lines = head(MAIN_HEADER)
    for row in rows:
        lines.append(main_line(row, [r for r in runs if r.row == row and r.variant == variant], ideal))
    return "\n".join(lines)


SKEW_HEADER = ("| Row | Small hosts done, no big host s | Small hosts done, with big host s | Ideal s "
               "| Big host requests/s (ideal {rate}) | Big host max gap s | Big host done s (ideal {big}) |")


def skew_line(row: BroadRow, runs: list[BroadRun], variants: list[Variant], ideal_small: float) -> str:
    """One row of the fairness table: when the small hosts were done, on both sites."""
    base = [r for r in runs if r.row == row and r.variant == variants[0] and r.ok]
    skew = [r for r in runs if r.row == row and r.variant == variants[1] and r.ok]
    cells = [row.label, num(median([r.log.small_done_s for r in base]), 1),
             num(median([r.log.small_done_s for r in skew]), 1), num(ideal_small, 1),
             num(median([r.log.big_rate for r in skew]), 3),
             num(max((r.log.big_max_gap_s or 0 for r in skew), default=None), 2),
             num(median([r.log.big_done_s for r in skew]), 1)]
    return "| " + " | ".join(cells) + " |"


def skew_table(rows: list[BroadRow], runs: list[BroadRun], variants: list[Variant], args: argparse.Namespace) -> str:
    """The fairness table of ``--skew``: both variants side by side."""
    big = pages_per_host(args.hosts, args.pages_per_host, args.skew)[0]
    header = SKEW_HEADER.format(rate=f"{1 / args.delay:g}", big=f"{(big - 1) * args.delay:g}")
    lines = head(header)
    ideal_small = (args.pages_per_host - 1) * args.delay
    lines += [skew_line(row, runs, variants, ideal_small) for row in rows]
    return "\n".join(lines)


def notes(runs: list[BroadRun]) -> list[str]:
    """Footnotes: failed runs, problems, refetches, pages short of the site."""
    out = []
    for r in runs:
        tag = f"{r.variant.name} {r.row.key}, run {r.result.round}"
        if not r.ok:
            out.append(f"{tag}: failed: {r.result.error}")
            continue
        redis_fig = r.result.notes.get("redis")
        if redis_fig and r.result.pages:
            parked = redis_fig["host_counters"].get("deferred", 0)
            out.append(f"{tag}: {parked:,} fetches parked in a waiting room ({parked / r.result.pages:.2f} per "
                       f"page); Redis CPU {1000 * redis_fig['cpu_s'] / r.result.pages:.2f} ms/page")
        if r.result.notes.get("problems"):
            out.append(f"{tag}: {', '.join(r.result.notes['problems'])}")
        if r.log.refetches or r.log.not_found:
            out.append(f"{tag}: the server answered {r.log.refetches} repeated fetches and {r.log.not_found} 404s")
        if r.result.pages != r.expected and "realweb" not in r.result.notes:
            out.append(f"⚠ {tag}: {r.result.pages:,} pages counted of the site's {r.expected:,} "
                       f"(the server answered {r.log.pages:,} distinct pages)")
        if r.log.gaps_under_delay and r.row.polite:
            pair = DASH if r.log.min_pair_gap_s is None else f"{r.log.min_pair_gap_s:.4f}s"
            out.append(f"{tag}: {r.log.gaps_under_delay} of {r.log.gaps} gaps under d (min {r.log.min_gap_s:.4f}s, "
                       f"host {r.log.min_gap_host}); least mean of two consecutive gaps {pair}")
    return out


def render(rows: list[BroadRow], runs: list[BroadRun], variants: list[Variant], args: argparse.Namespace,
           meta: dict[str, Any]) -> str:
    """The whole report: a header, a table per variant, the fairness table, the footnotes."""
    vers = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    latency = f"{args.latency * 1000:g} ms per response" if args.latency else "no added latency"
    lines = [f"### {args.hosts} hosts × {args.pages_per_host} pages, delay {args.delay:g} s, {latency}, "
             f"{args.runs} run(s) per row", "",
             f"Command: `{meta['command']}`  ", f"Date: {meta['date']}  ",
             f"Machine: {os.cpu_count()} CPUs shared by the site server, Redis and the crawlers; crawler_tasks: "
             f"{os.environ.get('BENCH_CONCURRENCY', '32')} threads per worker process, host concurrency "
             f"{'2 (the default), robots.txt obeyed' if args.realweb else '1'}, one Redis; Scrapy: "
             f"CONCURRENT_REQUESTS {meta['scrapy_concurrency']}, 1 per domain"
             f"{', ROBOTSTXT_OBEY' if args.realweb else ''}  ",
             f"Load average (1 min) before the first run: {meta['load_before']:.2f}  ",
             f"Versions: {vers}"]
    if args.realweb:
        return "\n".join(lines + ["", "**Real-web site** (robots.txt with disallowed links on every host, "
                                   "errors, redirects; each crawler with its defaults)", "",
                                   realweb.table(rows, runs, meta["sites"]["uniform"].get("pages", 0))])
    for variant in variants:
        site = meta["sites"].get(variant.name, {})
        lines += ["", f"**{variant.name}**: {site.get('pages', 0):,} pages, mean "
                  f"{site.get('mean_kb', 0):.1f} KB; ideal "
                  f"{variant.ideal_pages_per_s(args):.1f} pages/s", "", main_table(rows, runs, variant, args)]
    if len(variants) > 1:
        lines += ["", f"**Fairness** (host 0 holds {args.skew:g} × {args.pages_per_host} pages; times from the "
                  "first request the server logged)", "", skew_table(rows, runs, variants, args)]
    foot = notes(runs)
    return "\n".join(lines + ([""] + [f"- {n}" for n in foot] if foot else []))


# --------------------------------------------------------------------------- main


def main(argv: list[str]) -> int:
    """bench/broad: run, print the report, write the JSON."""
    args = parse_args(argv)
    rows = selected_rows(args.only)
    return session("bench/broad", "crawler-broad-", lambda workdir: _broad(args, rows, workdir, argv))


def _broad(args: argparse.Namespace, rows: list[BroadRow], workdir: Path, argv: list[str]) -> int:
    started = time.monotonic()
    scrapy_python, scrapy_error = scrapy_python_for(rows, "bench/broad")
    load_before = os.getloadavg()[0]  # anything else busy on the machine shows in every figure
    variants = [Variant("uniform", 1.0)] + ([Variant(f"skew {args.skew:g}", args.skew)] if args.skew else [])
    runs = rounds(Setup(workdir, scrapy_python, scrapy_error), args, rows, variants)
    sites = {v.name: _site_meta(v, runs) for v in variants}
    meta = {"command": "bench/broad " + shlex.join(argv) if argv else "bench/broad",
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "versions": versions(scrapy_python),
            "scrapy_concurrency": SCRAPY_CONCURRENCY, "sites": sites, "load_before": load_before, "minutes": (time.monotonic() - started) / 60}
    print(render(rows, runs, variants, args, meta))
    if args.json:
        _dump_json(Path(args.json), args, meta, runs, variants)
        log(f"raw numbers: {args.json}")
    return 0 if all(r.ok for r in runs) else 1


def _site_meta(variant: Variant, runs: list[BroadRun]) -> dict[str, Any]:
    mine = [r for r in runs if r.variant == variant]
    if not mine:
        return {}
    size = mine[0].result.notes.get("body_bytes", 0)
    return {"pages": mine[0].expected, "mean_kb": size / 1024 / max(1, mine[0].expected)}


def _dump_json(path: Path, args: argparse.Namespace, meta: dict[str, Any], runs: list[BroadRun],
               variants: list[Variant]) -> None:
    data = {**meta, "finished": datetime.now(UTC).isoformat(timespec="seconds"), "args": vars(args),
            "cpus": os.cpu_count(),
            "ideal_pages_per_s": {v.name: v.ideal_pages_per_s(args) for v in variants},
            "runs": [r.to_dict() for r in runs]}
    path.write_text(json.dumps(data, indent=2, default=str))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
