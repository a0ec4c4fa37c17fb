"""Where a polite crawl's span goes, host by host, from a bench/broad request log.

A crawl of M hosts at one request per host every d seconds cannot take less than
(R − 1) × d, R being the requests of the busiest host. What it takes beyond that is
either the hosts' start stagger (the last host's first request after the first host's)
or each host's own excess: the sum over its gaps of (gap − d). This prints both, and
the excess by the kind of request that ended the gap (the page after robots.txt, a
page, a retry, ...), so two crawlers' logs can be held side by side.

    BENCH_KEEP_LOGS=/tmp/logs bench/broad --realweb --only cli-2,scrapy-1
    python bench/host_timeline/host_timeline.py --delay 1 /tmp/logs/requests-uniform-*.log
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broad_crawl"))  # bench/broad's log reader

from broad_log import Hit, by_host, read_log  # noqa: E402


def kind(before: Hit, after: Hit) -> str:
    """What ended the gap between two requests to one host."""
    if before.path.startswith("/robots.txt"):
        return "after robots.txt"
    if after.path == before.path:
        return "retry"
    return "/" + after.path.split("/")[1] if after.path != "/" else "/"


def quantiles(values: list[float]) -> str:
    v = sorted(values)
    return f"p50 {v[len(v) // 2]:.3f}  p90 {v[int(len(v) * 0.9)]:.3f}  max {v[-1]:.3f}"


def report(path: Path, delay: float) -> None:
    hits = read_log(path)
    hosts = by_host(hits)
    first = hits[0].arrived
    most = max(len(v) for v in hosts.values())
    print(f"{path.name}: {len(hits)} requests to {len(hosts)} hosts, span {hits[-1].arrived - first:.3f} s "
          f"(at least {(most - 1) * delay:.3f} s)")
    print(f"  start stagger s: {quantiles([v[0].arrived - first for v in hosts.values()])}")
    print(f"  host span s:     {quantiles([v[-1].arrived - v[0].arrived for v in hosts.values()])}")
    excess: Counter[str] = Counter()
    gaps: Counter[str] = Counter()
    for requests in hosts.values():
        for before, after in zip(requests, requests[1:]):
            k = kind(before, after)
            excess[k] += after.arrived - before.arrived - delay
            gaps[k] += 1
    for k, total in sorted(excess.items(), key=lambda kv: -kv[1]):
        print(f"  gaps ending {k:17s} {gaps[k]:5d}   mean excess {total / gaps[k] * 1000:6.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, required=True, help="the crawl's delay (seconds)")
    parser.add_argument("logs", nargs="+", type=Path, help="request logs kept with BENCH_KEEP_LOGS")
    args = parser.parse_args()
    for log in args.logs:
        report(log, args.delay)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
