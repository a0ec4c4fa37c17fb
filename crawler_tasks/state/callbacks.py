"""Callbacks into the calling app: page callbacks staged while their records settle, and
the ``on_done`` callbacks waiting for their crawls to drain.

A page callback is sent once its record is stored: the store stage stages it
(``HSETNX`` by record token) before the record's token settles, and takes it as soon
as it is sent. A worker that dies between the settlement and the send leaves the
staged callback behind; the next delivery of the same batch finds it there (its
``HSETNX`` says so) and sends it. Only a worker killed between one callback's send
and its take (a round trip) leaves that one to be sent twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import redis

from .keys import Keys


class Callbacks:
    """Staged page callbacks (one hash per crawl) and pending ``on_done`` callbacks."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def stage(self, crawl_id: str, staged: Mapping[str, dict[str, Any]]) -> set[str]:
        """Stage ``staged`` (token -> callback); the tokens whose callback was already
        staged by an earlier delivery that did not send it."""
        if not staged:
            return set()
        key = self.keys.callbacks(crawl_id)
        with self.client.pipeline(transaction=False) as pipe:
            for token, spec in staged.items():
                pipe.hsetnx(key, token, json.dumps(spec))
            added = pipe.execute()
        return {token for token, new in zip(staged, added) if not new}

    def take(self, crawl_id: str, tokens: Sequence[str], pipe: Any = None) -> None:
        """Forget the staged callbacks of ``tokens`` (sent, or not to send); ``pipe``: queued
        there, with the sends."""
        if tokens:
            (pipe if pipe is not None else self.client).hdel(self.keys.callbacks(crawl_id), *tokens)

    def await_done(self, crawl_id: str, spec: dict[str, Any]) -> None:
        """Send ``spec`` when the crawl next drains."""
        self.client.hset(self.keys.done_callbacks(), crawl_id, json.dumps(spec))

    def waiting_done(self) -> list[str]:
        """Crawls with an ``on_done`` callback waiting."""
        return [c.decode() for c in self.client.hkeys(self.keys.done_callbacks())]

    def take_done(self, crawl_id: str) -> dict[str, Any] | None:
        """The crawl's ``on_done`` callback, taken by this caller only (None: none, or another
        worker took it)."""
        key = self.keys.done_callbacks()
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hget(key, crawl_id)
            pipe.hdel(key, crawl_id)
            raw, removed = pipe.execute()
        return json.loads(raw) if raw and removed else None
