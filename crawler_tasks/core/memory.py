"""Memory allowances of one worker process: how many large bodies, and how many bytes of
parse trees, it holds at once, whatever the pages.

A threads worker runs ``CRAWLER_WORKER_CONCURRENCY`` pages at once. Most are
small; a hostile or unlucky site can make all of them large (10 MiB each at the
size cap, a parse tree tens of times that). So a body past :data:`LARGE_BODY`
waits for one of ``CRAWLER_DOWNLOAD_LARGE_BODIES`` slots before it grows any
further, and keeps it until its record is in the store queue; smaller bodies
share an allowance of parse-tree bytes. No wait is unbounded: a permit not free within
``wait_s`` is refused (:class:`~crawler_tasks.core.errors.PermitTimeout` for a download,
which is then tried again later), and a tree that waited that long goes ahead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

log = logging.getLogger(__name__)

#: Seconds a wait for a large-body permit or for tree bytes lasts at most, by default.
WAIT_S = 60.0

#: Bytes above which a body is large: it takes a large-body slot, and is parsed as a
#: stream (no tree) by :mod:`crawler_tasks.stages.parse`.
LARGE_BODY = 1 << 20


class LargeBodies:
    """At most ``slots`` large bodies in this process at once; more wait for a slot."""

    def __init__(self, slots: int, wait_s: float = WAIT_S) -> None:
        self.slots = slots
        self.wait_s = wait_s
        self._free = threading.BoundedSemaphore(slots)

    def permit(self) -> Permit:
        """A claim on one slot for one page: taken when needed, given back once."""
        return Permit(self._free, self.wait_s)

    @property
    def free(self) -> int:
        """Slots not held now (every slot is free once the process is idle)."""
        return self._free._value  # noqa: SLF001 (threading.Semaphore keeps no public count)


class Permit:
    """One page's claim on a large-body slot (a context manager that gives it back)."""

    def __init__(self, free: threading.BoundedSemaphore, wait_s: float = WAIT_S) -> None:
        self._free = free
        self.wait_s = wait_s
        self.held = False

    def take(self) -> bool:
        """Take the slot, waiting up to ``wait_s`` if all are held; False when none came free."""
        if self.held:
            return True
        self.held = self._free.acquire(timeout=self.wait_s)
        return self.held

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


class ByteAllowance:
    """At most ``capacity`` bytes held at once across threads; a larger request waits to
    be alone (it holds the whole allowance)."""

    def __init__(self, capacity: int, wait_s: float = WAIT_S) -> None:
        self.capacity = capacity
        self.wait_s = wait_s
        self.used = 0
        self._cond = threading.Condition()

    @contextmanager
    def hold(self, size: int) -> Iterator[None]:
        """Hold ``size`` bytes of the allowance for the block (after ``wait_s`` at most: a
        tree that waited that long goes ahead over the allowance, logged)."""
        size = min(size, self.capacity)
        with self._cond:
            if not self._cond.wait_for(lambda: self.used + size <= self.capacity, self.wait_s):
                log.warning("a %d-byte parse tree waited %.0fs for the tree allowance: going ahead over it",
                            size, self.wait_s)
            self.used += size
        try:
            yield
        finally:
            with self._cond:
                self.used -= size
                self._cond.notify_all()
