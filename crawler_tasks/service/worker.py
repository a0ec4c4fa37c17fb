"""What a worker process runs beside its tasks: the store flusher and the host mover.

One of each per worker process: in the worker itself for the threads pool, in each
child for prefork (a forked child must not share its parent's threads or
connections). They stop, the flusher writing what waits, when the process shuts down.
"""

from __future__ import annotations

import os
from typing import Any

from celery import current_app, signals

from ..stages.mover import Mover
from ..stages.runtime import current
from ..stages.store import Flusher

#: The flusher and mover running in this process, by process id (a forked child starts its own).
_running: dict[int, tuple[Flusher, Mover]] = {}
#: Whether this worker's pool forks children (prefork): the threads then run in each child.
_forking_pool = False


@signals.worker_init.connect
def _note_pool(sender: Any = None, **_: Any) -> None:
    global _forking_pool
    pool = getattr(sender, "pool_cls", None)
    _forking_pool = "prefork" in str(getattr(pool, "__module__", pool))


@signals.worker_process_init.connect
def _start_in_child(**_: Any) -> None:
    start()


@signals.worker_ready.connect
def _start_in_worker(**_: Any) -> None:
    if not _forking_pool:
        start()


def start() -> None:
    """Start this process's flusher and mover (once per process), on the worker's own app."""
    if os.getpid() not in _running:
        rt = current(current_app._get_current_object())
        _running[os.getpid()] = (Flusher(rt).start(), Mover(rt).start())


@signals.worker_process_shutdown.connect
@signals.worker_shutdown.connect
def stop(**_: Any) -> None:
    """Stop them: the mover first (what it took and did not publish goes back after its
    lease), then the flusher, writing what waits (warm shutdown)."""
    running = _running.pop(os.getpid(), None)
    if running is not None:
        flusher, mover = running
        mover.stop()
        flusher.stop()
