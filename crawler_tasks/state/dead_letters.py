"""The dead letters: the records no store took, kept in Redis for ``crawler-tasks replay-dead``.

One LIST (:meth:`~crawler_tasks.state.keys.Keys.dead_letters`), newest first, of at most
``max_letters``: past it a letter is not kept (the caller counts it). A letter is encoded by
the store stage (:mod:`crawler_tasks.stages.dead_letters`); here it is bytes. What cannot be
read (a letter, or a store-queue entry) is set aside as it was on a second LIST
(:meth:`~crawler_tasks.state.keys.Keys.dead_letters_unreadable`), capped the same way, so
that it neither breaks the reading of the others nor is lost without a trace.
"""

from __future__ import annotations

from collections.abc import Iterator

import redis

from .keys import Keys

#: Letters read per round trip when the list is walked.
PAGE = 200


class DeadLetters:
    """Add, page through, set aside and remove dead letters."""

    def __init__(self, client: redis.Redis, keys: Keys, max_letters: int = 10_000) -> None:
        self.client = client
        self.keys = keys
        self.max_letters = max_letters
        #: Letters removed by this object (a walk reads on from where they were).
        self._gone = 0

    def add(self, *letters: bytes) -> int:
        """Keep ``letters`` (pushed at the head, so the newest comes first) while the list
        has room; returns how many were not kept."""
        if not letters:
            return 0
        room = max(0, self.max_letters - self.count())
        if room:
            self.client.lpush(self.keys.dead_letters(), *letters[:room])
        return max(0, len(letters) - room)

    def remove(self, letter: bytes) -> None:
        """Drop one copy of ``letter``."""
        self.client.lrem(self.keys.dead_letters(), 1, letter)
        self._gone += 1

    def count(self) -> int:
        """How many letters wait."""
        return int(self.client.llen(self.keys.dead_letters()))

    def walk(self, page: int = PAGE) -> Iterator[bytes]:
        """Every letter, oldest first, read ``page`` at a time from the oldest end, so that
        letters added meanwhile (at the head) move nothing; letters removed or set aside
        through this object while walking are allowed for."""
        key = self.keys.dead_letters()
        end = -1
        while True:
            chunk = self.client.lrange(key, end - page + 1, end)
            if not chunk:
                return
            gone = self._gone
            yield from reversed(chunk)
            if len(chunk) < page:
                return
            end = end - page + (self._gone - gone)  # what was removed brought the rest nearer

    def set_aside(self, letter: bytes) -> None:
        """Move ``letter``, which cannot be read, to the unreadable list."""
        with self.client.pipeline(transaction=True) as pipe:
            pipe.lrem(self.keys.dead_letters(), 1, letter)
            self._keep_unreadable(pipe, letter)
            pipe.execute()
        self._gone += 1

    def unreadable(self, raw: bytes) -> None:
        """Keep ``raw`` (a store-queue entry that cannot be read) on the unreadable list."""
        with self.client.pipeline(transaction=True) as pipe:
            self._keep_unreadable(pipe, raw)
            pipe.execute()

    def _keep_unreadable(self, pipe: redis.client.Pipeline, raw: bytes) -> None:
        pipe.lpush(self.keys.dead_letters_unreadable(), raw)
        pipe.ltrim(self.keys.dead_letters_unreadable(), 0, self.max_letters - 1)

    @property
    def unreadable_key(self) -> str:
        """Where the unreadable letters and entries are set aside (for a person to look at)."""
        return self.keys.dead_letters_unreadable()

    def unreadable_count(self) -> int:
        """How many unreadable letters and entries are set aside."""
        return int(self.client.llen(self.keys.dead_letters_unreadable()))
