"""The view of ``crawler-tasks top`` (and of ``crawl`` on a terminal): a
:class:`~crawler_tasks.service.snapshot.Snapshot` made into a rich renderable, or into one
plain line. Pure: no Redis, no terminal; the pages-per-second rates come from
:class:`Rates`, fed the successive snapshots."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from ..core import counters, figures, routing
from ..core.figures import duration
from ..service.snapshot import CrawlFigures, Snapshot
from ..state.host_views import HostState
from .progress import Rate

#: Seconds of history behind a pages-per-second rate.
RATE_WINDOW = 5.0
#: Consoles at least this wide show four panels side by side; narrower ones, two.
WIDE = 100
#: Consoles at least this wide show every status class in the table of crawls.
WIDE_TABLE = 112
#: Style of each status class, and of failures.
STYLES = {"2xx": "green", "3xx": "cyan", "4xx": "yellow", "5xx": "red", "failed": "bold red"}


class Rates:
    """Pages stored per second of each crawl over the last ``window`` seconds, from the
    snapshots given to :meth:`update` in turn (a :class:`~.progress.Rate` per figure)."""

    def __init__(self, window: float = RATE_WINDOW) -> None:
        self.window = window
        self._rates: dict[str, tuple[Rate, Rate]] = {}
        #: Outstanding tasks each crawl sheds per second over the same window (negative: its
        #: frontier grows; None until a second snapshot shows it).
        self.shrinking: dict[str, float | None] = {}

    def update(self, snapshot: Snapshot) -> dict[str, float | None]:
        """Each crawl's rate as of ``snapshot`` (None until a second snapshot shows it)."""
        rates: dict[str, float | None] = {}
        self.shrinking = {}
        for crawl in snapshot.crawls:
            stored, left = self._rates.setdefault(crawl.crawl_id, (Rate(self.window), Rate(self.window)))
            rates[crawl.crawl_id] = stored.per_s(snapshot.at, crawl.stored)
            grown = left.per_s(snapshot.at, crawl.outstanding)
            self.shrinking[crawl.crawl_id] = None if grown is None else -grown
        for gone in self._rates.keys() - rates.keys():
            del self._rates[gone]
        return rates


def time_left(crawl: CrawlFigures, rate: float | None, shrinking: float | None = None) -> float | None:
    """:func:`~crawler_tasks.core.figures.time_left` of ``crawl``."""
    return figures.time_left(crawl.stored, crawl.max_pages, crawl.outstanding, rate, shrinking)


def render(snapshot: Snapshot, rates: Mapping[str, float | None], *, hosts: int = 10,
           shrinking: Mapping[str, float | None] | None = None) -> RenderableType:
    """The screen: the one crawl of ``snapshot``, or every running crawl with the cluster's
    totals; then its responses, and the backlog, store queue, errors and the top ``hosts``
    busiest and waiting hosts, each only when it has something to show. ``shrinking``:
    :attr:`Rates.shrinking`, for the time left of a crawl with no budget."""
    shrinking = shrinking or {}
    top, mix, errors = _one_crawl(snapshot, rates, shrinking) if snapshot.crawl_id is not None else \
        _every_crawl(snapshot, rates, shrinking)
    middle = [(panel, size) for panel, size in ((mix, 18), (_backlog(snapshot), None), (_store_queue(snapshot), 17),
                                                (errors, None)) if panel is not None]
    bottom = [(panel, None) for panel in (_busiest(snapshot, hosts), _waiting(snapshot.hosts, hosts))
              if panel is not None]
    return Group(*top, _ByWidth(lambda width: _row(width, *middle)),
                 *([_ByWidth(lambda width: _row(width, *bottom))] if bottom else []))


def _one_crawl(snapshot: Snapshot, rates: Mapping[str, float | None],
               shrinking: Mapping[str, float | None]) -> tuple[list[RenderableType], Panel, Panel]:
    """The crawl's header and budget, its status mix and errors."""
    crawl = snapshot.crawls[0]
    rate = rates.get(crawl.crawl_id)
    top: list[RenderableType] = [_crawl_header(crawl, rate, snapshot.wall, time_left(crawl, rate,
                                                                                     shrinking.get(crawl.crawl_id))),
                                 *([_budget(crawl, rate)] if crawl.max_pages else [])]
    dead = [("dead letters", crawl.counters.get(counters.STORE_DEAD_LETTERS, 0)),
            ("dead letters, all crawls", snapshot.dead_letters)]
    return top, _status_mix(crawl.counters), _errors(crawl.counters, dead, crawl.last_error)


