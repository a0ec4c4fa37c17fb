#!/usr/bin/env python3
"""bench/compare: crawler_tasks side by side with Scrapy and scrapy-redis on one generated site.

    bench/compare [--pages 20000] [--latency 0.05] [--runs 3] [--only ROWS] [--json PATH]

Generates (once) a deterministic site, serves it on 127.0.0.1 (nginx when
installed, else, and always with --latency, a Python asyncio server), measures
the server's own req/s, then crawls it with every row, interleaved: round 1
runs each row once, round 2 again, and so on. Prints one markdown table.
Every child process is stopped when the run ends, on an error, on Ctrl-C and
on SIGTERM (:func:`servers.session`). What each column means: README.md here.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ensure_project_python  # noqa: E402

ensure_project_python("bench/compare", "psutil")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any  # noqa: E402

from harness import Context, Row, RunResult, scrapy_python_for, versions  # noqa: E402
from report import Summary, table  # noqa: E402
from rows import ROWS, ROWS_BY_KEY, RULE_DIR, run_compare_row  # noqa: E402
from servers import BenchError, Children, log, measure_ceiling, session, start_site  # noqa: E402
from site_gen import Site, ensure_site  # noqa: E402

DESCRIPTION = ("Crawl one generated site with crawler_tasks, Scrapy and scrapy-redis, interleaved, "
               "and print a markdown table (see bench/compare_scrapy/README.md).")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/compare", description=DESCRIPTION)
    p.add_argument("--pages", type=int, default=20_000, help="pages in the generated site (default 20000)")
    p.add_argument("--latency", type=float, default=0.0,
                   help="seconds before each response (Python server); 0 = as fast as it goes")
    p.add_argument("--runs", type=int, default=3, help="rounds; each row runs once per round (default 3)")
    p.add_argument("--only", default="", help=f"comma list of rows: {','.join(ROWS_BY_KEY)}")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run before it fails (default 900)")
    p.add_argument("--seed", type=int, default=1, help="RNG seed of the site (default 1)")
    p.add_argument("--server", choices=("auto", "nginx", "python"), default="auto",
                   help="what serves the site (auto: nginx if installed and no latency)")
    p.add_argument("--json", metavar="PATH", help="write the raw per-run numbers here")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=ROW,VAR=VALUE,...",
                   help="one more row: row ROW with more environment, e.g. "
                        "gevent=cli-1,CRAWLER_WORKER_POOL=gevent or scrapy-cap16=scrapy-1,"
                        "BENCH_SCRAPY_PER_DOMAIN=16 (repeatable)")
    p.add_argument("--before", metavar="CHECKOUT",
                   help="for every crawler_tasks row, one more row running the crawler_tasks of "
                        "CHECKOUT (PYTHONPATH), beside this one: a change measured in one run")
    p.add_argument("--split-redis", action="store_true",
                   help="a Redis each for broker and state (default: one for both, as a user runs it); "
                        "the bytes column is then the broker's alone")
    args = p.parse_args(argv)
    if args.pages < 10 or args.runs < 1 or args.latency < 0 or args.timeout <= 0:
        p.error("--pages >= 10, --runs >= 1, --latency >= 0, --timeout > 0")
    return args


def selected_rows(only: str, variants: list[str] | None = None, before: str | None = None) -> list[Row]:
    """The rows of ``--only`` (all by default), then each ``--variant``, then with ``--before``
    an ``@before`` twin of every crawler_tasks row."""
    rows = list(ROWS)
    if only:
        keys = [k.strip() for k in only.split(",") if k.strip()]
        unknown = [k for k in keys if k not in ROWS_BY_KEY]
        if unknown:
            raise SystemExit(f"bench/compare: unknown row(s) {', '.join(unknown)}; rows: {', '.join(ROWS_BY_KEY)}")
        rows = [row for row in ROWS if row.key in keys]
    for spec in variants or []:
        name, _, rest = spec.partition("=")
        base, *pairs = rest.split(",")
        if base not in ROWS_BY_KEY or not all("=" in p for p in pairs):
            raise SystemExit(f"bench/compare: --variant {spec!r}: NAME=ROW,VAR=VALUE,... with a ROW of --only's")
        env = tuple(tuple(p.split("=", 1)) for p in pairs)
        shown = ", ".join(f"{k}={v}" for k, v in env)
        row = ROWS_BY_KEY[base]
        rows.append(dataclasses.replace(row, key=name, label=f"{row.label}, {shown}", env=env))  # type: ignore[arg-type]
    if before:
        rev = _revision(before)
        rows += [dataclasses.replace(row, key=f"{row.key}@before", label=f"{row.label} (at {rev})",
                                     env=(*row.env, ("PYTHONPATH", str(Path(before).resolve()))))
                 for row in list(rows) if row.is_crawler_tasks]
    return rows


def _revision(checkout: str) -> str:
    if not (Path(checkout) / "crawler_tasks").is_dir():
        raise SystemExit(f"bench/compare: --before {checkout}: no crawler_tasks package there")
    done = subprocess.run(["git", "-C", checkout, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or checkout


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    rows = selected_rows(args.only, args.variant, args.before)
    return session("bench/compare", "crawler-bench-", lambda workdir: _compare(args, rows, workdir, argv))


def _compare(args: argparse.Namespace, rows: list[Row], workdir: Path, argv: list[str]) -> int:
    command = "bench/compare " + shlex.join(argv) if argv else "bench/compare"
    started = time.monotonic()
    log(f"generating or reusing the {args.pages}-page site (seed {args.seed}) ...")
    site = ensure_site(args.pages, args.seed)
    scrapy_python, scrapy_error = scrapy_python_for(rows, "bench/compare")
    with Children() as session:
        server = start_site(session, site.root, latency=args.latency, prefer=args.server, workdir=workdir)
        log(f"site: {site.root} served by {server.kind} at {server.url}")
        ceiling, how = measure_ceiling(session, server.url)
        log(f"server ceiling: {ceiling:,.0f} req/s ({how})")
        ctx = Context(site=server, expected_pages=site.expected_urls, timeout=args.timeout, workdir=workdir,
                      project_bin=Path(sys.executable).parent,
                      key_prefix=os.environ.get("CRAWLER_KEY_PREFIX", "crawler"),
                      scrapy_python=scrapy_python, scrapy_error=scrapy_error, split_redis=args.split_redis,
                      rule_dir=RULE_DIR)
        results = _rounds(ctx, rows, args.runs)
    summaries = [Summary(row, [r for r in results if r.row == row.key]) for row in rows]
    meta = {"command": command, "site": site, "server": server.kind, "ceiling": ceiling, "ceiling_how": how,
            "versions": versions(scrapy_python), "runs": args.runs, "latency": args.latency,
            "minutes": (time.monotonic() - started) / 60, "split_redis": args.split_redis}
    print(render(summaries, meta))
    if args.json:
        _dump_json(Path(args.json), args, meta, summaries)
        log(f"raw numbers: {args.json}")
    return 0 if all(s.ok for s in summaries) else 1


def _rounds(ctx: Context, rows: list[Row], runs: int) -> list[RunResult]:
    results: list[RunResult] = []
    for round_no in range(1, runs + 1):
        for row in rows:
            log(f"[round {round_no}/{runs}] {row.key} ...")
            result = run_compare_row(ctx, row, round_no)
            results.append(result)
            log(f"[round {round_no}/{runs}] {row.key}: {_brief(result)}")
            if not ctx.site.alive():
                raise BenchError("the site server died; stopping")
    return results


def _brief(r: RunResult) -> str:
    if not r.ok:
        return f"failed: {r.error}"
    extra = "" if r.redis_commands_per_page is None else f", {r.redis_commands_per_page:.1f} Redis cmds/page"
    return (f"{r.pages} pages in {r.elapsed_s:.1f}s = {r.pages_per_s:.0f} pages/s, "
            f"CPU {r.cpu_ms_per_page:.2f} ms/page, peak RSS {r.peak_rss_mb:.0f} MB{extra}")


def render(summaries: list[Summary], meta: dict[str, Any]) -> str:
    site: Site = meta["site"]
    latency = f"{meta['latency'] * 1000:g} ms per response" if meta["latency"] else "no added latency"
    body, notes = table(summaries, site.expected_urls, split_redis=meta.get("split_redis", False))
    vers = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    lines = [
        f"### {site.pages:,} pages, {latency}, {meta['runs']} run(s) per row",
        "",
        f"Command: `{meta['command']}`  ",
        ("Redis: a private redis-server each for broker and state  " if meta.get("split_redis") else
         "Redis: one private redis-server as broker and state (as a user runs it)  "),
        f"Site: {site.pages:,} pages ({site.expected_urls:,} distinct URLs with the query variants), "
        f"mean {site.mean_page_kb:.1f} KB, served by {meta['server']}  ",
        f"Server ceiling: {meta['ceiling']:,.0f} req/s ({meta['ceiling_how']})  ",
        f"Machine: {os.cpu_count()} CPUs shared by the site server, Redis and the crawlers; "
        f"32 concurrent requests per crawler process  ",
        f"Versions: {vers}",
        "",
        body,
    ]
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines)


def _dump_json(path: Path, args: argparse.Namespace, meta: dict[str, Any], summaries: list[Summary]) -> None:
    site: Site = meta["site"]
    data = {
        "command": meta["command"],
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "args": vars(args),
        "site": {"root": str(site.root), "pages": site.pages, "seed": site.seed,
                 "expected_urls": site.expected_urls, "total_bytes": site.total_bytes},
        "server": meta["server"], "ceiling_req_s": meta["ceiling"], "ceiling_how": meta["ceiling_how"],
        "versions": meta["versions"], "cpus": os.cpu_count(),
        "rows": [{**s.to_dict(), "runs": [r.to_dict() for r in s.runs]} for s in summaries],
    }
    path.write_text(json.dumps(data, indent=2))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
