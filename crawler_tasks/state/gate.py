"""The gate: an atomic Redis check that runs before anything reaches the broker.

A task ends with one Lua call (:meth:`Gate.complete`) that, atomically:

* refuses a late duplicate — the task id is no longer outstanding, so this
  delivery's work was already accounted for (``stale``);
* replays — the task completed before but died before publishing: its children
  come back under their first task ids, uncounted (``replay``);
* otherwise tests all candidate fingerprints of the page against the crawl's
  seen filter, admits the new ones within the crawl's ``max_pages`` budget
  (kept in its own counter, ``gate/admitted``; ``dont_filter`` candidates
  bypass the filter), adds their task ids to the crawl's outstanding set and
  applies the task's counters (``ok``).

The seen filter is a strategy (:mod:`crawler_tasks.state.seen`: an exact SET, a
SET with a recrawl window, or a scalable Bloom filter) whose Lua test and add
are part of this same script, so each page costs one round trip in every mode.
The scripts are ``lua/gate_*.lua``, with the filter's ``lua/seen_*.lua`` in
``gate_complete.lua``.

Counters move only on that first completion, so a redelivered task never
counts twice. Seeds go through the same script with no finishing task. The
task then publishes the admitted children and calls :meth:`Gate.finish`: its
id leaves the outstanding set only after its children joined it, so a crawl
never looks drained while work is in flight.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

import redis

from ..core import counters
from . import scripts
from .keys import Keys
from .seen import SeenFilter, SeenInfo, SeenSet


def complete_script(seen: SeenFilter) -> str:
    """The gate's one script (``lua/gate_complete.lua``) with ``seen``'s membership test
    and add in it."""
    return scripts.source("gate_complete.lua", seen=seen.LUA_FILE)


class Adoption(Enum):
    """What :meth:`Gate.adopt` made of a fetch message this package did not publish."""

    TRACKED = 1   # its id is outstanding (a retry or redelivery of an adopted message)
    ADOPTED = 2   # first seen: its id joined the crawl's outstanding set now
    STALE = 0     # adopted earlier and already finished: a late duplicate delivery


class Fate(Enum):
    """What becomes of an outstanding token when it is settled."""

    END = "end"          # it leaves the crawl
    KEEP = "keep"        # it stays outstanding (its record is tried again)
    FAILED = "failed"    # it leaves, and its error line is kept with the crawl's errors


@dataclass(frozen=True)
class Settlement:
    """What became of one outstanding token (a queued store record): its ``fate``, and
    with :attr:`Fate.FAILED` the ``error`` line kept; ``counts`` are applied only while
    the token is still outstanding, so once."""

    token: str
    fate: Fate
    counts: Mapping[str, int]
    error: str = ""

    @property
    def how(self) -> str:
        """The settle script's word for it: ``end``, ``keep``, or the error line."""
        return self.error if self.fate is Fate.FAILED else self.fate.value


class Candidate(NamedTuple):
    """A request that wants to be enqueued: its fingerprint and proposed task id (a tuple:
    a page builds one per link)."""

    fingerprint: str
    task_id: str
    dont_filter: bool = False
    #: A pipeline step of the finishing task (parse/store), not a new URL: not counted as admitted.
    stage: bool = False


class Verdict(Enum):
    """How a completion went: first time, a replay of an earlier one, or a late duplicate."""

    OK = "ok"
    REPLAY = "replay"
    STALE = "stale"


class Admission(Enum):
    """What the gate decided for one candidate."""

    ADMITTED = "admitted"
    DUPLICATE = "duplicate"      # seen before (or, in a Bloom gate, a false positive)
    OVER_BUDGET = "over_budget"  # the crawl's max_pages is used up


_REFUSALS = {"-d": Admission.DUPLICATE, "-b": Admission.OVER_BUDGET}


