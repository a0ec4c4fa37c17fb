"""The rows of bench/broad: how each crawler is run on the many-host site, politely.

Built on bench/lib/harness.py, as bench/compare: one :class:`~harness.Run` per run (its
directory, processes, CPU at reaping, the process-tree sampler, the deadline), the CLI,
the ``celery worker`` processes fed by ``submit()`` and the Scrapy process. What differs
from bench/compare: many seeds, ``CRAWLER_DOWNLOAD_DELAY`` = the delay and
``CRAWLER_HOST_CONCURRENCY=1``, and ONE private redis-server as broker and state,
watched by :class:`RedisWatch` while the crawl runs.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis
from harness import (
    Context,
    Crawled,
    Row,
    Run,
    RunResult,
    crawl_with_cli,
    crawl_with_workers,
    crawler_tasks_result,
    run_row,
    run_scrapy_module,
    text,
)
from measure import slope
from servers import RedisServer

SCRAPY_CONCURRENCY = 256

@dataclass(frozen=True)
class BroadRow(Row):
    """A row of bench/broad; ``polite=False``: no delay and no host cap (what politeness costs)."""

    polite: bool = True


ROWS: tuple[BroadRow, ...] = (
    BroadRow("cli-1", "`crawler-tasks crawl --workers 1`", "cli", 1),
    BroadRow("cli-2", "`crawler-tasks crawl --workers 2`", "cli", 2),
    BroadRow("celery-2", "`celery worker` ×2 + `submit()`", "celery", 2),
    BroadRow("scrapy-1", "Scrapy, 1 process", "scrapy", 1),
    BroadRow("cli-1-free", "`crawler-tasks crawl --workers 1`, no delay, no host cap", "cli", 1, polite=False),
    BroadRow("cli-2-free", "`crawler-tasks crawl --workers 2`, no delay, no host cap", "cli", 2, polite=False),
)
ROWS_BY_KEY = {row.key: row for row in ROWS}
#: The rows run without ``--only``.
DEFAULT_ROWS = ("cli-1", "cli-2", "celery-2", "scrapy-1")


@dataclass
class BroadContext(Context):
    """bench/compare's context plus the seeds and the politeness of this benchmark."""

    seeds: tuple[str, ...] = ()
    delay: float = 1.0
    #: bench/broad --realweb: every crawler with its defaults (robots.txt obeyed).
    realweb: bool = False

    def crawler_env(self, broker: RedisServer, state: RedisServer, store: Path,
                    row: Row | None = None) -> dict[str, str]:
        """bench/compare's environment, polite: the delay, one request per host at a time
        (bench/compare's own, no delay and no host cap, for a row that is not polite)."""
        env = super().crawler_env(broker, state, store, row)
        if self.realweb:  # the defaults: robots.txt obeyed, the default host concurrency
            env.update(CRAWLER_DOWNLOAD_DELAY=f"{self.delay:g}", CRAWLER_ROBOTSTXT_OBEY="1")
            env.pop("CRAWLER_HOST_CONCURRENCY", None)
        elif not isinstance(row, BroadRow) or row.polite:
            env.update(CRAWLER_DOWNLOAD_DELAY=f"{self.delay:g}", CRAWLER_HOST_CONCURRENCY="1")
        return env


# --------------------------------------------------------------------------- Redis while it crawls


