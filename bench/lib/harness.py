"""The harness of the crawl benchmarks (bench/compare, bench/broad): one run of one row.

One call of :func:`run_row` is one run of one row. Each run gets a fresh
temporary directory and fresh private Redis servers, its crawler's whole
process tree is timed and sampled (:class:`Run`), and everything it started is
stopped when it returns, whether it succeeded, failed or timed out. A failure
becomes a :class:`RunResult` with a one-line ``error``.

A benchmark gives each kind of row a runner; the runners here do the work every
benchmark shares: ``crawler-tasks crawl`` (:func:`crawl_with_cli`), ``celery
worker`` processes fed by ``submit()`` (:func:`crawl_with_workers`) and a
Scrapy module in ``bench/.venv-scrapy`` (:func:`run_scrapy_module`). A benchmark
watches its Redis around the crawl with any context manager (``watch``): entered
just before the crawl starts, left as soon as it is done.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis
from entry import BENCH_DIR, LIB_DIR
from measure import ReapedCpu, TreeSampler, TreeUsage
from servers import BenchError, Child, Children, RedisServer, SiteServer, kill_leftovers, log, one_line, read_line, tail

SCRAPY_VENV = BENCH_DIR / ".venv-scrapy"
SCRAPY_PACKAGES = ("scrapy", "scrapy-redis>=0.9,<0.10", "aiohttp")
WORKER_STOP_TIMEOUT = 60.0


@dataclass(frozen=True)
class Row:
    """One line of a table."""

    key: str
    label: str
    kind: str  # cli | celery | scrapy | scrapy-redis | floor
    procs: int
    #: With the parse rule of ``Context.rule_dir``'s bench_rule.py (three fields per page).
    rule: bool = False
    #: More environment for the crawler (a variant row: another pool, another checkout on
    #: PYTHONPATH), applied last.
    env: tuple[tuple[str, str], ...] = ()

    @property
    def is_crawler_tasks(self) -> bool:
        return self.kind in ("cli", "celery")


@dataclass
class RunResult:
    """The raw numbers of one run of one row."""

    row: str
    round: int
    error: str = ""
    pages: int = 0
    elapsed_s: float = 0.0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    cpu_reaped_s: float = 0.0
    cpu_sampled_s: float = 0.0
    peak_rss_mb: float = 0.0
    redis_commands: int | None = None
    broker_bytes_in: int | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.cpu_s / self.pages if self.pages else 0.0

    @property
    def redis_commands_per_page(self) -> float | None:
        return None if self.redis_commands is None or not self.pages else self.redis_commands / self.pages

    @property
    def broker_bytes_per_page(self) -> float | None:
        return None if self.broker_bytes_in is None or not self.pages else self.broker_bytes_in / self.pages

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(pages_per_s=self.pages_per_s, cpu_ms_per_page=self.cpu_ms_per_page,
                    redis_commands_per_page=self.redis_commands_per_page,
                    broker_bytes_per_page=self.broker_bytes_per_page)
        return data


@dataclass
class Context:
    """What every run needs: the site, the timeout, the programs to run."""

    site: SiteServer
    expected_pages: int
    timeout: float
    workdir: Path
    project_bin: Path
    key_prefix: str
    scrapy_python: Path | None = None
    scrapy_error: str = ""
    #: A private Redis each for broker and state (what splits broker bytes from state
    #: bytes); by default one serves both, as the quick start and the docker cluster run.
    split_redis: bool = False
    #: The folder of bench_rule.py, the plugin of rows with ``rule``.
    rule_dir: Path | None = None

    def program(self, name: str) -> str:
        candidate = self.project_bin / name
        found = str(candidate) if candidate.exists() else shutil.which(name)
        if not found:
            raise BenchError(f"no `{name}` next to {sys.executable} or on PATH")
        return found

    def crawler_env(self, broker: RedisServer, state: RedisServer, store: Path,
                    row: Row | None = None) -> dict[str, str]:
        rule = {"CRAWLER_PLUGINS": "bench_rule"} if row and row.rule else {}
        # Bytecode cached, as on a user's machine (PYTHONDONTWRITEBYTECODE would have every
        # process compile the package again).
        env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, **rule,
               "CRAWLER_BROKER_URL": broker.url, "CRAWLER_REDIS_URL": state.url,
               "CRAWLER_STORE": str(store), "CRAWLER_WORKER_CONCURRENCY": os.environ.get("BENCH_CONCURRENCY", "32"),
               "CRAWLER_ROBOTSTXT_OBEY": "0", "PYTHONUNBUFFERED": "1",
               # As the Scrapy rows: no delay, as many requests per host as slots.
               "CRAWLER_DOWNLOAD_DELAY": "0", "CRAWLER_HOST_CONCURRENCY": "0",
               "CRAWLER_PRIVATE_ALLOWLIST": "127.0.0.0/8",  # the site is on loopback
               **dict(row.env if row else ())}
        if env["CRAWLER_WORKER_CONCURRENCY"] == "default":  # BENCH_CONCURRENCY=default: the crawler's own
            env.pop("CRAWLER_WORKER_CONCURRENCY")
        if row and row.rule:  # bench_rule.py, after a row's own checkout
            if self.rule_dir is None:
                raise BenchError(f"row {row.key} has a rule and this benchmark no bench_rule.py")
            env["PYTHONPATH"] = os.pathsep.join(p for p in (dict(row.env).get("PYTHONPATH"), str(self.rule_dir)) if p)
        return env

    def scrapy_env(self, row: Row | None = None) -> dict[str, str]:
        """The environment of a Scrapy process: bench/lib first on its path (scrapy_bench),
        and a variant row's variables (``BENCH_SCRAPY_PER_DOMAIN``)."""
        path = os.environ.get("PYTHONPATH")
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
        env.update(dict(row.env if row else ()))
        env["PYTHONPATH"] = str(LIB_DIR) + (os.pathsep + path if path else "")
        return env

    def require_scrapy(self) -> Path:
        if self.scrapy_python is None:
            raise BenchError(self.scrapy_error or "bench/.venv-scrapy is not set up")
        return self.scrapy_python