def _every_crawl(snapshot: Snapshot, rates: Mapping[str, float | None],
                 shrinking: Mapping[str, float | None]) -> tuple[list[RenderableType], Panel, Panel]:
    """The cluster's header, a row per crawl, their status mix and errors summed."""
    crawls = snapshot.crawls
    top: list[RenderableType] = [_cluster_header(snapshot, rates),
                                 _ByWidth(lambda width: _crawl_table(crawls, rates, width, shrinking))]
    total = _sum(c.counters for c in crawls)
    return top, _status_mix(total), _errors(total, [("dead letters waiting", snapshot.dead_letters)], None)


def plain_line(snapshot: Snapshot, rates: Mapping[str, float | None]) -> str:
    """The figures in one line, for a log or a pipe (the time of day first)."""
    stamp = f"{_clock(snapshot.wall)} " if snapshot.wall else ""
    fetch = snapshot.queues.get(routing.FETCH_QUEUE, {}).get("total", 0)
    render = snapshot.queues.get(routing.RENDER_QUEUE, {}).get("total", 0)
    tail = (f"waiting {sum(snapshot.waiting.values()):,} · queued {fetch:,}"
            f"{f' (+{render:,} to render)' if render else ''}"
            f" · store queue {snapshot.store_queue.pending:,}"
            f" · dead letters {snapshot.dead_letters:,}")
    if snapshot.crawl_id is None:
        total = _sum(c.counters for c in snapshot.crawls)
        return (f"{stamp}{len(snapshot.crawls)} crawl(s) running · stored {total.get(counters.STORED, 0):,}"
                f" · {_rate(_total_rate(snapshot, rates))} pages/s · {_mix_text(total)}"
                f" · outstanding {sum(c.outstanding for c in snapshot.crawls):,} · {tail}")
    crawl = snapshot.crawls[0]
    rate = rates.get(crawl.crawl_id)
    budget = f" · {_budget_text(crawl, rate)}" if crawl.max_pages else ""
    return (f"{stamp}crawl {crawl.crawl_id} {crawl.state} · stored {crawl.stored:,} · {_rate(rate)} pages/s"
            f" · {_mix_text(crawl.counters)} · outstanding {crawl.outstanding:,}{budget} · {tail}")


# -- the parts -----------------------------------------------------------------------------

def _crawl_header(crawl: CrawlFigures, rate: float | None, wall: float, left: float | None) -> Text:
    text = Text.assemble(("crawl ", "bold"), (crawl.crawl_id, "bold cyan"), "  ", (crawl.state, _state_style(crawl)))
    text.append(f" · stored {crawl.stored:,} · {_rate(rate)} pages/s · outstanding {crawl.outstanding:,}")
    if not crawl.max_pages and left is not None and crawl.state == "running":
        text.append(f" · about {duration(left)} left (frontier)")
    if crawl.started:
        text.append(f" · started {crawl.started[:19].replace('T', ' ')}", "dim")
    if wall:
        text.append(f" · {_clock(wall)}", "dim")
    return text


def _cluster_header(snapshot: Snapshot, rates: Mapping[str, float | None]) -> Text:
    stored = sum(c.stored for c in snapshot.crawls)
    left = sum(c.outstanding for c in snapshot.crawls)
    text = Text.assemble((f"{len(snapshot.crawls)} crawl(s) running", "bold"),
                         f" · stored {stored:,} · {_rate(_total_rate(snapshot, rates))} pages/s"
                         f" · outstanding {left:,}")
    if snapshot.wall:
        text.append(f" · {_clock(snapshot.wall)}", "dim")
    return text


def _budget(crawl: CrawlFigures, rate: float | None) -> Table:
    grid = Table.grid(padding=(0, 2), expand=True)
    grid.add_column(ratio=1, min_width=10)
    grid.add_column(no_wrap=True)
    grid.add_row(ProgressBar(total=crawl.max_pages, completed=min(crawl.stored, crawl.max_pages)),
                 _budget_text(crawl, rate))
    return grid


def _budget_text(crawl: CrawlFigures, rate: float | None) -> str:
    share = min(crawl.stored, crawl.max_pages) / crawl.max_pages
    left = time_left(crawl, rate)
    if crawl.state not in ("running", "paused"):
        when = crawl.state
    elif left is None:
        when = "time left unknown"
    else:
        when = f"about {duration(left)} left"
    return f"{crawl.stored:,} of {crawl.max_pages:,} pages ({share:.0%}) · {when}"


