"""The gate of a crawl split over several shards (``CRAWLER_GATE_SHARDS`` > 1), each with a
hash tag of its own, so one crawl's gate spreads over a Redis Cluster's masters.

A candidate belongs to the shard of its task id (:func:`~crawler_tasks.core.shards.task_shard`),
and a link's new task id is made in the shard of its fingerprint
(:func:`~crawler_tasks.core.shards.shard_task_id`), so a URL is always tested in the same
shard, and the shard that admits it keeps it outstanding. A shard keeps its seen filter,
outstanding set, counters (summed on read) and the replay marks of its own tasks.

A task's completion takes three steps, each idempotent, so a worker killed between two
loses nothing and counts nothing twice when the message comes back:

1. **begin**, on the task's own shard (``lua/gate_begin.lua``): a late duplicate is refused
   (``stale``); the task's counters move once, and its completion is marked begun (a
   second delivery gets ``replay``);
2. **parts**, one script per shard its candidates fall in, in one pipeline
   (``lua/gate_part.lua``): test and add to the shard's filter, join its outstanding set,
   and keep the answers under the task's id (a replay gets the same answers, so the same
   task ids);
3. **budget**, only for a crawl with a page budget (``lua/gate_budget.lua``, on the crawl's
   own tag): how many of the new URLs it still takes, once per task; the new URLs past it,
   in the completion's order, leave their outstanding sets again (refused ``over_budget``).

The budget holds exactly: no more than ``max_pages`` URLs are admitted. A URL refused over
budget stays in the filter (the budget is used up for good by then). The crawl's
``finish`` removes the task's begin mark, its parts' records and its grant.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import redis

from ..core.shards import group_indexes, scatter
from . import scripts
from .keys import Keys
from .round_trip import pipeline, run_scripts
from .seen import SeenFilter


class GateParts:
    """The steps of a completion over several gate shards (see the module doc)."""

    def __init__(self, client: redis.Redis, keys: Keys, seen: SeenFilter, replay_ttl: int) -> None:
        self.client, self.keys, self.seen, self.replay_ttl = client, keys, seen, replay_ttl
        self._params = json.dumps(seen.params())
        self._begin = scripts.register(client, "gate_begin.lua")
        self._part = client.register_script(scripts.source("gate_part.lua", seen=seen.LUA_FILE))
        self._budget = scripts.register(client, "gate_budget.lua")
        self._release = scripts.register(client, "gate_release.lua")

    def begin(self, crawl_id: str, task_id: str, counts: Sequence[tuple[str, int]]) -> str:
        """Step 1: ``stale``, ``replay`` or ``ok`` (counters moved)."""
        k, shard = self.keys, self.keys.task_shard(task_id)
        args: list[str | int] = [task_id, self.replay_ttl]
        for name, amount in counts:
            args += [name, amount]
        raw = self._begin(keys=[k.outstanding(crawl_id, shard), k.replay(crawl_id, task_id),
                                k.stats(crawl_id, shard)], args=args)
        return raw.decode() if isinstance(raw, bytes) else str(raw)

    def parts(self, crawl_id: str, record: str, kinds: Sequence[tuple[str, str, str, int]],
              limited: bool) -> tuple[list[str], tuple[int, ...]]:
        """Step 2 for candidates ``kinds`` (fingerprint, task id, kind, shard): per candidate its
        task id or ``-d`` (as first answered, on a replay), and the shards touched.
        ``record``: the name the answers are kept under ('' for seeds: not kept)."""
        k = self.keys
        by_shard = group_indexes(kinds, lambda kind: kind[3])
        calls = []
        for shard, ns in by_shard.items():
            args: list[Any] = ["1" if record else "", "1" if limited else "", self.replay_ttl, self._params]
            for n in ns:
                args += list(kinds[n][:3])
            keys = [k.outstanding(crawl_id, shard), self.seen.key(crawl_id, shard), k.stats(crawl_id, shard),
                    k.part(crawl_id, record or "-", shard)]
            calls.append((self._part, keys, args))
        replies = ([v.decode() if isinstance(v, bytes) else v for v in reply[1:]]
                   for reply in run_scripts(self.client, calls))  # past each verdict
        return scatter(by_shard, replies, len(kinds), ""), tuple(by_shard)

    def budget(self, crawl_id: str, task_id: str, new: int, bypass: int, max_pages: int) -> int:
        """Step 3: how many of ``new`` first-seen URLs the crawl's budget takes."""
        k = self.keys
        return int(self._budget(keys=[k.stats(crawl_id), k.grants(crawl_id)],
                                args=[task_id, new, bypass, max_pages, self.replay_ttl]))

    def release(self, crawl_id: str, task_ids: Sequence[str], *, count: bool) -> int:
        """``task_ids`` leave their shards' outstanding sets (``count``: as gate/released)."""
        by_shard = group_indexes(task_ids, self.keys.task_shard)
        return sum(int(n) for n in run_scripts(self.client, [
            (self._release, [self.keys.outstanding(crawl_id, shard), self.keys.stats(crawl_id, shard)],
             ["1" if count else "0", *(task_ids[n] for n in ns)]) for shard, ns in by_shard.items()]))

    def finish(self, pipe: Any, crawl_id: str, task_id: str, shards: Sequence[int], limited: bool) -> None:
        """Queue on ``pipe`` the end of ``task_id``: it leaves its outstanding set, and its begin
        mark, its parts' records (``shards``) and, in a crawl with a budget (``limited``), its
        grant go."""
        k = self.keys
        pipe.srem(k.outstanding(crawl_id, k.task_shard(task_id)), task_id)
        pipe.delete(k.replay(crawl_id, task_id))
        for shard in shards:
            pipe.delete(k.part(crawl_id, task_id, shard))
        if limited:
            pipe.hdel(k.grants(crawl_id), task_id)

    def pending(self, crawl_id: str, ids: Sequence[str]) -> list[bool]:
        """Whether each of ``ids`` is still outstanding, asked of its shard."""
        by_shard = group_indexes(ids, self.keys.task_shard)
        with pipeline(self.client) as pipe:
            for shard, ns in by_shard.items():
                pipe.smismember(self.keys.outstanding(crawl_id, shard), [ids[n] for n in ns])
            raw = pipe.execute()
        return [bool(flag) for flag in scatter(by_shard, raw, len(ids), 0)]