class Run:
    """One run of one row: its directory, processes, CPU and memory accounting, deadline."""

    def __init__(self, ctx: Context, row: Row, round_no: int) -> None:
        self.ctx, self.row, self.round = ctx, row, round_no
        self.dir = Path(tempfile.mkdtemp(prefix=f"{row.key}-r{round_no}-", dir=ctx.workdir))
        self.group = Children()
        self.cpu = ReapedCpu()
        self.sampler = TreeSampler().start()
        self.started = time.monotonic()
        self.deadline = self.started + ctx.timeout
        self.crawl_id = f"bench-{row.key}-r{round_no}-{uuid.uuid4().hex[:8]}"
        self.logs: dict[int, Path] = {}

    def redis(self, name: str) -> RedisServer:
        return RedisServer(self.group, self.dir, name).start()

    def redis_pair(self) -> tuple[RedisServer, RedisServer]:
        """The crawler's broker and state Redis: one server unless the context splits them."""
        broker = self.redis("broker" if self.ctx.split_redis else "redis")
        return broker, (self.redis("state") if self.ctx.split_redis else broker)

    def spawn_crawler(self, cmd: list[Any], *, name: str, env: dict[str, str], log: Path,
                      stdout: Path | None = None, stop_signal: int = signal.SIGTERM) -> Child:
        """A crawler process: its CPU is counted when reaped, its tree is sampled. It runs in
        the run's directory: ``python -m celery`` puts its working directory first on
        ``sys.path``, so a checkout there would be imported before the one the row names."""
        with open(log, "ab") as err, open(stdout or log, "ab") as out:
            child = self.group.spawn(cmd, name=name, env=env, cwd=self.dir, stdout=out, stderr=err,
                                     cpu=self.cpu, stop_signal=stop_signal)
        self.sampler.watch(child.pid)
        self.logs[child.pid] = log
        return child

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def check(self, crawlers: list[Child]) -> None:
        """:class:`BenchError` when time is up, a crawler exited or the site server died."""
        if self.left() <= 0:
            raise BenchError(f"timed out after {self.ctx.timeout:.0f}s")
        if not self.ctx.site.alive():
            raise BenchError("the site server died")
        for child in crawlers:
            code = child.poll()
            if code is not None:
                last = tail(self.logs[child.pid]) if child.pid in self.logs else ""
                raise BenchError(f"{child.name} exited early with code {code}" + (f": {last}" if last else ""))

    def wait(self, child: Child) -> int:
        """Exit code of ``child``, polling until the deadline."""
        while True:
            code = child.poll()
            if code is not None:
                return code
            self.check([])
            time.sleep(0.1)

    def close(self) -> TreeUsage:
        """Stop whatever still runs (crawlers first, Redis last); the sampled usage."""
        self.group.close()
        usage = self.sampler.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        return usage


