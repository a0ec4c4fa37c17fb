"""The mover: hands fetches that waited for their host back to the broker when it may go.

One thread per worker process (next to the store dispatcher). Each call of
:meth:`~crawler_tasks.state.hosts.HostLimiter.take_due` takes the waiting fetches
of the hosts that are due, with a slot reserved for each; the mover publishes
them in their own band under their own task id (the crawl still counts them
outstanding), then forgets them. It sleeps until the next host is due, at
most :data:`MAX_SLEEP_S`: a slot freed by a finished download makes its host
due at once, and a slot freed in this process wakes the mover (at most every
:data:`MIN_LOOK_S`).

When the broker is the state Redis, the scripts send waiting fetches themselves
(:mod:`~crawler_tasks.state.waiting_room`): a freed slot hands its host's next
fetch over in its own release, the mover's look sends those of the hosts it
finds due, and a freed slot wakes the mover only where a delay holds the host
back (:meth:`~crawler_tasks.state.hosts.HostLimiter.wake_mover`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

import redis
from kombu.exceptions import OperationalError

from ..core.timing import backoff
from . import enqueue

if TYPE_CHECKING:
    from .deps import MoverDeps

log = logging.getLogger(__name__)

#: Longest sleep between two looks at the due hosts (seconds).
MAX_SLEEP_S = 0.1
MIN_SLEEP_S = 0.005
#: Shortest time between two looks when this process's downloads keep freeing slots: a
#: freed slot wakes the mover, at most this often (the other processes' slots are seen
#: at the next look).
MIN_LOOK_S = 0.02


def move_once(rt: MoverDeps) -> float | None:
    """Publish the fetches whose host may go now; seconds until the next host is due.
    Releases owed since Redis failed under them are settled first."""
    if rt.hosts.owed:
        rt.hosts.settle_owed()
    taken, wait = rt.hosts.take_due()
    if taken:
        enqueue.publish_moved(rt, [(item.request, item.task_id) for item in taken],
                              [(item.member, item.request.crawl_id) for item in taken])
    return 0.0 if taken else wait


class Mover:
    """The mover thread of one worker process."""

    def __init__(self, rt: MoverDeps) -> None:
        self.rt = rt
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Mover:
        self._thread = threading.Thread(target=self._run, name="crawler-host-mover", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                wait = move_once(self.rt)
                failures = 0
            except (redis.RedisError, OperationalError) as exc:
                failures += 1
                log.warning("host mover: Redis or broker failed (%s times): %s", failures, exc)
                self._stop.wait(backoff(self.rt.settings, failures - 1))
                continue
            except Exception:
                log.exception("host mover: unexpected error")
                self._stop.wait(1.0)
                continue
            self._sleep(MAX_SLEEP_S if wait is None else min(max(wait, MIN_SLEEP_S), MAX_SLEEP_S))

    def _sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, or until a slot of this process is freed (then at least
        :data:`MIN_LOOK_S` since the last look), or until stopped."""
        freed = self.rt.hosts.freed
        start = time.monotonic()
        freed.clear()
        if freed.wait(seconds) and not self._stop.is_set():
            self._stop.wait(max(0.0, MIN_LOOK_S - (time.monotonic() - start)))

    def stop(self) -> None:
        self._stop.set()
        self.rt.hosts.freed.set()  # out of its sleep at once
        if self._thread is not None:
            self._thread.join(5)
