"""The rows of bench/compare: which crawlers run, and how each kind is measured.

crawler_tasks runs as ``crawler-tasks crawl`` or as ``celery worker`` processes fed by
``submit()`` (the harness of bench/lib/harness.py), with the Redis counters of the run's
broker and state read when the crawl starts and ends; Scrapy, the floor and scrapy-redis
run from bench/lib/scrapy_bench in bench/.venv-scrapy.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from harness import (
    Context,
    Crawled,
    Row,
    Run,
    Runner,
    RunResult,
    crawl_with_cli,
    crawl_with_workers,
    crawler_tasks_result,
    run_row,
    run_scrapy_module,
    scrapy_problems,
    scrapy_report,
)
from measure import RedisDelta, redis_delta
from servers import BenchError, RedisServer, tail

#: The folder of bench_rule.py, the plugin of the ``-rule`` rows.
RULE_DIR = Path(__file__).resolve().parent
SCRAPY_START_KEY = "bench:start_urls"  # scrapy_bench.spiders.START_KEY
SCRAPY_REDIS_QUEUE = "bench_redis:requests"  # scrapy-redis' SCHEDULER_QUEUE_KEY for spider bench_redis

ROWS: tuple[Row, ...] = (
    Row("cli-1", "`crawler-tasks crawl --workers 1`", "cli", 1),
    Row("cli-2", "`crawler-tasks crawl --workers 2`", "cli", 2),
    Row("celery-1", "`celery worker` ×1 + `submit()`", "celery", 1),
    Row("celery-2", "`celery worker` ×2 + `submit()`", "celery", 2),
    Row("cli-1-rule", "`crawler-tasks crawl --workers 1`, a rule extracting 3 fields", "cli", 1, rule=True),
    Row("celery-2-rule", "`celery worker` ×2 + `submit()`, a rule extracting 3 fields", "celery", 2, rule=True),
    Row("scrapy-1", "Scrapy, 1 process", "scrapy", 1),
    Row("scrapy-redis-1", "scrapy-redis, 1 process", "scrapy-redis", 1),
    Row("scrapy-redis-2", "scrapy-redis, 2 processes", "scrapy-redis", 2),
    Row("floor-1", "asyncio + aiohttp floor, 1 process", "floor", 1),
)
ROWS_BY_KEY = {row.key: row for row in ROWS}


def run_compare_row(ctx: Context, row: Row, round_no: int) -> RunResult:
    """Run ``row`` once (:func:`harness.run_row` with this benchmark's runners)."""
    return run_row(ctx, row, round_no, RUNNERS)


# --------------------------------------------------------------------------- crawler_tasks


class Counting:
    """The (commands, input bytes) counters of the run's broker and state Redis as the crawl
    starts and as it ends (the harness's ``watch``), and what the crawl sent between."""

    def __init__(self, broker: RedisServer, state: RedisServer) -> None:
        self.broker, self.state = broker, state
        self.before: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0))
        self.after = self.before

    def __enter__(self) -> Counting:
        self.before = self.broker.counters(), self.state.counters()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.after = self.broker.counters(), self.state.counters()

    def deltas(self, polls: int = 0) -> list[RedisDelta]:
        """Broker first (then state, when apart), less the harness's own INFO and ``polls``."""
        if self.state is self.broker:
            return [redis_delta(self.before[0], self.after[0], own_commands=2 + polls)]
        return [redis_delta(self.before[0], self.after[0], own_commands=1),
                redis_delta(self.before[1], self.after[1], own_commands=1 + polls)]


def _result(run: Run, crawled: Crawled, counting: Counting) -> RunResult:
    deltas = counting.deltas(crawled.polls)
    return crawler_tasks_result(run, crawled, redis_commands=sum(d.commands for d in deltas),
                                broker_bytes_in=deltas[0].bytes_in)


def run_cli(ctx: Context, row: Row, run: Run) -> RunResult:
    """``crawler-tasks crawl URL --workers N``: its own summary gives pages and elapsed."""
    broker, state = run.redis_pair()
    counting = Counting(broker, state)
    return _result(run, crawl_with_cli(ctx, row, run, [ctx.site.url], broker, state, watch=counting), counting)


def run_celery(ctx: Context, row: Row, run: Run) -> RunResult:
    """N ``celery worker`` processes; the seed goes in through ``submit()`` once they answer a ping."""
    broker, state = run.redis_pair()
    counting = Counting(broker, state)
    crawled = crawl_with_workers(ctx, row, run, [ctx.site.url], broker, state, node="bench", watch=counting)
    return _result(run, crawled, counting)


# --------------------------------------------------------------------------- Scrapy


def run_scrapy(ctx: Context, row: Row, run: Run) -> RunResult:
    """Plain Scrapy in one process; elapsed from its first request to its last item."""
    return run_scrapy_module(ctx, row, run, "scrapy_bench.run", ["--mode", "plain", "--start", ctx.site.url])


def run_floor(ctx: Context, row: Row, run: Run) -> RunResult:
    """The bare asyncio crawler; elapsed from its start to its last page."""
    return run_scrapy_module(ctx, row, run, "scrapy_bench.floor", [ctx.site.url, "--concurrency", "32"])


def run_scrapy_redis(ctx: Context, row: Row, run: Run) -> RunResult:
    """N RedisSpider processes sharing one private Redis; timed from the seed push to the last item."""
    python = ctx.require_scrapy()
    server = run.redis("scrapy-redis")
    log = run.dir / "log.txt"
    procs = []
    for k in range(1, row.procs + 1):
        cmd = [python, "-m", "scrapy_bench.run", "--mode", "redis", "--redis-url", server.url,
               "--ready", run.dir / f"ready-{k}", "--out", run.dir / f"report-{k}.json"]
        procs.append(run.spawn_crawler(cmd, name=f"scrapy-redis {k}", env=ctx.scrapy_env(row), log=log))
    while not all((run.dir / f"ready-{k}").exists() for k in range(1, row.procs + 1)):
        run.check(procs)
        time.sleep(0.05)
    before = server.counters()
    t0 = time.time()
    server.client().lpush(SCRAPY_START_KEY, json.dumps({"url": ctx.site.url}))
    for child in procs:
        code = run.wait(child)
        if code != 0:
            raise BenchError(f"{child.name} exited with code {code}: {tail(log)}")
    after = server.counters()
    left_queued = server.client().zcard(SCRAPY_REDIS_QUEUE)
    reports = [scrapy_report(run.dir / f"report-{k}.json", child, log) for k, child in enumerate(procs, 1)]
    delta = redis_delta(before, after, own_commands=2)  # the first INFO and the LPUSH
    stats: dict[str, Any] = {}
    for report in reports:
        for name, value in report.get("stats", {}).items():
            if isinstance(value, (int, float)):
                stats[name] = stats.get(name, 0) + value
    return RunResult(row.key, run.round, pages=sum(int(r["items"]) for r in reports),
                     elapsed_s=max(r["last_item_at"] for r in reports) - t0,
                     redis_commands=delta.commands, broker_bytes_in=delta.bytes_in,
                     notes={**stats, "items_per_process": [r["items"] for r in reports],
                            "left_in_queue": left_queued,
                            "problems": scrapy_problems(stats, {}) + ([f"{left_queued} requests left in the queue"]
                                                                      if left_queued else [])})


RUNNERS: dict[str, Runner] = {
    "cli": run_cli, "celery": run_celery, "scrapy": run_scrapy,
    "scrapy-redis": run_scrapy_redis, "floor": run_floor,
}
