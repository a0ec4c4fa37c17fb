"""The store queue's dispatch: when a batch is due, a store task writes it.

A :class:`Dispatcher` thread in every worker process sends a store task
(``crawl.store_batch``, on the ``crawl.store`` queue) when a batch is due and runs the
once-a-second :func:`housekeeping`; the task, on whichever worker serves the queue, takes
a batch (:func:`write_turn`) and writes it (:func:`crawler_tasks.stages.store.write_batch`).
A worker that stops writes what waits first (:func:`drain`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import redis

from ..core.timing import backoff
from . import enqueue
from .notify import call_back_done, note_finished
from .store import write_batch

if TYPE_CHECKING:
    from .deps import StoreDeps

log = logging.getLogger(__name__)


def housekeeping(rt: StoreDeps, *, send: bool = True) -> None:
    """Once a second, in every worker process: give back the batches of dead writers, move
    due retries, send writers to the other store shards' due batches, publish the seeds of
    seed calls that died half-way, note drained crawls, send their ``on_done`` callbacks and
    close them here (pipelines' and middlewares' ``close``), and log this process's pace
    when due. ``send=False``: no writers (a process about to write what waits itself)."""
    rt.store_queue.tick()
    if send and rt.store_queue.shards > 1:
        dispatch(rt, rt.store_queue.order()[1:])
    enqueue.recover_seed_calls(rt)
    note_finished(rt)
    call_back_done(rt)
    rt.lifecycle.close_drained(rt.crawls.outstanding_many)
    rt.page_log.tick()


def write_turn(rt: StoreDeps, writer: str, *, now: bool = True, crawls: dict[str, int] | None = None) -> int:
    """One store task's work: take a batch onto ``writer``'s list (``now``: whatever waits,
    as its task was sent because a batch was due; else only a due batch) and write it, or,
    if nothing is left for it, give up its lease. Returns how many entries it took
    (``crawls``: filled with the batch's records per crawl)."""
    s = rt.settings
    raw = rt.store_queue.take(writer, s.store_batch, s.store_flush_s, s.store_lease_s, now=now,
                              max_bytes=s.store_batch_bytes)
    if raw:
        per_crawl = write_batch(rt, writer, raw)
        if crawls is not None:
            crawls.update(per_crawl)
    else:
        rt.store_queue.release(writer)
    return len(raw)


def flush_once(rt: StoreDeps, writer: str, *, now: bool = True) -> int:
    """Housekeeping, then one batch written by ``writer`` here, in this process (tests and
    tools; workers send store tasks instead)."""
    housekeeping(rt)
    return write_turn(rt, writer, now=now)


def dispatch(rt: StoreDeps, shards: Sequence[int] | None = None) -> list[str]:
    """Send a store task for each of ``shards`` (this process's home shard by default)
    where a batch is due and no writer is on it (or more full batches wait than writers at
    work); the writers sent. A broker that refuses a task gives its lease back at once,
    so the next look sends it again."""
    s, queue = rt.settings, rt.store_queue
    writers = [queue.writer(k) for k in ([queue.home()] if shards is None else shards)]
    sent = queue.dispatch(writers, s.store_batch, s.store_flush_s, s.store_lease_s, s.store_writers)
    for n, writer in enumerate(sent):
        try:
            enqueue.publish_writer(rt, writer)
        except Exception:
            for given in sent[n:]:
                queue.release(given)
            raise
    return sent


class Dispatcher:
    """Sends store tasks when batches are due: one thread in each worker process.

    It looks (one script call) every twentieth of ``CRAWLER_STORE_FLUSH_S`` (between 20
    and 50 ms: a record that no other follows waits two looks), and does the :func:`housekeeping` once a second. Writing is the store
    tasks' (``crawl.store_batch`` on ``crawl.store``), so only the workers that consume
    that queue write to the backends.
    """

    #: Seconds between two rounds of housekeeping.
    TICK_S = 1.0

    def __init__(self, rt: StoreDeps) -> None:
        self.rt = rt
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_tick = 0.0

    def look_once(self) -> list[str]:
        """Housekeeping when its second has come, then :func:`dispatch`: the writers sent."""
        if time.monotonic() >= self._next_tick:
            housekeeping(self.rt)
            self._next_tick = time.monotonic() + self.TICK_S
        return dispatch(self.rt)

    def start(self) -> Dispatcher:
        self._thread = threading.Thread(target=self._run, name="crawler-store-dispatcher", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        s = self.rt.settings
        poll = min(max(s.store_flush_s / 20, 0.02), 0.05)
        failures = 0
        while not self._stop.is_set():
            try:
                sent = self.look_once()
                failures = 0
            except redis.RedisError as exc:
                failures += 1
                log.warning("store queue: state Redis failed (%s times): %s", failures, exc)
                self._stop.wait(backoff(s, failures - 1))
                continue
            except Exception:  # a broker that refused the task, or a bug: look again later
                log.exception("store queue: no store task sent")
                self._stop.wait(1.0)
                continue
            if not sent:
                self._stop.wait(poll)

    def stop(self, *, drain_s: float = 0.0) -> None:
        """Stop the thread; with ``drain_s`` (a worker that serves ``crawl.store``, at its
        warm shutdown), write what waits for up to that long first, as its store tasks
        would have. What is left stays in Redis for the other store workers."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if drain_s > 0:
            drain(self.rt, drain_s)
        self.rt.lifecycle.close()  # what this process still holds open


def drain(rt: StoreDeps, seconds: float) -> int:
    """Write what waits in the store queue here, batch after batch, this process's shard
    first, for up to ``seconds``; how many entries were taken."""
    queue, taken = rt.store_queue, 0
    deadline = time.monotonic() + seconds
    try:
        housekeeping(rt, send=False)  # dead writers' batches and due retries join what waits
        order = queue.order()
    except Exception as exc:  # noqa: BLE001 - the others will write it
        log.warning("store queue not drained at shutdown (other workers will): %s", exc)
        return 0
    for shard in order:
        writer = queue.writer(shard)
        while time.monotonic() < deadline:
            try:
                n = write_turn(rt, writer)
            except Exception as exc:  # noqa: BLE001 - the others will write it
                log.warning("store queue not drained at shutdown (other workers will): %s", exc)
                return taken
            if not n:
                break
            taken += n
    return taken