@dataclass(frozen=True)
class Completion:
    """The gate's answer: the verdict and, per candidate, its task id (None if refused)
    and what was decided."""

    verdict: Verdict
    task_ids: list[str | None]
    admissions: list[Admission]

    @classmethod
    def parse(cls, raw: list[bytes | str]) -> Completion:
        values = [v.decode() if isinstance(v, bytes) else v for v in raw]
        refusals = [_REFUSALS.get(v) for v in values[1:]]
        return cls(Verdict(values[0]),
                   [None if r else v for v, r in zip(values[1:], refusals)],
                   [r or Admission.ADMITTED for r in refusals])


class Gate:
    """Admits each fingerprint once per crawl, cluster-wide, and tracks outstanding tasks.

    ``seen`` (default: an exact SET) keeps what was admitted; see :mod:`crawler_tasks.state.seen`.
    """

    def __init__(self, client: redis.Redis, keys: Keys, replay_ttl: int,
                 seen: SeenFilter | None = None) -> None:
        self.client = client
        self.keys = keys
        self.replay_ttl = replay_ttl
        self.seen = seen or SeenSet(keys)
        self._params = json.dumps(self.seen.params())
        self._complete = client.register_script(complete_script(self.seen))
        self._abandon = scripts.register(client, "gate_abandon.lua")
        self._count_once = scripts.register(client, "gate_count_once.lua")
        self._settle = scripts.register(client, "gate_settle.lua")
        self._adopt = scripts.register(client, "gate_adopt.lua")

    def complete(self, crawl_id: str, candidates: Sequence[Candidate], *,
                 task_id: str | None = None, counts: Mapping[str, int] | None = None,
                 max_pages: int = 0) -> Completion:
        """Admit ``candidates`` and apply ``counts`` as the completion of ``task_id``.

        Without ``task_id`` (seeds) nothing is finishing: candidates are just gated.
        Candidates must have distinct fingerprints.
        """
        keys = [self.keys.outstanding(crawl_id), self.seen.key(crawl_id),
                self.keys.stats(crawl_id), self.keys.replay(crawl_id, task_id or "-")]
        counted = [(name, amount) for name, amount in (counts or {}).items() if amount]
        argv: list[str | int] = [task_id or "", max_pages, self.replay_ttl, self._params, len(counted)]
        for name, amount in counted:
            argv += [name, amount]
        for c in candidates:
            argv += [c.fingerprint, c.task_id, "s" if c.stage else "1" if c.dont_filter else "0"]
        return Completion.parse(self._complete(keys=keys, args=argv))

    def admit(self, crawl_id: str, candidates: Sequence[Candidate], *, max_pages: int = 0,
              counts: Mapping[str, int] | None = None) -> list[str | None]:
        """Task id to publish under for each seed candidate, or None where the gate refused it."""
        return self.complete(crawl_id, candidates, counts=counts, max_pages=max_pages).task_ids

    def adopt(self, crawl_id: str, task_id: str) -> Adoption:
        """Track a fetch that another app sent straight to ``crawl.fetch`` (it bypassed the
        gate, so no id was added for it): its id joins the crawl's outstanding set once, so
        the page is stored and counted like any other and the crawl waits for it."""
        keys = [self.keys.outstanding(crawl_id), self.keys.adopted(crawl_id, task_id),
                self.keys.stats(crawl_id)]
        return Adoption(int(self._adopt(keys=keys, args=[task_id, self.replay_ttl])))

    def finish(self, crawl_id: str, task_id: str, pipe: Any = None) -> None:
        """The task's children are published: it leaves the outstanding set (queued on
        ``pipe`` when given, sent now otherwise)."""
        own = pipe is None
        pipe = self.client.pipeline(transaction=False) if own else pipe
        pipe.srem(self.keys.outstanding(crawl_id), task_id)
        pipe.delete(self.keys.replay(crawl_id, task_id))
        if own:
            pipe.execute()

    def pending(self, crawl_id: str, ids: Sequence[str]) -> list[bool]:
        """Whether each of ``ids`` is still in the crawl's outstanding set."""
        return [bool(x) for x in self.client.smismember(self.keys.outstanding(crawl_id), list(ids))]

    def redelivered(self, crawl_id: str, task_id: str) -> int:
        """Count one more delivery of a message whose worker died or stopped under it;
        how many so far (kept as long as replay marks)."""
        key = self.keys.deliveries(crawl_id)
        with self.client.pipeline(transaction=False) as pipe:
            pipe.hincrby(key, task_id, 1)
            pipe.expire(key, self.replay_ttl)
            deliveries, _ = pipe.execute()
        return int(deliveries)

    def abandon(self, crawl_id: str, task_id: str, error: str,
                counts: Mapping[str, int], children: Sequence[str] = ()) -> bool:
        """Drop a task that ended in an unexpected error, counting it once; False if already gone.

        ``children``: ids the task's completion admitted but it never published; they
        leave the outstanding set with it (counted ``gate/released``), or the crawl
        would wait for them forever.
        """
        keys = [self.keys.outstanding(crawl_id), self.keys.stats(crawl_id),
                self.keys.replay(crawl_id, task_id), self.keys.errors(crawl_id)]
        argv: list[str | int] = [task_id, error, len(counts)]
        for name, amount in counts.items():
            argv += [name, amount]
        return bool(self._abandon(keys=keys, args=[*argv, *children]))

    def count_once(self, crawl_id: str, task_id: str, step: str, counts: Mapping[str, int]) -> bool:
        """Apply ``counts`` of one step of a still-outstanding task (e.g. ``retry:2``) once.

        A redelivered message that repeats the step counts nothing; the marks go
        with the task's replay hash when the task finishes. False if not counted.
        """
        keys = [self.keys.outstanding(crawl_id), self.keys.replay(crawl_id, task_id),
                self.keys.stats(crawl_id)]
        argv: list[str | int] = [task_id, step, self.replay_ttl]
        for name, amount in counts.items():
            if amount:
                argv += [name, amount]
        return bool(self._count_once(keys=keys, args=argv))

    def settle(self, crawl_id: str, settlements: Sequence[Settlement]) -> list[bool]:
        """Apply ``settlements`` of the crawl's tokens in one script; per token, whether it
        was still outstanding (False: settled before, e.g. by a redelivered batch)."""
        keys = [self.keys.outstanding(crawl_id), self.keys.stats(crawl_id), self.keys.errors(crawl_id)]
        argv: list[str | int] = []
        for s in settlements:
            counted = [(name, amount) for name, amount in s.counts.items() if amount]
            argv += [s.token, s.how, len(counted)]
            for name, amount in counted:
                argv += [name, amount]
        return [bool(v) for v in self._settle(keys=keys, args=argv)] if argv else []

    def add_counts(self, crawl_id: str, counts: Mapping[str, int]) -> None:
        """Add ``counts`` to a crawl's counters outside any task (e.g. ``seeds/invalid`` of a feed)."""
        pipe = self.client.pipeline(transaction=False)
        for name, amount in counts.items():
            if amount:
                pipe.hincrby(self.keys.stats(crawl_id), name, amount)
        pipe.execute()

    def forget(self, crawl_id: str, fingerprints: Sequence[str], task_ids: Sequence[str]) -> bool:
        """Undo seed admissions whose messages could not be published.

        The tasks leave the outstanding set and the budget either way; False
        when the filter cannot forget (Bloom): the fingerprints stay seen.
        """
        if not task_ids:
            return True
        pipe = self.client.pipeline(transaction=False)
        self.seen.forget(pipe, crawl_id, list(fingerprints))
        pipe.srem(self.keys.outstanding(crawl_id), *task_ids)
        pipe.hincrby(self.keys.stats(crawl_id), counters.GATE_ADMITTED, -len(task_ids))
        pipe.execute()
        return self.seen.can_forget

    def info(self, crawl_id: str) -> SeenInfo:
        """The crawl's filter: mode, items, bytes (and a Bloom gate's capacity, error rate)."""
        return self.seen.info(self.client, crawl_id)

    def seen_count(self, crawl_id: str) -> int:
        """How many fingerprints the crawl's filter holds."""
        return self.info(crawl_id).items
