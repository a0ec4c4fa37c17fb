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

With the politeness state in several shards (``CRAWLER_HOST_SHARDS``), each mover
keeps when it should next look at each shard (:class:`ShardLooks`): when the shard's
own answer says its next host is due, sooner when this process parked a fetch there
or freed a slot of one of its hosts, and at the latest :func:`idle_look_s` after the
last look (a shard other processes fill is still looked at, by them and by this one).
With one shard that is today's single look, every :data:`MAX_SLEEP_S` at most.
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
#: Longest time between two looks of one mover at a shard where nothing is due.
MAX_IDLE_S = 1.0
MIN_SLEEP_S = 0.005
#: Shortest time between two looks when this process's downloads keep freeing slots: a
#: freed slot wakes the mover, at most this often (the other processes' slots are seen
#: at the next look).
MIN_LOOK_S = 0.02


def move_once(rt: MoverDeps, shard: int = 0) -> float | None:
    """Publish the fetches of ``shard`` whose host may go now; seconds until the shard's next
    host is due. Releases owed since Redis failed under them are settled first."""
    if rt.hosts.owed:
        rt.hosts.settle_owed()
    taken, wait = rt.hosts.take_due(shard)
    if taken:
        enqueue.publish_moved(rt, [(item.request, item.task_id) for item in taken],
                              [(item.member, item.request.crawl_id) for item in taken])
    return 0.0 if taken else wait


def idle_look_s(shards: int) -> float:
    """Longest time between two looks of one mover at one shard: :data:`MAX_SLEEP_S` with
    one shard, up to :data:`MAX_IDLE_S` with many (a look per shard costs a script call)."""
    return min(MAX_IDLE_S, MAX_SLEEP_S * shards)


class ShardLooks:
    """When a mover should next look at each shard (monotonic times): pure bookkeeping."""

    def __init__(self, shards: int) -> None:
        self.idle_s = idle_look_s(shards)
        self.next = [0.0] * shards  # every shard is looked at first

    def due(self, now: float) -> list[int]:
        """The shards to look at now."""
        return [k for k, at in enumerate(self.next) if at <= now]

    def looked(self, shard: int, now: float, wait: float | None) -> None:
        """``shard`` was looked at ``now`` and said its next host is due in ``wait`` seconds."""
        self.next[shard] = now + (self.idle_s if wait is None else min(wait, self.idle_s))

    def hint(self, hints: dict[int, float]) -> None:
        """Look sooner at shards this process asked for (shard -> monotonic time)."""
        for shard, at in hints.items():
            if shard < len(self.next) and at < self.next[shard]:
                self.next[shard] = at

    def sleep_s(self, now: float) -> float:
        """Seconds until the next look, kept between :data:`MIN_SLEEP_S` and :data:`MAX_SLEEP_S`."""
        return min(max(min(self.next) - now, MIN_SLEEP_S), MAX_SLEEP_S)


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
        looks = ShardLooks(self.rt.hosts.shards)
        while not self._stop.is_set():
            try:
                looks.hint(self.rt.hosts.take_hints())
                now = time.monotonic()
                for shard in looks.due(now):
                    looks.looked(shard, now, move_once(self.rt, shard))
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
            self._sleep(looks.sleep_s(time.monotonic()))

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
