"""The dead letters: the records no store took, kept in Redis for ``crawler-tasks replay-dead``.

One LIST (:meth:`~crawler_tasks.state.keys.Keys.dead_letters`), newest first. A letter is
encoded by the store stage (:mod:`crawler_tasks.stages.store`); here it is bytes.
"""

from __future__ import annotations

import redis

from .keys import Keys


class DeadLetters:
    """Add, list and remove dead letters."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def add(self, *letters: bytes) -> None:
        """Keep ``letters`` (pushed at the head, so the newest comes first)."""
        if letters:
            self.client.lpush(self.keys.dead_letters(), *letters)

    def remove(self, letter: bytes) -> None:
        """Drop one copy of ``letter``."""
        self.client.lrem(self.keys.dead_letters(), 1, letter)

    def count(self) -> int:
        """How many letters wait."""
        return int(self.client.llen(self.keys.dead_letters()))

    def all(self) -> list[bytes]:
        """Every letter, newest first."""
        return self.client.lrange(self.keys.dead_letters(), 0, -1)
