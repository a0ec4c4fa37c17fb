"""Measuring crawler processes: CPU at reaping, a process-tree sampler, Redis counter deltas.

CPU (user + sys) is taken two ways and the larger is kept:

* :class:`ReapedCpu`: ``getrusage(RUSAGE_CHILDREN)`` just before and just after
  the harness reaps one crawler process. The kernel adds a child's CPU, and
  that of every descendant it reaped itself (Celery's pool children, the
  CLI's worker), to ``RUSAGE_CHILDREN`` at that moment, so the difference is
  exactly that process tree. The site server, Redis servers, wrk and the
  submit helper are reaped outside these brackets and never counted.
* :class:`TreeSampler`: every 0.2 s each watched process and its descendants
  (psutil), keeping each pid's last CPU time. It misses up to 0.2 s of a
  process that exits between samples, but it still sees a descendant that
  was orphaned instead of reaped by its parent.

The sampler also gives the peak RSS: the largest sum of RSS over the watched
trees at one sample (shared copy-on-write pages of forked workers are counted
once per process, as ``ps`` does).
"""

from __future__ import annotations

import contextlib
import resource
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import psutil


def children_cpu() -> float:
    """User + sys CPU seconds of every child this process has reaped so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tree_rss(*pids: int) -> int:
    """RSS bytes of these processes and their descendants now (shared pages once per process)."""
    total = 0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            family = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for proc in family:
            with contextlib.suppress(psutil.Error):
                total += proc.memory_info().rss
    return total


class ReapedCpu:
    """CPU seconds of the processes reaped inside :meth:`reaping` (and their reaped descendants)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextmanager
    def reaping(self) -> Iterator[None]:
        before = children_cpu()
        try:
            yield
        finally:
            self.seconds += children_cpu() - before


@dataclass
class TreeUsage:
    cpu_seconds: float
    peak_rss_bytes: int
    samples: int


class TreeSampler:
    """Samples the process trees under some root pids in a background thread."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.roots: list[psutil.Process] = []
        self.cpu: dict[tuple[int, float], float] = {}  # (pid, create_time) -> last user+sys
        self.peak_rss = 0
        self.samples = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="tree-sampler", daemon=True)

    def watch(self, pid: int) -> None:
        try:
            proc = psutil.Process(pid)
        except psutil.Error:
            return
        with self._lock:
            self.roots.append(proc)

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def stop(self) -> TreeUsage:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return TreeUsage(sum(self.cpu.values()), self.peak_rss, self.samples)

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def sample(self) -> None:
        with self._lock:
            roots = list(self.roots)
        rss = 0
        for proc in self._family(roots):
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    mem = proc.memory_info().rss
                    key = (proc.pid, proc.create_time())
            except psutil.Error:
                continue
            self.cpu[key] = times.user + times.system
            rss += mem
        self.peak_rss = max(self.peak_rss, rss)
        self.samples += 1

    @staticmethod
    def _family(roots: list[psutil.Process]) -> list[psutil.Process]:
        seen: dict[int, psutil.Process] = {}
        for root in roots:
            try:
                if root.status() == psutil.STATUS_ZOMBIE:
                    continue
                members = [root, *root.children(recursive=True)]
            except psutil.Error:
                continue
            for proc in members:
                seen.setdefault(proc.pid, proc)
        return list(seen.values())


@dataclass(frozen=True)
class RedisDelta:
    """Commands and input bytes a Redis server handled between two counter readings."""

    commands: int
    bytes_in: int


def redis_delta(before: tuple[int, int], after: tuple[int, int], own_commands: int = 0) -> RedisDelta:
    """``after - before``, less the commands the harness itself sent in between."""
    return RedisDelta(max(0, after[0] - before[0] - own_commands), after[1] - before[1])


def slope(points: Sequence[tuple[float, float]], *, min_points: int = 2, min_span: float = 0.0) -> float | None:
    """Least-squares slope of y on x; None with fewer than ``min_points`` points or when x
    varies by less than ``min_span`` (or not at all)."""
    if len(points) < min_points:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    if max(xs) - min(xs) < min_span or var == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var
