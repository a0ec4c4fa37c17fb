"""``crawler-tasks metrics``: a Prometheus exporter for the whole cluster, read from Redis."""

from __future__ import annotations

import argparse
import sys
import threading

from prometheus_client import CollectorRegistry, start_http_server

from ..core.errors import BadInput
from ..service.metrics import CrawlCollector
from .common import state_runtime


def cmd_metrics(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536 or args.top_hosts < 1:
        raise BadInput("--port: 1 to 65535; --top-hosts: at least 1")
    rt = state_runtime()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CrawlCollector(rt, top_hosts=args.top_hosts))
    try:
        start_http_server(args.port, addr=args.address, registry=registry)
    except OSError as exc:
        raise BadInput(f"cannot listen on {args.address}:{args.port}: {exc.strerror}") from None
    print(f"serving Prometheus metrics on http://{args.address}:{args.port}/metrics", file=sys.stderr, flush=True)
    threading.Event().wait()  # until a signal ends the process
    return 0
