#!/usr/bin/env python3
"""Bounded state under hostile or broad input: worker memory, CPU per link, open sockets.

    .venv/bin/python bench/bounded/bounded.py domains  [--hosts 100000] [--pages 300]
    .venv/bin/python bench/bounded/bounded.py hostile  [--pages 10] [--concurrency 8]
    .venv/bin/python bench/bounded/bounded.py sockets  [--hosts 1000] [--concurrency 32]

``domains``  a crawl whose configuration lists ``--hosts`` seed hosts (unresolvable
             names, plus the site's 127.0.0.1): the allowed-domains check of one link,
             timed alone, then one worker crawling ``--pages`` of the generated bench site
             (bench/lib/site_gen.py, 20-40 links a page) with that configuration.
``hostile``  one worker crawling ``--pages`` pages of 1,000 distinct 10 KiB links each
             (tests/fakes/hostile_site.py, ``/long-links/<n>``), bodies up to 16 MiB kept.
``sockets``  one worker crawling one page on each of ``--hosts`` loopback addresses
             (127.0.1.1 onwards, tests/fakes/many_hosts.py: keep-alive, never closed by the server).

Each run has a private redis-server as broker and state Redis. Printed: peak RSS of the
worker process, its CPU (user + system) per link parsed, and for ``sockets`` the peak of
its sockets to the site and of its open files. To compare with another checkout, run the
same script from that checkout's directory with it first on the path (``cd /path/to/checkout &&
PYTHONPATH=$PWD python /this/checkout/bench/bounded/bounded.py ...``): the worker processes inherit
both (``python -m celery`` puts the current directory first).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ROOT, ensure_project_python  # noqa: E402

ensure_project_python("bench/bounded/bounded.py", "psutil")

import psutil  # noqa: E402
import servers  # noqa: E402
import site_gen  # noqa: E402


def _load(name: str) -> ModuleType:
    """A fake site of tests/fakes/ loaded by path (the checkout under test may lack it)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "fakes" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


from crawler_tasks.backends import open_store  # noqa: E402
from crawler_tasks.cli.local import EmbeddedRedis, Workers, wait_drained  # noqa: E402
from crawler_tasks.core import urls  # noqa: E402
from crawler_tasks.core.limits import Limits  # noqa: E402
from crawler_tasks.core.settings import Settings  # noqa: E402
from crawler_tasks.service.celery_app import create_app  # noqa: E402
from crawler_tasks.stages.runtime import Runtime  # noqa: E402
from crawler_tasks.stages.seed import build_requests, submit_requests  # noqa: E402

UNTHROTTLED = {"download_delay": 0.0, "host_concurrency": 0, "robotstxt_obey": False,
               "private_allowlist": ("127.0.0.0/8",)}  # the sites are on loopback


