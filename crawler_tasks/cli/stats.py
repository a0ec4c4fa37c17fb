"""``crawler-tasks stats``: counters, queue depth per band, busiest hosts, the gate."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..broker.queues import queue_depths
from .common import state_runtime


def cmd_stats(args: argparse.Namespace) -> int:
    rt = state_runtime()
    settings, app = rt.settings, rt.app
    ids = [args.crawl_id] if args.crawl_id else rt.crawls.all_ids()
    waiting = rt.hosts.waiting_by_crawl()
    report = {
        "overall": rt.stats.read(),
        "queues": queue_depths(app, settings),
        "store_queue": rt.store_queue.depth().to_dict(),
        "hosts": {"waiting": rt.hosts.waiting(),
                  "busiest": [{**h.to_dict(), "robots": rt.robots.state_of(h.host)}
                              for h in rt.hosts.busiest()]},
        "crawls": {cid: {**rt.stats.read(cid), "in_flight": rt.crawls.outstanding(cid),
                         "waiting": waiting.get(cid, 0), "held": rt.crawls.held(cid),
                         "gate": rt.gate.info(cid).to_dict(),
                         "last_errors": rt.crawls.errors(cid, 3)} for cid in ids},
    }
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        _print_stats(report)
    return 0


def _print_stats(report: dict[str, Any]) -> None:
    print("queues (messages waiting, by band; band 9 = served first):")
    for queue, bands in report["queues"].items():
        detail = ", ".join(f"{band}: {n}" for band, n in bands.items() if band != "total" and n)
        print(f"  {queue:<14}{bands['total']:>8}  {detail}")
    sq = report["store_queue"]
    print(f"store queue: {sq['pending']} records waiting for a batch, {sq['delayed']} waiting "
          f"on a retry, {sq['taken']} being written by {sq['writers']} worker(s)")
    hosts = report["hosts"]
    print(f"hosts: {hosts['waiting']} fetches waiting for their host; busiest:")
    for h in hosts["busiest"]:
        extra = "".join([f", back-off {h['backoff']:g} s" if h["backoff"] else "",
                         f", {h['throttled']} throttled" if h["throttled"] else "",
                         f", concurrency cut by {h['concurrency_cut']}" if h["concurrency_cut"] else ""])
        print(f"  {h['host']:<32} delay {h['delay']:g} s, {h['in_flight']} in flight, "
              f"{h['waiting']} waiting, {h['requests']} requests, robots.txt {h['robots']}{extra}")
    print("overall:")
    for name, value in report["overall"].items():
        print(f"  {name:<{_width(report['overall'])}}{value}")
    for cid, figures in report["crawls"].items():
        print(f"crawl {cid}:")
        for name, value in figures.items():
            if name not in ("last_errors", "gate"):
                print(f"  {name:<{_width(figures)}}{value}")
        print(f"  {'gate':<{_width(figures)}}{_gate_line(figures['gate'])}")
        for line in figures["last_errors"]:
            print(f"  error: {line}")


def _width(figures: dict[str, Any]) -> int:
    """The name column: 24 characters, wider when a name needs it (retry/reason_count/http_503...)."""
    return max([24, *(len(name) + 2 for name in figures)])


def _gate_line(gate: dict[str, Any]) -> str:
    """``bloom: 1,204 URLs in 21.7 MB (capacity 10,000,000 at 0.001, 1 slice)``."""
    line = f"{gate['mode']}: {gate['items']:,} URLs in {gate['bytes'] / 1e6:.1f} MB"
    if gate["mode"] == "bloom":
        line += (f" (capacity {gate['capacity']:,} at {gate['error_rate']:g}, "
                 f"{gate['slices']} slice{'s' if gate['slices'] != 1 else ''})")
    if gate["recrawl_after"]:
        line += f", recrawl after {gate['recrawl_after']:g} s"
    return line
