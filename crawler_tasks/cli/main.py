"""``crawler-tasks``: crawl, demo, submit, export, stats, seeds, dead-letters, replay-dead, purge.

Every error a user can cause ends as one line on stderr and a non-zero exit:
2 bad input, 3 broker or Redis unreachable, 1 any other crawler error,
130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any, NoReturn

import redis

from ..core import counters
from ..core.errors import BadInput, BrokerUnavailable, CrawlerError, QueueFull
from ..core.settings import Settings

EXIT_BAD_INPUT, EXIT_UNAVAILABLE, EXIT_ERROR, EXIT_INTERRUPTED = 2, 3, 1, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        command = self.prog.partition(" ")[2]
        where = f"{command}: " if command else ""
        self.exit(EXIT_BAD_INPUT, f"crawler-tasks: error: {where}{message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="crawler-tasks", description="A distributed web crawler on Celery.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("crawl", help="crawl from seed URLs on this machine and wait until done")
    c.add_argument("urls", nargs="+", metavar="URL")
    _crawl_options(c)

    d = sub.add_parser("demo", help="serve a generated local site and crawl it")
    d.add_argument("--pages", type=int, default=200, help="pages in the demo site (default 200)")
    _crawl_options(d)

    s = sub.add_parser("submit", help="enqueue seed URLs for the running workers")
    s.add_argument("urls", nargs="*", metavar="URL")
    s.add_argument("--file", "-f", help="file of seeds: one URL or JSON seed object per line ('-' = stdin)")
    s.add_argument("--priority", type=int, default=0, help="higher is sooner (default 0)")
    s.add_argument("--crawl-id", default=None)
    s.add_argument("--dont-filter", action="store_true", help="bypass the gate (recrawl)")

    e = sub.add_parser("export", help="write stored records as JSON lines to stdout")
    e.add_argument("--store", default=None, help="store URI (default: CRAWLER_STORE)")
    e.add_argument("--crawl-id", default=None)
    e.add_argument("--no-body", action="store_true", help="leave the page bodies out")

    t = sub.add_parser("stats", help="show counters and queue depth per band")
    t.add_argument("--json", action="store_true")
    t.add_argument("--crawl-id", default=None)

    f = sub.add_parser("seeds", help="show the seed feeds Beat runs and how their ticks went")
    f.add_argument("--json", action="store_true")

    d = sub.add_parser("dead-letters", help="list records a store refused, or whose store stayed "
                                            "down past its retries, with the reason")
    d.add_argument("--json", action="store_true")
    d.add_argument("--crawl-id", default=None)

    r = sub.add_parser("replay-dead", help="write the dead letters to their stores (or another) again")
    r.add_argument("--crawl-id", default=None)
    r.add_argument("--to", default=None, metavar="URI",
                   help="write them to this store URI instead of their own")

    g = sub.add_parser("purge", help="remove a finished crawl's state from Redis (its stored "
                                     "records stay in their store)")
    g.add_argument("--crawl-id", required=True)
    g.add_argument("--force", action="store_true", help="purge even with tasks outstanding")
    return p


def _crawl_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-pages", type=int, default=0, help="stop admitting URLs after N (0 = no limit)")
    p.add_argument("--max-depth", type=int, default=None, help="link hops from the seeds (0 = unlimited)")
    p.add_argument("--store", default=None, help="store URI (default: CRAWLER_STORE)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                   help="worker processes, each with CRAWLER_WORKER_CONCURRENCY requests in flight "
                        "(default: one per core)")
    p.add_argument("--crawl-id", default=None, help="resume or name a crawl (default: new id)")
    p.add_argument("--delay", type=float, default=None,
                   help="seconds between two requests to one host (default: CRAWLER_DOWNLOAD_DELAY)")
    p.add_argument("--host-concurrency", type=int, default=None,
                   help="requests in flight to one host, 0 = no cap (default: CRAWLER_HOST_CONCURRENCY)")
    p.add_argument("--ignore-robots", action="store_true", help="do not read robots.txt")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress line")


def _terminate(signum: int, frame: object) -> NoReturn:
    raise KeyboardInterrupt  # unwinds through run_crawl's cleanup: workers stop, nothing is left


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _terminate)
    try:
        return COMMANDS[args.command](args)
    except BadInput as exc:
        return _fail(exc, EXIT_BAD_INPUT)
    except (BrokerUnavailable, QueueFull) as exc:
        return _fail(exc, EXIT_UNAVAILABLE)
    except CrawlerError as exc:
        return _fail(exc, EXIT_ERROR)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except redis.RedisError as exc:  # the state Redis failed where no step waits for it
        return _fail(f"Redis failed: {type(exc).__name__}: {exc}", EXIT_UNAVAILABLE)
    except BrokenPipeError:  # e.g. `crawler-tasks export | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR


def _fail(message: object, code: int) -> int:
    print(f"crawler-tasks: error: {message}", file=sys.stderr)
    return code


def _absolute_store(uri: str) -> str:
    """Plain paths (of one URI or a list) made absolute, so workers started elsewhere write
    the same file."""
    from ..core.store_uris import split_uris

    return ",".join(u if "://" in u else os.path.abspath(u) for u in split_uris(uri)) or uri


def _new_crawl_id() -> str:
    return datetime.now(UTC).strftime("crawl-%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def cmd_crawl(args: argparse.Namespace) -> int:
    from ..stages.seed import build_requests

    crawl_id = args.crawl_id or _new_crawl_id()
    requests = build_requests(args.urls, crawl_id=crawl_id,
                              max_url_length=Settings.from_env().max_url_length)
    summary = run_crawl(requests, args)
    _print_summary(summary)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from ..stages.seed import build_requests
    from .demo_site import DemoSite

    if args.pages < 1:
        raise BadInput("--pages: must be at least 1")
    # The demo site is this process's own: no need to spare it (robots.txt is still read).
    args.delay = 0.0 if args.delay is None else args.delay
    args.host_concurrency = 0 if args.host_concurrency is None else args.host_concurrency
    with DemoSite(args.pages) as site:
        print(f"demo site with {args.pages} pages at {site.url}", file=sys.stderr)
        requests = build_requests([site.url], crawl_id=args.crawl_id or _new_crawl_id())
        summary = run_crawl(requests, args)
    _print_summary(summary)
    return 0


def _validate_crawl_options(args: argparse.Namespace, settings: Settings) -> Settings:
    from ..backends import open_store

    if args.workers < 1:
        raise BadInput("--workers: must be at least 1")
    if args.max_pages < 0 or (args.max_depth is not None and args.max_depth < 0):
        raise BadInput("--max-pages and --max-depth: must be 0 or more")
    if (args.delay is not None and not 0 <= args.delay < float("inf")) or \
            (args.host_concurrency is not None and args.host_concurrency < 0):
        raise BadInput("--delay and --host-concurrency: must be 0 or more")
    store = _absolute_store(args.store or settings.store)
    open_store(store, settings).close()
    changes: dict[str, Any] = {"store": store}
    if args.max_depth is not None:
        changes["max_depth"] = args.max_depth
    if args.delay is not None:
        changes["download_delay"] = args.delay
    if args.host_concurrency is not None:
        changes["host_concurrency"] = args.host_concurrency
    if args.ignore_robots:
        changes["robotstxt_obey"] = False
    return settings.replace(**changes)


def _allow_seed_hosts(settings: Settings, requests: list) -> Settings:
    """``settings`` whose private-network allowlist also holds the hosts of ``requests``: the
    seeds an operator typed (or the demo's own site) may be private; what they link or
    redirect to is judged as usual."""
    from ..core.addresses import parse_allowlist
    from ..core.urls import host_of

    hosts = []
    for host in sorted({host_of(r.url) for r in requests}):
        try:
            hosts += parse_allowlist([host])
        except ValueError:  # a name the allowlist cannot hold: judged like any other
            pass
    return settings.replace(private_allowlist=(*settings.private_allowlist, *hosts))


def run_crawl(requests: list, args: argparse.Namespace) -> dict[str, Any]:
    """Run workers on this machine, submit ``requests`` and wait until their crawl drains.

    On SIGINT or SIGTERM the workers stop warm (running tasks finish, the rest
    goes back to the queue); a second signal stops them at once. Nothing this
    started outlives it.
    """
    from ..core.errors import CrawlStateLost
    from ..core.store_uris import masked
    from .local import CrawlWatch, EmbeddedRedis, Workers, reachable, wait_drained

    settings = _allow_seed_hosts(_validate_crawl_options(args, Settings.from_env()), requests)
    crawl_id = requests[0].crawl_id
    embedded: EmbeddedRedis | None = None
    workers: Workers | None = None
    try:
        if not reachable(settings):
            print("broker not reachable: starting an embedded Redis", file=sys.stderr)
            embedded = EmbeddedRedis().start()
            settings = settings.replace(broker_url=embedded.url, redis_url=embedded.url)
        os.environ.update(settings.to_env())
        workers = Workers(settings, processes=args.workers, name=f"{crawl_id}@%h")
        from ..service.celery_app import app
        from ..stages.runtime import current
        from ..stages.seed import submit_requests

        rt = current(app)
        workers.start()
        started = time.monotonic()
        accepted = submit_requests(rt, requests, max_depth=args.max_depth,
                                   max_pages=args.max_pages, store=settings.store)
        progress = _Progress(rt, crawl_id, started, quiet=args.quiet)
        watch = CrawlWatch(rt, crawl_id, settings.stall_timeout, say=progress.say)
        try:
            wait_drained(watch.drained, tick=progress, workers=workers)
        except CrawlStateLost as exc:
            raise CrawlStateLost(f"{exc}: {_stored_count(settings.store, crawl_id)} of its pages are "
                                 f"stored in {masked(settings.store)}; run the same command with "
                                 f"--crawl-id {crawl_id} to go on (stored pages are kept, the rest "
                                 "is fetched again)") from None
        progress.done()
        elapsed = time.monotonic() - started
        stats = rt.stats.read(crawl_id)
        _flush_stats(rt, crawl_id)
    except KeyboardInterrupt:
        print(f"\nstopping: running tasks finish, the rest stays queued (a second signal "
              f"stops at once); resume with --crawl-id {crawl_id}", file=sys.stderr)
        raise
    finally:
        _shut_down(settings, workers, embedded)
    return {"crawl_id": crawl_id, "seeds_accepted": accepted, "elapsed": elapsed,
            "store": masked(settings.store), "stats": stats, "embedded": embedded is not None}


def _stored_count(store: str, crawl_id: str) -> str:
    """How many records of the crawl the store holds, as text ('an unknown number' if it
    cannot say, e.g. a write-only WARC store)."""
    from ..backends import open_store

    try:
        opened = open_store(store, Settings.from_env())
        try:
            return str(opened.count(crawl_id))
        finally:
            opened.close()
    except Exception:  # a store that cannot count: the message still says what to do
        return "an unknown number"


def _flush_stats(rt: Any, crawl_id: str) -> None:
    """The crawl's final counters into its store's statistics (when it keeps them)."""
    from ..core.errors import StoreUnavailable
    from ..stages.store import flush_stats

    try:
        flush_stats(rt, [crawl_id])
    except StoreUnavailable as exc:
        print(f"crawl statistics not written to the store: {exc}", file=sys.stderr)


def _shut_down(settings: Settings, workers: Any, embedded: Any) -> None:
    """Stop the workers warm (at once on a second signal), then the embedded Redis."""
    try:
        if workers is not None:
            try:
                workers.stop(timeout=settings.download_timeout + 10)
            except KeyboardInterrupt:
                workers.kill()
                raise
    finally:
        if embedded is not None:
            embedded.stop()


class _Progress:
    """A progress line on a terminal (refreshed), or a line every 5 s otherwise."""

    def __init__(self, rt: Any, crawl_id: str, started: float, *, quiet: bool) -> None:
        self.rt, self.crawl_id, self.started = rt, crawl_id, started
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.last = 0.0 if self.tty else started

    def say(self, message: str) -> None:
        """A line of its own (ending the refreshed progress line first)."""
        print(f"\r{message}\033[K" if self.tty else message, file=sys.stderr, flush=True)

    def __call__(self) -> None:
        now = time.monotonic()
        if self.quiet or now - self.last < (0.5 if self.tty else 5.0):
            return
        self.last = now
        try:
            s = self.rt.stats.read(self.crawl_id)
            in_flight = self.rt.crawls.outstanding(self.crawl_id)
        except redis.RedisError:  # the watch says so; no progress line meanwhile
            return
        stored = s.get(counters.STORED, 0)
        line = (f"stored {stored} · in flight {in_flight}"
                f" · failed {s.get(counters.FAILURES, 0)} · duplicates {s.get(counters.DUPLICATES, 0)}"
                f" · {stored / max(now - self.started, 1e-6):.1f} pages/s")
        print(f"\r{line}\033[K" if self.tty else line, end="" if self.tty else "\n",
              file=sys.stderr, flush=True)

    def done(self) -> None:
        if self.tty and not self.quiet and self.last:  # end the refreshed line
            print(file=sys.stderr)


def _print_summary(summary: dict[str, Any]) -> None:
    s = summary["stats"]
    elapsed = summary["elapsed"]
    rows = [
        ("crawl", summary["crawl_id"]),
        ("pages stored", s.get(counters.STORED, 0)),
        ("failed", s.get(counters.FAILURES, 0)),
        ("duplicates skipped", s.get(counters.DUPLICATES, 0)),
        ("retries", s.get(counters.RETRIES, 0)),
        ("redirects", s.get(counters.REDIRECTS, 0)),
        ("elapsed", f"{elapsed:.1f}s"),
        ("pages/s", f"{s.get(counters.STORED, 0) / max(elapsed, 1e-6):.1f}"),
        ("store", summary["store"]),
    ]
    for name, value in rows:
        print(f"{name:<20}{value}")


def _read_seeds(args: argparse.Namespace) -> list[Any]:
    from ..stages.seed import parse_seed_line

    seeds: list[Any] = list(args.urls)
    if args.file:
        try:
            handle = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")
        except OSError as exc:
            raise BadInput(f"--file: {exc.strerror}: {args.file}") from None
        with handle:
            for n, line in enumerate(handle, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                try:
                    seeds.append(parse_seed_line(line))
                except BadInput as exc:
                    raise BadInput(f"{args.file}:{n}: {exc}") from None
    if not seeds:
        raise BadInput("no URL given (pass URLs or --file)")
    return seeds


def cmd_submit(args: argparse.Namespace) -> int:
    from ..stages.seed import build_requests
    from ..state.connection import check_broker

    settings = Settings.from_env()
    requests = build_requests(_read_seeds(args), priority=args.priority, crawl_id=args.crawl_id,
                              dont_filter=args.dont_filter, max_url_length=settings.max_url_length)
    check_broker(settings.broker_url)
    from ..service.celery_app import app
    from ..stages.runtime import current
    from ..stages.seed import submit_requests

    accepted = submit_requests(current(app), requests)
    print(f"enqueued {accepted} of {len(requests)} URL(s) "
          f"({len(requests) - accepted} already seen)")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ..backends import open_store

    settings = Settings.from_env()
    uri = args.store or settings.store
    if "://" not in uri and not os.path.exists(uri):
        raise BadInput(f"no store at {uri}")
    store = open_store(uri, settings)
    try:
        for record in store.records(args.crawl_id):
            data = record.to_dict()
            if args.no_body:
                data.pop("body", None)
            sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
    finally:
        store.close()
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from ..state.queues import queue_depths

    rt = _state_runtime()
    settings, app = rt.settings, rt.app
    ids = [args.crawl_id] if args.crawl_id else rt.crawls.all_ids()
    report = {
        "overall": rt.stats.read(),
        "queues": queue_depths(app, settings),
        "store_queue": rt.store_queue.depth().to_dict(),
        "hosts": {"waiting": rt.hosts.waiting(),
                  "busiest": [{**h.to_dict(), "robots": rt.robots.state_of(h.host)}
                              for h in rt.hosts.busiest()]},
        "crawls": {cid: {**rt.stats.read(cid), "in_flight": rt.crawls.outstanding(cid),
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
        print(f"  {name:<24}{value}")
    for cid, figures in report["crawls"].items():
        print(f"crawl {cid}:")
        for name, value in figures.items():
            if name not in ("last_errors", "gate"):
                print(f"  {name:<24}{value}")
        print(f"  {'gate':<24}{_gate_line(figures['gate'])}")
        for line in figures["last_errors"]:
            print(f"  error: {line}")


def _gate_line(gate: dict[str, Any]) -> str:
    """``bloom: 1,204 URLs in 21.7 MB (capacity 10,000,000 at 0.001, 1 slice)``."""
    line = f"{gate['mode']}: {gate['items']:,} URLs in {gate['bytes'] / 1e6:.1f} MB"
    if gate["mode"] == "bloom":
        line += (f" (capacity {gate['capacity']:,} at {gate['error_rate']:g}, "
                 f"{gate['slices']} slice{'s' if gate['slices'] != 1 else ''})")
    if gate["recrawl_after"]:
        line += f", recrawl after {gate['recrawl_after']:g} s"
    return line


def cmd_seeds(args: argparse.Namespace) -> int:
    from ..stages.feeds import START_URLS, configured, status, waiting

    rt = _state_runtime()
    settings = rt.settings
    report = {"feeds": [{"name": feed.name, "enabled": feed.enabled, "reads": feed.source,
                         "interval": feed.interval, "status": status(rt, feed.name),
                         **({"waiting": waiting(rt)} if feed.name == START_URLS else {})}
                        for feed in configured(settings)],
              "crawl_id": settings.seed_crawl_id, "max_queued": settings.max_queued}
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        _print_seeds(report)
    return 0


def _print_seeds(report: dict[str, Any]) -> None:
    print(f"seeds join crawl {report['crawl_id']}"
          + (f"; ticks skip while more than {report['max_queued']} fetches wait" if report["max_queued"] else ""))
    for feed in report["feeds"]:
        state = f"every {feed['interval']:g}s" if feed["enabled"] else "off"
        reads = feed["reads"] or "-"
        if "waiting" in feed:
            reads = f"Redis key {reads} ({feed['waiting']} waiting)"
        print(f"{feed['name']:<12}{state:<14}reads: {reads}")
        st = feed["status"]
        if st["last_tick"] is None:
            print("  no tick yet")
            continue
        print(f"  last tick   {st['last_tick']}  {st['last_outcome']}")
        why = counters.FEED_SKIPPED_WHY.prefix
        skipped = ", ".join(f"{k[len(why):]} {v}" for k, v in st.items() if k.startswith(why))
        print(f"  ticks {st[counters.FEED_TICKS]} · admitted {st[counters.FEED_ADMITTED]}"
              f" · duplicates {st[counters.FEED_DUPLICATES]} · refused {st[counters.FEED_REFUSED]}"
              f" · failed {st[counters.FEED_FAILED]} · skipped {st[counters.FEED_SKIPPED]}"
              + (f" ({skipped})" if skipped else ""))


def _state_runtime() -> Any:
    """This process's runtime, once the broker answers (one line and exit 3 if not)."""
    from ..state.connection import check_broker

    check_broker(Settings.from_env().broker_url)
    from ..service.celery_app import app
    from ..stages.runtime import current

    return current(app)


def cmd_dead_letters(args: argparse.Namespace) -> int:
    from ..stages.store import dead_letters

    entries = dead_letters(_state_runtime(), args.crawl_id)
    if args.json:
        for entry in entries:
            print(json.dumps(entry, ensure_ascii=False))
        return 0
    for entry in entries:
        record = entry["record"]
        print(f"{entry['at']}  {record['crawl_id']}  {record['url']}  -> {entry['store']}  "
              f"{entry['kind']}: {entry['error']}")
    print(f"{len(entries)} dead letter(s)", file=sys.stderr)
    return 0


def cmd_replay_dead(args: argparse.Namespace) -> int:
    from ..backends import open_store
    from ..stages.store import replay_dead

    settings = Settings.from_env()
    to = None
    if args.to is not None:
        to = _absolute_store(args.to)
        open_store(to, settings).close()  # a malformed URI is one line, before any letter moves
    done = replay_dead(_state_runtime(), args.crawl_id, to=to)
    for url, store, reason in done.failing:
        print(f"still failing: {url}  -> {store}: {reason}", file=sys.stderr)
    print(f"replayed {done.written} dead letter(s); {len(done.failing)} still failing (kept)")
    return 0 if not done.failing else EXIT_UNAVAILABLE


def cmd_purge(args: argparse.Namespace) -> int:
    rt = _state_runtime()
    crawl_id = args.crawl_id
    outstanding = rt.crawls.outstanding(crawl_id)
    if outstanding and not args.force:
        raise BadInput(f"crawl {crawl_id} has {outstanding} task(s) outstanding: purge it once it "
                       "has drained, or pass --force")
    known = rt.crawls.registered(crawl_id)
    removed = rt.crawls.purge(crawl_id)
    if not known and not removed:
        raise BadInput(f"no crawl {crawl_id} in Redis")
    print(f"purged crawl {crawl_id}: {removed} key(s) removed")
    return 0


COMMANDS = {"crawl": cmd_crawl, "demo": cmd_demo, "submit": cmd_submit,
            "export": cmd_export, "stats": cmd_stats, "seeds": cmd_seeds,
            "dead-letters": cmd_dead_letters, "replay-dead": cmd_replay_dead, "purge": cmd_purge}


if __name__ == "__main__":
    sys.exit(main())