@dataclass
class RedisFigures:
    """Redis memory over one crawl: peaks, and what one fetch waiting for its host costs."""

    used_memory_peak: int = 0  # INFO used_memory_peak at the end
    peak_waiting: int = 0  # most fetches waiting for their host at one sample
    rooms_bytes: int = 0  # MEMORY USAGE of the waiting rooms at that sample
    bytes_per_waiting: float | None = None  # slope of used_memory against waiting, after that peak
    cpu_s: float = 0.0  # Redis's own CPU (used_cpu_user + used_cpu_sys) while watched
    host_counters: dict[str, int] = field(default_factory=dict)  # summed over the hosts' hashes
    #: (monotonic, used_memory, waiting for their host, fetch messages queued in the broker)
    samples: list[tuple[float, int, int, int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Everything but the samples, and the waiting and queued counts every 5 s."""
        data = asdict(self)
        data["samples"] = len(self.samples)
        if self.samples:
            t0, step = self.samples[0][0], 5.0
            data["every_5s"] = [(round(t - t0), w, q) for n, (t, _, w, q) in enumerate(self.samples)
                                if n == 0 or int((t - t0) // step) > int((self.samples[n - 1][0] - t0) // step)]
        return data


class RedisWatch:
    """Samples ``used_memory`` and the fetches waiting for their host (the waiting rooms of the
    host limiter, :mod:`crawler_tasks.state.hosts`) every ``interval`` seconds, on its own thread
    and connection."""

    def __init__(self, server: RedisServer, prefix: str, interval: float = 0.5) -> None:
        from crawler_tasks.state.keys import Keys

        self.keys, self.interval = Keys(prefix), interval
        self.client = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=10)
        self.figures = RedisFigures()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="redis-watch", daemon=True)
        self._cpu_before = 0.0

    def start(self) -> RedisWatch:
        """Start sampling (Redis's CPU is counted from here)."""
        self._cpu_before = self.cpu()
        self._thread.start()
        return self

    def __enter__(self) -> RedisWatch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def cpu(self) -> float:
        """Redis's CPU seconds so far."""
        info = self.client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def host_counters(self) -> dict[str, int]:
        """The counters of every host's hash (``requests``, ``deferred``: fetches parked...), summed."""
        totals: dict[str, int] = {}
        for key in self.client.scan_iter(match=self.keys.host("*"), count=1000):
            for name, value in self.client.hgetall(key).items():
                with contextlib.suppress(ValueError):
                    totals[text(name)] = totals.get(text(name), 0) + int(value)
        return {k: totals[k] for k in ("requests", "deferred", "throttled", "blocked") if k in totals}

    def stop(self) -> RedisFigures:
        """Stop sampling; the figures (read before the Redis goes away)."""
        self._stop.set()
        self._thread.join()
        fig = self.figures
        with contextlib.suppress(redis.RedisError):
            fig.used_memory_peak = int(self.client.info("memory")["used_memory_peak"])
            fig.cpu_s = self.cpu() - self._cpu_before
            fig.host_counters = self.host_counters()
        if fig.samples:
            peak = max(range(len(fig.samples)), key=lambda i: fig.samples[i][2])
            fig.bytes_per_waiting = slope([(w, m) for _, m, w, _ in fig.samples[peak:]], min_points=5, min_span=50)
        self.client.close()
        return fig

    def rooms(self) -> list[str]:
        """The waiting rooms of the due hosts, and the movers' set."""
        hosts: list[bytes] = self.client.zrange(self.keys.hosts_due(0), 0, -1)  # type: ignore[assignment]
        return [*(self.keys.host_wait(h.decode()) for h in hosts), self.keys.hosts_moving(0)]

    def waiting(self, rooms: list[str]) -> int:
        """Fetches waiting for their host, over every host (as ``HostLimiter.waiting``)."""
        with self.client.pipeline(transaction=False) as pipe:
            for key in rooms:
                pipe.zcard(key)
            return sum(pipe.execute())

    def queued(self) -> int:
        """Fetch messages in the broker's fetch queue, every band."""
        from crawler_tasks.broker.lists import redis_list
        from crawler_tasks.core.routing import FETCH_QUEUE, MAX_BAND, MIN_BAND

        with self.client.pipeline(transaction=False) as pipe:
            for band in range(MIN_BAND, MAX_BAND + 1):
                pipe.llen(redis_list(FETCH_QUEUE, band))
            return sum(pipe.execute())

    def rooms_bytes(self, rooms: list[str]) -> int:
        """``MEMORY USAGE … SAMPLES 0`` of the waiting rooms, summed."""
        with self.client.pipeline(transaction=False) as pipe:
            for key in rooms:
                pipe.memory_usage(key, samples=0)
            return sum(n or 0 for n in pipe.execute())

    def sample(self) -> None:
        """One sample; at a new peak of waiting fetches, the size of their waiting rooms too."""
        used = int(self.client.info("memory")["used_memory"])
        rooms = self.rooms()
        waiting = self.waiting(rooms)
        self.figures.samples.append((time.monotonic(), used, waiting, self.queued()))
        if waiting > self.figures.peak_waiting:
            self.figures.peak_waiting, self.figures.rooms_bytes = waiting, self.rooms_bytes(rooms)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(redis.RedisError):
                self.sample()
            self._stop.wait(self.interval)


# --------------------------------------------------------------------------- one run


def run_broad_row(ctx: BroadContext, row: Row, round_no: int) -> RunResult:
    """Run ``row`` once (:func:`harness.run_row` with this benchmark's runners)."""
    return run_row(ctx, row, round_no, RUNNERS)


def _result(run: Run, crawled: Crawled, watch: RedisWatch) -> RunResult:
    return crawler_tasks_result(run, crawled, notes={"redis": watch.figures.to_dict()})


def run_cli(ctx: BroadContext, row: Row, run: Run) -> RunResult:
    """``crawler-tasks crawl SEEDS --workers N``: its own summary gives pages and elapsed."""
    server = run.redis("crawl")
    watch = RedisWatch(server, ctx.key_prefix)
    return _result(run, crawl_with_cli(ctx, row, run, ctx.seeds, server, server, watch=watch), watch)


def run_celery(ctx: BroadContext, row: Row, run: Run) -> RunResult:
    """N ``celery worker`` processes; the seeds go in through one ``submit()`` once they answer."""
    server = run.redis("crawl")
    watch = RedisWatch(server, ctx.key_prefix)
    return _result(run, crawl_with_workers(ctx, row, run, ctx.seeds, server, server, node="broad", watch=watch),
                   watch)


def run_scrapy(ctx: BroadContext, row: Row, run: Run) -> RunResult:
    """Scrapy in one process (bench/lib/scrapy_bench/broad.py); elapsed from its first request to its last item."""
    seeds = run.dir / "seeds.txt"
    seeds.write_text("\n".join(ctx.seeds) + "\n")
    return run_scrapy_module(ctx, row, run, "scrapy_bench.broad",
                             ["--seeds", seeds, "--delay", f"{ctx.delay:g}", "--concurrency", str(SCRAPY_CONCURRENCY),
                              *(["--robots"] if ctx.realweb else [])])


RUNNERS: dict[str, Callable[[BroadContext, Row, Run], RunResult]] = {
    "cli": run_cli, "celery": run_celery, "scrapy": run_scrapy,
}
