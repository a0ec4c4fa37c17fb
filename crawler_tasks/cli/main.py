"""``crawler-tasks``: crawl, demo, submit, parse, shell, export, items, stats, seeds, feed, dead-letters,
replay-dead, purge, crawls, pause, resume, cancel, metrics, top.

Every error a user can cause ends as one line on stderr and a non-zero exit:
2 bad input, 3 broker or Redis unreachable, 1 any other crawler error,
130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Callable
from typing import NoReturn

import redis

from ..core.errors import BadInput, BrokerUnavailable, CrawlerError, FeedSourceUnavailable, QueueFull
from .common import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_UNAVAILABLE


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
    _plugins_option(s, "the workers must have them in CRAWLER_PLUGINS")
    s.add_argument("--on-page", default=None, metavar="TASK",
                   help="task of another app told of each stored page of these seeds (queue crawl.callbacks)")
    s.add_argument("--on-page-follow", action="store_true",
                   help="--on-page is told of the pages found from the seeds too")
    s.add_argument("--on-done", default=None, metavar="TASK", help="task told when the crawl drains")
    s.add_argument("--revisit", type=float, default=None, metavar="SECONDS",
                   help="keep a revisit schedule: each stored page due again after SECONDS, then "
                        "as often as it changes (Beat's crawl.revisit sends them)")
    s.add_argument("--on-change", default=None, metavar="TASK",
                   help="task told of each page a revisit finds changed (with --revisit)")

    pr = sub.add_parser("parse", help="fetch one URL and print the items and requests its parser yields "
                                      "(nothing stored)")
    _probe_options(pr)
    pr.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    sh = sub.add_parser("shell", help="fetch one URL and open a Python prompt with its page (nothing stored)")
    _probe_options(sh)

    e = sub.add_parser("export", help="write stored records as JSON lines to stdout")
    e.add_argument("--store", default=None, help="store URI (default: CRAWLER_STORE)")
    e.add_argument("--crawl-id", default=None)
    e.add_argument("--no-body", action="store_true", help="leave the page bodies (and rendered DOMs) out")
    e.add_argument("--items", action="store_true", help="the items feed instead of the records (SQLite, "
                   "Elasticsearch)")
    e.add_argument("--format", choices=("jsonl", "csv"), default="jsonl", help="with --items: JSON lines "
                   "(default) or CSV")
    e.add_argument("--type", default=None, help="with --items: only items of this type (class name)")

    it = sub.add_parser("items", help="how many items the store's feed holds, per crawl and type")
    it.add_argument("--store", default=None, help="store URI (default: CRAWLER_STORE)")
    it.add_argument("--crawl-id", default=None)
    it.add_argument("--json", action="store_true")

    t = sub.add_parser("stats", help="show counters and queue depth per band")
    t.add_argument("--json", action="store_true")
    t.add_argument("--crawl-id", default=None)

    f = sub.add_parser("seeds", help="show the seed feeds Beat runs and how their ticks went")
    f.add_argument("--json", action="store_true")

    k = sub.add_parser("feed", help="consume seeds from Kafka (CRAWLER_KAFKA_SEEDS) in a consumer group "
                                    "until stopped")
    k.add_argument("source", choices=["kafka"], help="where the seeds come from")
    k.add_argument("--batch", type=int, default=500, help="messages gated and committed together (default 500)")

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

    w = sub.add_parser("crawls", help="every crawl: state, started and finished times, counters")
    w.add_argument("--json", action="store_true")
    for name, text in (("pause", "hold one crawl's fetches in Redis until resume"),
                       ("resume", "run a paused crawl again"),
                       ("cancel", "drop one crawl's queued and waiting fetches; it ends")):
        sub.add_parser(name, help=text).add_argument("crawl_id", metavar="CRAWL_ID")

    m = sub.add_parser("metrics", help="serve Prometheus metrics of every crawl, read from Redis")
    m.add_argument("--port", type=int, default=9808, help="port to listen on (default 9808)")
    m.add_argument("--address", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    m.add_argument("--top-hosts", type=int, default=10, help="hosts labelled in the host metrics (default 10)")

    o = sub.add_parser("top", help="a live view of one crawl, or of every running crawl and the cluster")
    o.add_argument("crawl_id", nargs="?", default=None, metavar="CRAWL_ID",
                   help="the crawl to show (default: every running crawl)")
    o.add_argument("--interval", type=float, default=None,
                   help="seconds between two reads (default 2 on a terminal, 5 otherwise)")
    o.add_argument("--once", action="store_true", help="print the view once and exit")
    o.add_argument("--hosts", type=int, default=10, help="busiest and waiting hosts shown (default 10)")
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
    p.add_argument("--embedded-redis", action="store_true",
                   help="run on a Redis of its own, started for this crawl and gone with it (the "
                        "default when no Redis answers on the default address and none is configured)")
    p.add_argument("--render", action="store_true",
                   help="render every page of the seeds' hosts in a browser (a render worker starts "
                        "anyway once a rule or request asks for one)")
    _plugins_option(p, "the workers import them too")
    p.add_argument("--log-file", default=None, metavar="PATH",
                   help="where the workers' log goes (default: logs/<crawl id>.log beside a SQLite "
                        "store, else under ./crawl-data)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress line")


def _plugins_option(p: argparse.ArgumentParser, more: str) -> None:
    p.add_argument("--plugins", default=None, metavar="MODULES",
                   help="comma list of plugin modules whose rules and item pipelines apply to this "
                        f"crawl (default: every module of CRAWLER_PLUGINS); {more}")


def _terminate(signum: int, frame: object) -> NoReturn:
    raise KeyboardInterrupt  # unwinds through run_crawl's cleanup: workers stop, nothing is left


def _probe_options(p: argparse.ArgumentParser) -> None:
    """The options ``parse`` and ``shell`` share."""
    p.add_argument("url", metavar="URL")
    p.add_argument("--callback", "-c", default=None, metavar="NAME",
                   help="the plugin function that parses the page (module.function); default: the rule "
                        "its URL matches")
    p.add_argument("--cb-kwargs", default=None, metavar="JSON", help="the callback's keyword arguments")
    p.add_argument("--meta", default=None, metavar="JSON", help="the request's meta")
    p.add_argument("--plugins", default=None, metavar="MODULES",
                   help="comma list of plugin modules to load besides CRAWLER_PLUGINS")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _terminate)
    try:
        return command(args.command)(args)
    except BadInput as exc:
        return _fail(exc, EXIT_BAD_INPUT)
    except (BrokerUnavailable, QueueFull, FeedSourceUnavailable) as exc:
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


#: Each command's function, as ``module:function`` of this package: imported when the command
#: runs, so that one command does not load what only others use (Kafka's client, Prometheus's, rich).
COMMANDS = {"crawl": "crawl:cmd_crawl", "demo": "crawl:cmd_demo", "submit": "submit:cmd_submit",
            "export": "export:cmd_export", "stats": "stats:cmd_stats", "seeds": "seeds:cmd_seeds",
            "feed": "feed:cmd_feed", "dead-letters": "dead_letters:cmd_dead_letters",
            "replay-dead": "dead_letters:cmd_replay_dead", "purge": "purge:cmd_purge",
            "metrics": "metrics:cmd_metrics", "crawls": "crawls:cmd_crawls", "pause": "control:cmd_control",
            "resume": "control:cmd_control", "cancel": "control:cmd_control", "top": "top:cmd_top",
            "parse": "probe:cmd_parse", "shell": "probe:cmd_shell", "items": "items:cmd_items"}


def command(name: str) -> Callable[[argparse.Namespace], int]:
    """The function of command ``name`` (its module imported now)."""
    module, _, function = COMMANDS[name].partition(":")
    return getattr(importlib.import_module(f".{module}", __package__), function)


if __name__ == "__main__":
    sys.exit(main())
