"""The Redis lists of a Redis broker: one per band of a queue, and one wake list per queue.

kombu's Redis transport keeps a queue's messages of each priority step in a list
of their own; this package's transport names them ``crawl.fetch``, ``crawl.fetch:1``
… ``crawl.fetch:9`` (:data:`BAND_SEP`), while kombu's own separator (``sep``, in the
exchange bindings every app on the broker reads) stays kombu's default. A worker
of this package that finds them empty blocks on the queue's wake list; whoever
pushes a message pushes a token there (:func:`wake`).
"""

from __future__ import annotations

from typing import Any

#: Band list-name separator: keys are ``crawl.fetch``, ``crawl.fetch:1`` … ``crawl.fetch:9``.
BAND_SEP = ":"


def redis_list(queue: str, broker_prio: int) -> str:
    """Name of the Redis list holding ``queue`` messages of one broker priority."""
    return queue if broker_prio == 0 else f"{queue}{BAND_SEP}{broker_prio}"


def wake_list(queue: str) -> str:
    """Name of the Redis list a worker waiting for ``queue`` blocks on: whoever pushes a
    message onto one of its lists pushes a token here (at most one waits)."""
    return f"{queue}{BAND_SEP}wake"


def wake_commands(queue: str) -> tuple[tuple[Any, ...], ...]:
    """The commands that leave one token (never more) on ``queue``'s wake list."""
    name = wake_list(queue)
    return ("lpush", name, 1), ("ltrim", name, 0, 0)


def wake(pipe: Any, queue: str) -> None:
    """Add to ``pipe`` the token that wakes a worker waiting for ``queue``."""
    for command, *args in wake_commands(queue):
        getattr(pipe, command)(*args)


class PipeBatch:
    """kombu's publish batch over a pipeline: what kombu's publish adds goes into it."""

    def __init__(self, pipe: Any) -> None:
        self.pipe = pipe

    def add(self, command: str, *args: Any) -> None:
        getattr(self.pipe, command)(*args)
