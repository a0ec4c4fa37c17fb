"""``crawler-tasks top``: a live view of one crawl, or of every running crawl and the
cluster, read from Redis every few seconds (one line at a time when not on a terminal)."""

from __future__ import annotations

import argparse
import sys
import time
from types import TracebackType

import redis
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from ..core.errors import BadInput
from ..service.snapshot import read_snapshot
from ..stages.runtime import Runtime
from ..state.connection import safe_url
from .common import state_runtime
from .top_view import Rates, plain_line, render

#: Seconds between two reads on a terminal, and otherwise.
TTY_INTERVAL, PLAIN_INTERVAL = 2.0, 5.0


def cmd_top(args: argparse.Namespace) -> int:
    if args.interval is not None and not 0 < args.interval < float("inf"):
        raise BadInput("--interval: must be more than 0 seconds")
    if args.hosts < 1:
        raise BadInput("--hosts: must be at least 1")
    rt = state_runtime()
    first = read_snapshot(rt, args.crawl_id)  # an unknown crawl ends here, before any screen
    tty = sys.stdout.isatty()
    interval = args.interval or (TTY_INTERVAL if tty else PLAIN_INTERVAL)
    try:
        if args.once:
            Console().print(render(first, Rates().update(first), hosts=args.hosts))
        elif tty:
            with LiveView(rt, args.crawl_id, Console(), hosts=args.hosts, screen=True) as view:
                while True:
                    view.refresh()
                    time.sleep(interval)
        else:
            _plain(rt, args.crawl_id, interval)
    except KeyboardInterrupt:  # Ctrl-C is how one leaves top
        pass
    return 0


def _plain(rt: Runtime, crawl_id: str | None, interval: float) -> None:
    """A line every ``interval`` seconds, until interrupted."""
    rates = Rates()
    while True:
        try:
            snapshot = read_snapshot(rt, crawl_id)
            line = plain_line(snapshot, rates.update(snapshot))
        except redis.RedisError as exc:
            line = _unavailable(rt, exc)
        print(line, flush=True)
        time.sleep(interval)


class LiveView:
    """The live screen of one crawl (or of every running crawl) on ``console``, redrawn
    by :meth:`refresh`; a context manager (the screen is given back on leaving)."""

    def __init__(self, rt: Runtime, crawl_id: str | None, console: Console, *, hosts: int = 10,
                 screen: bool = False) -> None:
        self.rt, self.crawl_id, self.hosts = rt, crawl_id, hosts
        self.rates = Rates()
        #: What the last good read showed.
        self.shown: RenderableType = ""
        self.live = Live(console=console, screen=screen, auto_refresh=False, redirect_stdout=False,
                         redirect_stderr=False)

    def __enter__(self) -> LiveView:
        self.live.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.live.stop()

    def refresh(self) -> None:
        """Read the figures and redraw; while Redis does not answer, the last figures under a
        line saying so."""
        try:
            snapshot = read_snapshot(self.rt, self.crawl_id)
        except redis.RedisError as exc:
            self.live.update(Group(Text(_unavailable(self.rt, exc), "bold red"), self.shown), refresh=True)
            return
        self.shown = render(snapshot, self.rates.update(snapshot), hosts=self.hosts, shrinking=self.rates.shrinking)
        self.live.update(self.shown, refresh=True)

    def say(self, message: str) -> None:
        """A line above the screen."""
        self.live.console.print(message, markup=False, highlight=False)


def _unavailable(rt: Runtime, exc: redis.RedisError) -> str:
    return f"Redis at {safe_url(rt.settings.redis_url)} does not answer ({type(exc).__name__}): trying again"