#: How a row of one kind runs: (context, row, run) -> its result.
Runner = Callable[[Any, Row, Run], RunResult]


def run_row(ctx: Any, row: Row, round_no: int, runners: Mapping[str, Runner]) -> RunResult:
    """Run ``row`` once with the runner of its kind; never raises for a crawler failure
    (KeyboardInterrupt passes). CPU: the larger of the reaped and the sampled figure."""
    run = Run(ctx, row, round_no)
    try:
        result = _attempt(row, run, lambda: runners[row.kind](ctx, row, run))
    finally:
        usage = run.close()
    result.wall_s = time.monotonic() - run.started
    result.cpu_reaped_s = run.cpu.seconds
    result.cpu_sampled_s = usage.cpu_seconds
    result.cpu_s = max(result.cpu_reaped_s, result.cpu_sampled_s)
    result.peak_rss_mb = usage.peak_rss_bytes / 2**20
    return result


def _attempt(row: Row, run: Run, runner: Callable[[], RunResult]) -> RunResult:
    try:
        return runner()
    except BenchError as exc:
        return RunResult(row.key, run.round, error=one_line(str(exc)))
    except (OSError, ValueError, KeyError, redis.RedisError, subprocess.SubprocessError) as exc:
        return RunResult(row.key, run.round, error=one_line(f"{type(exc).__name__}: {exc}"))


# --------------------------------------------------------------------------- crawler_tasks


class CrawlKeys:
    """The crawl's outstanding and stats keys in the state Redis, read whatever their type."""

    def __init__(self, prefix: str, crawl_id: str) -> None:
        try:
            from crawler_tasks.state.keys import Keys

            keys = Keys(prefix)
            self.outstanding, self.stats = keys.outstanding(crawl_id), keys.stats(crawl_id)
        except (ImportError, AttributeError, TypeError):
            self.outstanding = f"{prefix}:outstanding:{crawl_id}"
            self.stats = f"{prefix}:stats:{crawl_id}"
        self._count: Callable[[redis.Redis, str], Any] | None = None

    def outstanding_count(self, client: redis.Redis) -> tuple[int, int]:
        """(items in the outstanding key, commands sent to learn it)."""
        sent = 0
        if self._count is None:
            kind = text(client.type(self.outstanding))
            sent += 1
            if kind == "none":
                return 0, sent
            self._count = _COUNTERS.get(kind)
            if self._count is None:
                raise BenchError(f"{self.outstanding} is a Redis {kind}; bench/lib/harness.py cannot count it")
        return int(self._count(client, self.outstanding) or 0), sent + 1

    def counters(self, client: redis.Redis) -> dict[str, int]:
        """The crawl's stats hash (``stored``, ``failures``, ``duplicates``, ...)."""
        kind = text(client.type(self.stats))
        if kind == "none":
            return {}
        if kind != "hash":
            raise BenchError(f"{self.stats} is a Redis {kind}, not a hash")
        out: dict[str, int] = {}
        for name, value in client.hgetall(self.stats).items():
            with contextlib.suppress(ValueError):
                out[text(name)] = int(value)
        return out