def _crawl_table(crawls: Iterable[CrawlFigures], rates: Mapping[str, float | None], width: int,
                 shrinking: Mapping[str, float | None]) -> Table:
    """A row per crawl; on a console narrower than :data:`WIDE_TABLE` without 3xx, 4xx, 5xx
    and the budget's bar."""
    wide = width >= WIDE_TABLE
    classes = ("2xx", "3xx", "4xx", "5xx") if wide else ("2xx",)
    table = Table(expand=True, box=None, header_style="bold", pad_edge=False)
    table.add_column("crawl", no_wrap=True, overflow="ellipsis", ratio=1, min_width=12)
    table.add_column("state", no_wrap=True)
    for name in ("stored", "pages/s", *classes, "failed", "outstanding"):
        table.add_column(name, justify="right", no_wrap=True, style=STYLES.get(name))
    table.add_column("budget", no_wrap=True)
    for c in crawls:
        mix = figures.status_classes(c.counters)
        rate = rates.get(c.crawl_id)
        frontier = time_left(c, rate, shrinking.get(c.crawl_id))
        budget: RenderableType = "-" if frontier is None else f"~{duration(frontier)}"
        if c.max_pages:
            left = time_left(c, rate)
            budget = Table.grid(padding=(0, 1))
            budget.add_row(*([ProgressBar(total=c.max_pages, completed=min(c.stored, c.max_pages), width=12)]
                             if wide else []),
                           f"{min(c.stored / c.max_pages, 1):.0%}", "" if left is None else duration(left))
        table.add_row(c.crawl_id, Text(c.state, _state_style(c)), f"{c.stored:,}", _rate(rate),
                      *(f"{mix.get(k, 0):,}" for k in classes),
                      f"{c.counters.get(counters.FAILURES, 0):,}", f"{c.outstanding:,}", budget)
    if not table.rows:
        table.add_row(Text("no crawl running", "dim"))
    return table


def _status_mix(stats: Mapping[str, int]) -> Panel:
    mix = {**{k: 0 for k in ("2xx", "3xx", "4xx", "5xx")}, **figures.status_classes(stats),
           "failed": stats.get(counters.FAILURES, 0)}
    return _panel("responses", [(Text(k, STYLES.get(k, "")), f"{n:,}") for k, n in mix.items()])


def _errors(stats: Mapping[str, int], dead_letters: Sequence[tuple[str, int]],
            last_error: str | None) -> Panel | None:
    """Failures by reason, store and task errors, dead letters and the last error: the lines
    that are not 0, and no panel when all are."""
    counts = [*((f"failed: {reason}", n) for reason, n in figures.failure_reasons(stats).items()),
              ("store errors", figures.store_errors(stats)), *dead_letters,
              ("task errors", stats.get(counters.ERRORS, 0))]
    rows: list[tuple[RenderableType, str]] = [(name, f"{n:,}") for name, n in counts if n]
    if not rows and not last_error:
        return None
    body: RenderableType = _grid(rows)
    if last_error:
        body = Group(body, Text(f"last: {last_error}", "red", overflow="ellipsis", no_wrap=True))
    return Panel(body, title="errors", title_align="left")


def _backlog(snapshot: Snapshot) -> Panel | None:
    """What waits: for its hosts (the hosts' waiting rooms), held while paused, and in the
    broker's queues by band (9 first); only the lines with something in them, and no panel
    when nothing waits."""
    rows: list[tuple[RenderableType, ...]] = []
    waiting, held = sum(snapshot.waiting.values()), sum(snapshot.held.values())
    if waiting:
        rows.append(("waiting for hosts", f"{waiting:,}", ""))
    if held:
        rows.append(("held (paused)", f"{held:,}", ""))
    for queue, bands in snapshot.queues.items():
        if not bands.get("total", 0):
            continue
        busy = "  ".join(f"{band.removeprefix('band ')}:{n:,}" for band, n in bands.items() if band != "total" and n)
        rows.append((queue, f"{bands['total']:,}", busy))
    return _panel("backlog", rows) if rows else None


def _store_queue(snapshot: Snapshot) -> Panel | None:
    """The store queue's entries and writers; no panel when it is empty and idle."""
    depth = snapshot.store_queue
    rows = [("pending", depth.pending), ("delayed", depth.delayed), ("taken", depth.taken),
            ("writers", depth.writers)]
    return _panel("store queue", [(k, f"{n:,}") for k, n in rows]) if any(n for _, n in rows) else None


