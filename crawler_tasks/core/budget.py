"""Memory budgets of one worker process: how many large bodies, and how many bytes of
parse trees, it holds at once, whatever the pages.

A threads worker runs ``CRAWLER_WORKER_CONCURRENCY`` pages at once. Most are
small; a hostile or unlucky site can make all of them large (10 MiB each at the
size cap, a parse tree tens of times that). So a body past :data:`LARGE_BODY`
waits for one of ``CRAWLER_DOWNLOAD_LARGE_BODIES`` slots before it grows any
further, and keeps it until its record is in the store queue; smaller bodies
share a budget of parse-tree bytes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

#: Bytes above which a body is large: it takes a large-body slot, and is parsed as a
#: stream (no tree) by :mod:`crawler_tasks.stages.parse`.
LARGE_BODY = 1 << 20


class LargeBodies:
    """At most ``slots`` large bodies in this process at once; more wait for a slot."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._free = threading.BoundedSemaphore(slots)

    def permit(self) -> Permit:
        """A claim on one slot for one page: taken when needed, given back once."""
        return Permit(self._free)


class Permit:
    """One page's claim on a large-body slot (a context manager that gives it back)."""

    def __init__(self, free: threading.BoundedSemaphore) -> None:
        self._free = free
        self.held = False

    def take(self) -> float:
        """Take the slot (waiting for one if all are held); seconds waited."""
        if self.held:
            return 0.0
        started = time.monotonic()
        self._free.acquire()
        self.held = True
        return time.monotonic() - started

    def release(self) -> None:
        """Give the slot back, if taken (again: no effect)."""
        if self.held:
            self.held = False
            self._free.release()

    def __enter__(self) -> Permit:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


class ByteBudget:
    """At most ``capacity`` bytes held at once across threads; a larger request waits to
    be alone (it holds the whole budget)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._cond = threading.Condition()

    @contextmanager
    def hold(self, size: int) -> Iterator[None]:
        """Hold ``size`` bytes of the budget for the block."""
        size = min(size, self.capacity)
        with self._cond:
            while self.used + size > self.capacity:
                self._cond.wait()
            self.used += size
        try:
            yield
        finally:
            with self._cond:
                self.used -= size
                self._cond.notify_all()