def text(value: bytes | str) -> str:
    """A Redis reply as text."""
    return value.decode() if isinstance(value, bytes) else value


_COUNTERS: dict[str, Callable[[redis.Redis, str], Any]] = {
    "set": lambda c, k: c.scard(k), "zset": lambda c, k: c.zcard(k), "list": lambda c, k: c.llen(k),
    "hash": lambda c, k: c.hlen(k), "string": lambda c, k: c.get(k),
}


@dataclass
class Crawled:
    """What a crawler_tasks crawl gave: the crawl's counters, its elapsed time, the polls of
    its outstanding set (commands the harness sent) and notes for the result."""

    counters: dict[str, int]
    elapsed: float
    polls: int = 0
    notes: dict[str, Any] = field(default_factory=dict)


def crawler_tasks_result(run: Run, crawled: Crawled, *, notes: Mapping[str, Any] | None = None,
                         **fields: Any) -> RunResult:
    """The result of a crawler_tasks run (:class:`BenchError` when it stored nothing)."""
    counters = crawled.counters
    pages = counters.get("stored", 0)
    if pages <= 0:
        raise BenchError("no page stored")
    problems = [f"{counters[name]} {name}" for name in ("failures", "failed") if counters.get(name)]
    return RunResult(run.row.key, run.round, pages=pages, elapsed_s=crawled.elapsed, **fields,
                     notes={**crawled.notes, **(notes or {}), "stats": counters, "problems": problems})


def crawl_with_cli(ctx: Context, row: Row, run: Run, seeds: Sequence[str], broker: RedisServer,
                   state: RedisServer, *, watch: AbstractContextManager[Any] | None = None) -> Crawled:
    """``crawler-tasks crawl SEEDS --workers N``: its own summary gives pages and elapsed."""
    store = run.dir / "pages.db"
    env = ctx.crawler_env(broker, state, store, row)
    cmd = [ctx.program("crawler-tasks"), "crawl", *seeds, "--workers", str(row.procs), "--quiet",
           "--store", store, "--crawl-id", run.crawl_id]
    out, err = run.dir / "stdout.txt", run.dir / "stderr.txt"
    with watch or contextlib.nullcontext():
        started = time.monotonic()
        # SIGINT when it must be stopped: the CLI then stops its worker itself.
        child = run.spawn_crawler(cmd, name="crawler-tasks crawl", env=env, log=err, stdout=out,
                                  stop_signal=signal.SIGINT)
        code = run.wait(child)
        wall = time.monotonic() - started
    if code != 0:
        raise BenchError(f"crawler-tasks exited with code {code}: {tail(err) or tail(out)}")
    summary = parse_summary(out.read_text(errors="replace"))
    counters = CrawlKeys(ctx.key_prefix, run.crawl_id).counters(state.client())
    if not counters.get("stored") and summary.get("pages stored", "").isdigit():
        counters["stored"] = int(summary["pages stored"])  # the stats key moved: trust the summary
    elapsed = seconds(summary.get("elapsed")) or wall
    return Crawled(counters, elapsed, notes={"command_wall_s": wall, "summary": summary})


def parse_summary(text: str) -> dict[str, str]:
    """``name   value`` lines of the CLI's summary (names may contain single spaces)."""
    summary = {}
    for line in text.splitlines():
        name, sep, value = line.partition("  ")
        if sep and name.strip():
            summary[name.strip()] = value.strip()
    return summary


def seconds(value: str | None) -> float:
    """``12.3s`` as 12.3 (0 when it is not a number of seconds)."""
    try:
        return float((value or "").rstrip("s"))
    except ValueError:
        return 0.0


