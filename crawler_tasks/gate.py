"""The gate: an atomic Redis check that runs before anything reaches the broker.

All candidate requests of one page go through one Lua call (one round trip).
For each candidate the script decides, atomically:

* repeated   — the same fingerprint came earlier in this call;
* replayed   — the same parent task admitted it before (a redelivered task
  republishes its children under their first task ids, so none is lost);
* bypass     — ``dont_filter`` requests skip the SET;
* over budget — the crawl's ``max_pages`` is reached;
* admitted   — ``SADD seen fp`` returned 1: nobody admitted it before;
* duplicate  — ``SADD`` returned 0: another page or node got there first.

Admitted task ids join the crawl's outstanding set in the same call, so the
crawl cannot look drained between admission and publication.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import redis

from .keys import Keys

_ADMIT = """
local limit = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local has_parent = KEYS[5] ~= ''
local out = {}
local admitted, duplicates, over = 0, 0, 0
local here = {}
for i = 3, #ARGV, 3 do
  local fp, tid, bypass = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local repeated = here[fp]
  local first = not repeated and has_parent and redis.call('HGET', KEYS[5], fp)
  if repeated then
    tid = ''
    duplicates = duplicates + 1
  elseif first then
    tid = first
  elseif bypass == '1' then
    admitted = admitted + 1
  elseif limit > 0 and redis.call('SCARD', KEYS[1]) >= limit then
    tid = ''
    over = over + 1
  elseif redis.call('SADD', KEYS[1], fp) == 1 then
    admitted = admitted + 1
  else
    tid = ''
    duplicates = duplicates + 1
  end
  here[fp] = true
  if tid ~= '' then
    redis.call('SADD', KEYS[2], tid)
    if has_parent then redis.call('HSET', KEYS[5], fp, tid) end
  end
  out[#out + 1] = tid
end
if has_parent then redis.call('EXPIRE', KEYS[5], ttl) end
for _, key in ipairs({KEYS[3], KEYS[4]}) do
  if admitted > 0 then redis.call('HINCRBY', key, 'gate/admitted', admitted) end
  if duplicates > 0 then redis.call('HINCRBY', key, 'duplicates', duplicates) end
  if over > 0 then redis.call('HINCRBY', key, 'gate/over_budget', over) end
end
return out
"""


@dataclass(frozen=True)
class Candidate:
    """A request that wants to be enqueued: its fingerprint and proposed task id."""

    fingerprint: str
    task_id: str
    dont_filter: bool = False


class Gate:
    """Admits each fingerprint once per crawl, cluster-wide."""

    def __init__(self, client: redis.Redis, keys: Keys, replay_ttl: int) -> None:
        self.client = client
        self.keys = keys
        self.replay_ttl = replay_ttl
        self._script = client.register_script(_ADMIT)

    def admit(self, crawl_id: str, candidates: Sequence[Candidate], *,
              parent_id: str | None = None, max_pages: int = 0) -> list[str | None]:
        """Task id to publish under for each candidate, or None where the gate refused it."""
        if not candidates:
            return []
        keys = [
            self.keys.seen(crawl_id),
            self.keys.outstanding(crawl_id),
            self.keys.stats(crawl_id),
            self.keys.stats(),
            self.keys.replay(parent_id) if parent_id else "",
        ]
        argv: list[str | int] = [max_pages, self.replay_ttl]
        for c in candidates:
            argv += [c.fingerprint, c.task_id, "1" if c.dont_filter else "0"]
        result = self._script(keys=keys, args=argv)
        return [(tid.decode() if isinstance(tid, bytes) else tid) or None for tid in result]

    def forget(self, crawl_id: str, fingerprints: Sequence[str], task_ids: Sequence[str]) -> None:
        """Undo admissions whose messages could not be published."""
        if not fingerprints:
            return
        pipe = self.client.pipeline(transaction=False)
        pipe.srem(self.keys.seen(crawl_id), *fingerprints)
        pipe.srem(self.keys.outstanding(crawl_id), *task_ids)
        pipe.hincrby(self.keys.stats(crawl_id), "gate/admitted", -len(fingerprints))
        pipe.hincrby(self.keys.stats(), "gate/admitted", -len(fingerprints))
        pipe.execute()

    def seen_count(self, crawl_id: str) -> int:
        """How many fingerprints the crawl has admitted."""
        return int(self.client.scard(self.keys.seen(crawl_id)))