class Sampler:
    """Peak RSS and the CPU seconds of one worker process (and any pool children)."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.peak_rss = 0
        self.cpu = 0.0
        self.extra: dict[str, int] = {}

    def sample(self, **probes: Callable[[psutil.Process], int]) -> None:
        try:
            procs = [self.proc, *self.proc.children(recursive=True)]
            self.peak_rss = max(self.peak_rss, sum(p.memory_info().rss for p in procs))
            self.cpu = sum(p.cpu_times().user + p.cpu_times().system for p in procs)
            for name, probe in probes.items():
                self.extra[name] = max(self.extra.get(name, 0), probe(self.proc))
        except psutil.NoSuchProcess:
            pass


def run_crawl(settings: Settings, seeds: list[str], crawl_id: str, *, concurrency: int,
              before_submit: Callable[[Runtime], None] | None = None, timeout: float = 1800,
              **probes: Callable[[psutil.Process], int]) -> tuple[Sampler, float, Runtime]:
    """Crawl ``seeds`` with one worker of ``concurrency`` threads; (sampler, seconds, runtime)."""
    rt = Runtime(settings, create_app(settings))
    workers = Workers(settings, concurrency=concurrency, name=f"bounded{os.getpid()}@%h",
                      log_path=os.path.join(tempfile.gettempdir(), f"bounded-{crawl_id}.log")).start()
    try:
        sampler = Sampler(workers.proc.pid)
        # Warm up: the worker has imported and connected everything before the clock starts.
        submit_requests(rt, build_requests([seeds[0]], crawl_id="warm-up", meta={"NotExtract": True}))
        wait_drained(lambda: rt.crawls.outstanding("warm-up") == 0, timeout=120, workers=workers)
        sampler.sample()
        cpu_before = sampler.cpu
        if before_submit is not None:
            before_submit(rt)
        started = time.monotonic()
        submit_requests(rt, build_requests(seeds, crawl_id=crawl_id))

        def drained() -> bool:
            sampler.sample(**probes)
            return rt.crawls.outstanding(crawl_id) == 0

        wait_drained(drained, timeout=timeout, workers=workers, poll=0.1)
        elapsed = time.monotonic() - started
        sampler.sample(**probes)
        sampler.cpu -= cpu_before
    finally:
        workers.stop()
    return sampler, elapsed, rt


def per_link_seconds(domains: frozenset[str], links: list[str]) -> float:
    limits = Limits(domains=domains, max_depth=0, max_pages=0, store="")
    started = time.perf_counter()
    for link in links:
        limits.allows(link, origin="http://127.0.0.1/")
    return (time.perf_counter() - started) / len(links)


def cmd_domains(args: argparse.Namespace) -> None:
    hosts = [f"seed-{i}.host{i % 1000}.example" for i in range(args.hosts)]
    domains = frozenset(hosts) | {"127.0.0.1"}
    kinds = {"a seed host": [f"http://127.0.0.1:8080/p/{i}" for i in range(200)],
             "a seed host's subdomain": [f"http://www.seed-{i}.host{i % 1000}.example/x"
                                         for i in range(0, args.hosts, max(1, args.hosts // 200))],
             "offsite": [f"http://external-{i}.example/" for i in range(200)]}
    for kind, links in kinds.items():
        print(f"allowed-domains check, {args.hosts:,} seed hosts, link to {kind}: "
              f"{per_link_seconds(domains, links) * 1e6:,.1f} µs")

    site = site_gen.ensure_site(args.pages)
    with tempfile.TemporaryDirectory() as tmp, servers.Children() as group:
        served = servers.start_site(group, Path(site.root), latency=0.0, prefer="python", workdir=Path(tmp))
        redis_server = EmbeddedRedis().start()
        try:
            settings = Settings(broker_url=redis_server.url, store=f"{tmp}/pages.db", **UNTHROTTLED)
            seed = served.url

            def register(rt: Runtime) -> None:
                rt.crawls.register("broad", domains=hosts)

            sampler, elapsed, rt = run_crawl(settings, [seed], "broad", concurrency=args.concurrency,
                                             before_submit=register)
            records = list(open_store(settings.store).records("broad"))
            links_parsed = sum(len(r.links) for r in records)
            if not links_parsed:
                raise SystemExit(f"no links parsed ({len(records)} records; {rt.stats.read('broad')})")
            rt.close()
        finally:
            redis_server.stop()
    print(f"crawl with {args.hosts:,} seed hosts: {len(records)} pages, {links_parsed:,} links parsed "
          f"in {elapsed:.1f}s; worker CPU {sampler.cpu:.1f}s = {sampler.cpu / links_parsed * 1e6:,.0f} µs "
          f"per link; peak worker RSS {sampler.peak_rss / 2**20:.0f} MB")


def cmd_hostile(args: argparse.Namespace) -> None:
    hostile_site = _load("hostile_site")
    site = hostile_site.HostileSite().start()
    redis_server = EmbeddedRedis().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(broker_url=redis_server.url, store=f"{tmp}/pages.db",
                                download_maxsize=16 * 2**20, max_depth=1, store_body=not args.no_body,
                                **UNTHROTTLED)
            seeds = [f"{site.url}/long-links/{n}" for n in range(args.pages)]
            sampler, elapsed, rt = run_crawl(settings, [site.url + "/ok", *seeds], "hostile",
                                             concurrency=args.concurrency)
            stats = rt.stats.read("hostile")
            rt.close()
    finally:
        redis_server.stop()
        site.stop()
    links = args.pages * hostile_site.LONG_LINKS
    print(f"{args.pages} pages of {hostile_site.LONG_LINKS:,} links of 10 KiB: {stats.get('stored', 0):,} "
          f"records, links/too_long {stats.get('links/too_long', 0):,}, in {elapsed:.1f}s; worker CPU "
          f"{sampler.cpu:.1f}s = {sampler.cpu / links * 1e6:,.0f} µs per link; peak worker RSS "
          f"{sampler.peak_rss / 2**20:.0f} MB")


def cmd_sockets(args: argparse.Namespace) -> None:
    many_hosts = _load("many_hosts")
    site = many_hosts.ManyHosts(args.hosts).start()
    redis_server = EmbeddedRedis().start()

    def to_site(proc: psutil.Process) -> int:
        return sum(1 for c in proc.net_connections(kind="tcp") if c.raddr and c.raddr.port == site.port)

    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(broker_url=redis_server.url, store=f"{tmp}/pages.db", **UNTHROTTLED)
            sampler, elapsed, rt = run_crawl(settings, site.urls(), "sockets", concurrency=args.concurrency,
                                             sockets=to_site, files=lambda p: p.num_fds())
            stored = rt.stats.read("sockets").get("stored", 0)
            rt.close()
    finally:
        redis_server.stop()
        site.stop()
    print(f"{args.hosts:,} hosts, {args.concurrency} threads: {stored:,} pages in {elapsed:.1f}s; peak "
          f"{sampler.extra['sockets']} sockets to the site, {sampler.extra['files']} open files; "
          f"peak worker RSS {sampler.peak_rss / 2**20:.0f} MB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("domains")
    d.add_argument("--hosts", type=int, default=100_000)
    d.add_argument("--pages", type=int, default=300)
    d.add_argument("--concurrency", type=int, default=8)
    h = sub.add_parser("hostile")
    h.add_argument("--pages", type=int, default=10)
    h.add_argument("--concurrency", type=int, default=8)
    h.add_argument("--no-body", action="store_true", help="records without the page body (CRAWLER_STORE_BODY=0)")
    s = sub.add_parser("sockets")
    s.add_argument("--hosts", type=int, default=1000)
    s.add_argument("--concurrency", type=int, default=32)
    args = p.parse_args()
    print(f"crawler_tasks from {Path(urls.__file__).parent.parent}")
    {"domains": cmd_domains, "hostile": cmd_hostile, "sockets": cmd_sockets}[args.command](args)


if __name__ == "__main__":
    main()