def crawl_with_workers(ctx: Context, row: Row, run: Run, seeds: Sequence[str], broker: RedisServer,
                       state: RedisServer, *, node: str, watch: AbstractContextManager[Any] | None = None) -> Crawled:
    """N ``celery worker`` processes (``-n NODE<k>@%h``); the seeds go in through one ``submit()``
    once they answer a ping; elapsed from ``submit()`` to the outstanding set found empty."""
    env = ctx.crawler_env(broker, state, run.dir / "pages.db", row)
    log = run.dir / "workers.log"
    workers = [run.spawn_crawler([ctx.program("celery"), "-A", "crawler_tasks", "worker", "-l", "WARNING",
                                  "-n", f"{node}{k}@%h", "--without-mingle", "--without-gossip"],
                                 name=f"celery worker {k}", env=env, log=log)
               for k in range(1, row.procs + 1)]
    try:
        helper = _start_submit_helper(run, env, seeds, len(workers), log)
        _wait_line(run, helper, workers, log, expect="ready")
        with watch or contextlib.nullcontext():
            t0 = _submit(run, helper, workers, log)
            keys = CrawlKeys(ctx.key_prefix, run.crawl_id)
            polls = _wait_drained(run, keys, state, workers)
            t_end = time.time()
        counters = keys.counters(state.client())
    finally:
        _stop_workers(workers)
    return Crawled(counters, t_end - t0, polls=polls)


def _start_submit_helper(run: Run, env: dict[str, str], seeds: Sequence[str], workers: int, log: Path) -> Child:
    """submit_seed.py: imports crawler_tasks with this run's environment, pings the workers."""
    with open(log, "ab") as err:
        return run.group.spawn([sys.executable, LIB_DIR / "submit_seed.py", *seeds,
                                "--crawl-id", run.crawl_id, "--workers", str(workers),
                                "--timeout", f"{max(10.0, min(120.0, run.left())):.0f}"],
                               name="submit helper", env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=err)


def _wait_line(run: Run, helper: Child, workers: list[Child], log: Path, expect: str = "") -> str:
    """The helper's next line (an error line or early exit becomes a :class:`BenchError`)."""
    try:
        line = read_line(helper.popen.stdout, max(1.0, min(180.0, run.left())), helper)
    except BenchError as exc:
        run.check(workers)  # a worker that died is the better reason
        raise BenchError(f"{exc}: {tail(log)}") from None
    run.check(workers)
    if expect and line != expect:
        raise BenchError(f"submit helper: {line}: {tail(log)}")
    return line


def _submit(run: Run, helper: Child, workers: list[Child], log: Path) -> float:
    """Tell the helper to submit; its ``time.time()`` just before ``submit()``."""
    assert helper.popen.stdin is not None
    helper.popen.stdin.write(b"go\n")
    helper.popen.stdin.flush()
    answer = _wait_line(run, helper, workers, log)
    helper.finish(30)
    try:
        info = json.loads(answer)
    except ValueError:
        raise BenchError(f"submit helper: {answer}: {tail(log)}") from None
    if not info.get("accepted"):
        raise BenchError("the seed was not accepted by the gate")
    return float(info["t0"])


def _wait_drained(run: Run, keys: CrawlKeys, state: RedisServer, workers: list[Child]) -> int:
    """Poll the outstanding key every 0.1 s until it is empty; returns the commands sent."""
    client = state.client()
    sent = 0
    while True:
        count, used = keys.outstanding_count(client)
        sent += used
        if count == 0:
            return sent
        run.check(workers)
        time.sleep(0.1)


def _stop_workers(workers: list[Child]) -> None:
    """Warm shutdown of every worker at once (one SIGTERM: a second one makes Celery exit
    without waiting for its pool), then wait; SIGKILL after a minute."""
    families = [child.descendants() for child in workers]
    for child in workers:
        child.send(signal.SIGTERM)
    for child, family in zip(workers, families, strict=True):
        child.finish(WORKER_STOP_TIMEOUT)
        kill_leftovers(family)