def _busiest(snapshot: Snapshot, n: int) -> Panel | None:
    """The hosts with the most requests in flight (every crawl's: a host's slots are shared),
    and the requests sent to each: by the crawl shown, or by every crawl; no panel before
    any request."""
    own = snapshot.crawl_requests
    sent = {h.host: (own.get(h.host, 0) if own is not None else h.requests) for h in snapshot.hosts}
    busy = sorted((h for h in snapshot.hosts if h.in_flight or sent[h.host]),
                  key=lambda h: (h.in_flight, sent[h.host]), reverse=True)[:n]
    if not busy:
        return None
    table = _host_table("in flight", "requests", "delay")
    for h in busy:
        table.add_row(h.host, f"{h.in_flight:,}", f"{sent[h.host]:,}", f"{h.delay:g} s")
    whose = "this crawl's" if own is not None else "every crawl's"
    return Panel(table, title=f"busiest hosts ({whose} requests)", title_align="left")


def _waiting(hosts: Iterable[HostState], n: int) -> Panel | None:
    """The hosts with the most fetches in their waiting rooms; no panel when none waits."""
    waiting = [h for h in hosts if h.waiting]  # already most waiting first
    if not waiting:
        return None
    table = _host_table("waiting", "delay", "back-off")
    for h in waiting[:n]:
        table.add_row(h.host, f"{h.waiting:,}", f"{h.delay:g} s", f"{h.backoff:g} s" if h.backoff else "")
    title = f"waiting hosts ({sum(h.waiting for h in waiting):,} fetches)"
    return Panel(table, title=title, title_align="left")


# -- helpers -------------------------------------------------------------------------------

def _panel(title: str, rows: Iterable[tuple[RenderableType, ...]]) -> Panel:
    return Panel(_grid(rows), title=title, title_align="left")


def _grid(rows: Iterable[tuple[RenderableType, ...]]) -> Table:
    """Names, then right-aligned figures, then any detail."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, overflow="ellipsis")
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column(no_wrap=True, overflow="ellipsis")
    for row in rows:
        grid.add_row(*row)
    return grid


def _host_table(*columns: str) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False, expand=True)
    table.add_column("host", no_wrap=True, overflow="ellipsis", ratio=1)
    for name in columns:
        table.add_column(name, justify="right", no_wrap=True)
    return table


class _ByWidth:
    """A renderable built for the width the console gives it."""

    def __init__(self, build: Callable[[int], RenderableType]) -> None:
        self.build = build

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.build(options.max_width)


def _row(width: int, *panels: tuple[RenderableType, int | None]) -> Group:
    """Panels side by side, each ``(panel, width)`` (None: a share of what is left); in two
    rows when ``width`` is under :data:`WIDE`."""
    half = (len(panels) + 1) // 2
    rows = [panels] if width >= WIDE or len(panels) < 3 and width >= WIDE_TABLE // 2 else \
        [row for row in (panels[:half], panels[half:]) if row]
    grids = []
    for row in rows:
        grid = Table.grid(expand=True)
        for _, size in row:
            grid.add_column(width=size, ratio=None if size else 1)
        grid.add_row(*(panel for panel, _ in row))
        grids.append(grid)
    return Group(*grids)


def _sum(many: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for stats in many:
        for name, n in stats.items():
            total[name] = total.get(name, 0) + n
    return total


def _total_rate(snapshot: Snapshot, rates: Mapping[str, float | None]) -> float | None:
    known = [r for c in snapshot.crawls if (r := rates.get(c.crawl_id)) is not None]
    return sum(known) if known else None


def _mix_text(stats: Mapping[str, int]) -> str:
    mix = figures.status_classes(stats)
    classes = " ".join(f"{k} {mix.get(k, 0):,}" for k in ("2xx", "3xx", "4xx", "5xx"))
    return f"{classes} · failed {stats.get(counters.FAILURES, 0):,}"


def _state_style(crawl: CrawlFigures) -> str:
    return {"running": "green", "paused": "yellow", "cancelling": "red", "cancelled": "red"}.get(crawl.state, "dim")


def _clock(wall: float) -> str:
    """``10:05:03``, local time."""
    return time.strftime("%H:%M:%S", time.localtime(wall))


def _rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1f}"