# --------------------------------------------------------------------------- Scrapy


def scrapy_report(path: Path, child: Child, log: Path) -> dict[str, Any]:
    """The JSON report a Scrapy process wrote when it closed (it must have stored items)."""
    try:
        report: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        raise BenchError(f"{child.name} wrote no report: {tail(log)}") from None
    if not report.get("items"):
        raise BenchError(f"{child.name} stored no item: {tail(log)}")
    return report


def scrapy_problems(stats: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """Download errors, errors logged and fetch errors of a Scrapy report, as footnote text."""
    names = {"downloader/exception_count": "download errors", "log_count/ERROR": "errors logged",
             "errors": "fetch errors"}
    counts = {**stats, "errors": report.get("errors", 0)}
    return [f"{counts[k]} {label}" for k, label in names.items() if counts.get(k)]


def run_scrapy_module(ctx: Context, row: Row, run: Run, module: str, args: list[Any]) -> RunResult:
    """``python -m MODULE ARGS --out REPORT`` in bench/.venv-scrapy, one process; elapsed
    from its first request to its last item (as its report says)."""
    python = ctx.require_scrapy()
    out, log = run.dir / "report.json", run.dir / "log.txt"
    child = run.spawn_crawler([python, "-m", module, *args, "--out", out], name=row.kind,
                              env=ctx.scrapy_env(row), log=log)
    code = run.wait(child)
    if code != 0:
        raise BenchError(f"{row.kind} exited with code {code}: {tail(log)}")
    report = scrapy_report(out, child, log)
    stats = report.get("stats", {})
    return RunResult(row.key, run.round, pages=int(report["items"]),
                     elapsed_s=report["last_item_at"] - report["started_at"],
                     notes={**stats, "problems": scrapy_problems(stats, report)})


def ensure_scrapy_venv() -> Path:
    """bench/.venv-scrapy's python; created with Scrapy, scrapy-redis and aiohttp on first use."""
    python = SCRAPY_VENV / "bin" / "python"
    probe = [str(python), "-c", "import scrapy, scrapy_redis, aiohttp, lxml, w3lib"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    log(f"setting up {SCRAPY_VENV} (pip install {' '.join(SCRAPY_PACKAGES)}) ...")
    try:
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(SCRAPY_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *SCRAPY_PACKAGES], check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BenchError(f"could not set up bench/.venv-scrapy: {exc}") from None
    if subprocess.run(probe, capture_output=True).returncode != 0:
        raise BenchError("bench/.venv-scrapy: scrapy, scrapy_redis or aiohttp does not import")
    return python


def scrapy_python_for(rows: Sequence[Row], prog: str) -> tuple[Path | None, str]:
    """(bench/.venv-scrapy's python, "") when a row needs Scrapy; (None, why) when it cannot
    be set up (those rows fail); (None, "") when no row needs it."""
    if all(row.is_crawler_tasks for row in rows):
        return None, ""
    try:
        return ensure_scrapy_venv(), ""
    except BenchError as exc:
        log(f"{prog}: {exc} (the Scrapy rows will fail)")
        return None, str(exc)


def versions(scrapy_python: Path | None) -> dict[str, str]:
    """The versions of python and of every package a table's rows ran on."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {"python": sys.version.split()[0]}
    for name in ("crawler-tasks", "celery", "kombu", "redis"):
        with contextlib.suppress(PackageNotFoundError):
            found[name] = version(name)
    if scrapy_python is not None:
        code = ("from importlib.metadata import version as v; "
                "print(v('scrapy'), v('scrapy-redis'), v('aiohttp'), v('twisted'))")
        out = subprocess.run([str(scrapy_python), "-c", code], capture_output=True, text=True)
        if out.returncode == 0:
            found.update(zip(("scrapy", "scrapy-redis", "aiohttp", "twisted"), out.stdout.split(), strict=False))
    return found
