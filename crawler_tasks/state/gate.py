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
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple, Protocol

import redis

from ..core import counters
from ..core.shards import group_indexes, scatter, shard_of, shard_task_id
from . import scripts
from .gate_parts import GateParts
from .keys import Keys
from .round_trip import pipeline, run_scripts
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

#: The counters of a page's first links in hex, written once.
_COUNTERS = [f"{i:x}" for i in range(256)]


def new_task_ids(n: int) -> list[str]:
    """``n`` fresh task ids: one random 96-bit stem per page, a counter per link."""
    stem = os.urandom(12).hex()
    return [stem + c for c in _COUNTERS[:n]] + [f"{stem}{i:x}" for i in range(len(_COUNTERS), n)]


class Gated(Protocol):
    """What the gate needs of a request to make its candidate."""

    @property
    def fingerprint(self) -> str: ...
    @property
    def dont_filter(self) -> bool: ...


@dataclass(frozen=True)
class Completion:
    """The gate's answer: the verdict and, per candidate, its task id (None if refused)
    and what was decided."""

    verdict: Verdict
    task_ids: list[str | None]
    admissions: list[Admission]
    #: The gate shards the completion touched (several gate shards only): :meth:`Gate.finish`
    #: clears their records.
    shards: tuple[int, ...] = ()

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
    With several gate shards (``keys.gate_shards``) a completion takes the steps of
    :mod:`crawler_tasks.state.gate_parts` instead of one script.
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
        #: Shards of each crawl's gate (``CRAWLER_GATE_SHARDS``).
        self.shards = keys.gate_shards
        self._parts = GateParts(client, keys, self.seen, replay_ttl) if self.shards > 1 else None

    def complete(self, crawl_id: str, candidates: Sequence[Candidate], *,
                 task_id: str | None = None, counts: Mapping[str, int] | None = None,
                 max_pages: int = 0) -> Completion:
        """Admit ``candidates`` and apply ``counts`` as the completion of ``task_id``.

        Without ``task_id`` (seeds) nothing is finishing: candidates are just gated.
        Candidates must have distinct fingerprints.
        """
        if self._parts is not None:
            return self._complete_parts(self._parts, crawl_id, candidates, task_id, counts or {}, max_pages)
        keys = [self.keys.outstanding(crawl_id), self.seen.key(crawl_id),
                self.keys.stats(crawl_id), self.keys.replay(crawl_id, task_id or "-")]
        counted = [(name, amount) for name, amount in (counts or {}).items() if amount]
        argv: list[str | int] = [task_id or "", max_pages, self.replay_ttl, self._params, len(counted)]
        for name, amount in counted:
            argv += [name, amount]
        for c in candidates:
            argv += [c.fingerprint, c.task_id, "s" if c.stage else "1" if c.dont_filter else "0"]
        return Completion.parse(self._complete(keys=keys, args=argv))

    def _complete_parts(self, parts: GateParts, crawl_id: str, candidates: Sequence[Candidate],
                        task_id: str | None, counts: Mapping[str, int], max_pages: int) -> Completion:
        """:meth:`complete` over several gate shards (:mod:`~crawler_tasks.state.gate_parts`)."""
        counted = [(name, amount) for name, amount in counts.items() if amount]
        verdict = "ok"
        if task_id:
            verdict = parts.begin(crawl_id, task_id, counted)
            if verdict == "stale":
                return Completion(Verdict.STALE, [], [])
        elif counted:
            self.add_counts(crawl_id, dict(counted))
        kinds, inside, outside = [], [], []
        for n, c in enumerate(candidates):
            kind, shard = "s" if c.stage else "1" if c.dont_filter else "0", self.keys.task_shard(c.task_id)
            if kind == "0" and shard_of(c.fingerprint, self.shards) != shard:
                outside.append(n)  # a task id given from outside, not made in its URL's shard
                continue
            inside.append(n)
            kinds.append((c.fingerprint, c.task_id, kind, shard))
        limited = max_pages > 0
        answers = [""] * len(candidates)
        got, shards = parts.parts(crawl_id, task_id or "", kinds, limited)
        for n, answer in zip(inside, got):
            answers[n] = answer
        for n in outside:  # tested in its URL's shard (answers kept for its id: left to expire), kept in its own
            c = candidates[n]
            [answers[n]], _ = parts.parts(crawl_id, f"admit:{c.task_id}", [(c.fingerprint, c.task_id, "x",
                                                                    shard_of(c.fingerprint, self.shards))], limited)
            if answers[n] != "-d":
                self.client.sadd(self.keys.outstanding(crawl_id, self.keys.task_shard(c.task_id)), c.task_id)
        if limited:
            new = [n for n, c in enumerate(candidates) if answers[n] != "-d" and not (c.dont_filter or c.stage)]
            bypass = sum(1 for c in candidates if c.dont_filter and not c.stage)
            take = parts.budget(crawl_id, task_id or "", len(new), bypass, max_pages)
            over = new[take:]
            parts.release(crawl_id, [candidates[n].task_id for n in over], count=False)
            for n in over:
                answers[n] = "-b"
        return Completion(Verdict.REPLAY if verdict == "replay" else Verdict.OK,
                          [None if a in _REFUSALS else a for a in answers],
                          [_REFUSALS.get(a) or Admission.ADMITTED for a in answers], shards)

    def candidates(self, requests: Sequence[Gated]) -> list[Candidate]:
        """The candidates of ``requests``, each with a fresh task id; with several gate shards,
        made in the shard of its URL's fingerprint (:mod:`~crawler_tasks.state.gate_parts`)."""
        ids = new_task_ids(len(requests))
        if self.shards > 1:
            ids = [shard_task_id(i, shard_of(r.fingerprint, self.shards), self.shards) for i, r in zip(ids, requests)]
        return [Candidate(r.fingerprint, tid, r.dont_filter) for r, tid in zip(requests, ids)]

    def admit(self, crawl_id: str, candidates: Sequence[Candidate], *, max_pages: int = 0,
              counts: Mapping[str, int] | None = None) -> list[str | None]:
        """Task id to publish under for each seed candidate, or None where the gate refused it."""
        return self.complete(crawl_id, candidates, counts=counts, max_pages=max_pages).task_ids

    def adopt(self, crawl_id: str, task_id: str) -> Adoption:
        """Track a fetch that another app sent straight to ``crawl.fetch`` (it bypassed the
        gate, so no id was added for it): its id joins the crawl's outstanding set once, so
        the page is stored and counted like any other and the crawl waits for it."""
        shard = self.keys.task_shard(task_id)
        keys = [self.keys.outstanding(crawl_id, shard), self.keys.adopted(crawl_id, task_id),
                self.keys.stats(crawl_id, shard)]
        return Adoption(int(self._adopt(keys=keys, args=[task_id, self.replay_ttl])))

    def finish(self, crawl_id: str, task_id: str, pipe: Any = None, shards: Sequence[int] = (),
               limited: bool = True) -> None:
        """The task's children are published: it leaves the outstanding set (queued on
        ``pipe`` when given, sent now otherwise); ``shards``: those its completion touched
        (:attr:`Completion.shards`), ``limited``: whether its crawl has a page budget."""
        own = pipe is None
        pipe = pipeline(self.client) if own else pipe
        if self._parts is not None:
            self._parts.finish(pipe, crawl_id, task_id, shards, limited)
        else:
            pipe.srem(self.keys.outstanding(crawl_id), task_id)
            pipe.delete(self.keys.replay(crawl_id, task_id))
        if own:
            pipe.execute()

    def pending(self, crawl_id: str, ids: Sequence[str]) -> list[bool]:
        """Whether each of ``ids`` is still in the crawl's outstanding set."""
        if self._parts is not None:
            return self._parts.pending(crawl_id, ids)
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
        shard = self.keys.task_shard(task_id)
        keys = [self.keys.outstanding(crawl_id, shard), self.keys.stats(crawl_id, shard),
                self.keys.replay(crawl_id, task_id), self.keys.errors(crawl_id, shard)]
        argv: list[str | int] = [task_id, error, len(counts)]
        for name, amount in counts.items():
            argv += [name, amount]
        if self._parts is not None:  # the children first: a second call finds them gone
            if self.pending(crawl_id, [task_id])[0]:
                self._parts.release(crawl_id, children, count=True)
            children = ()
        return bool(self._abandon(keys=keys, args=[*argv, *children]))

    def count_once(self, crawl_id: str, task_id: str, step: str, counts: Mapping[str, int]) -> bool:
        """Apply ``counts`` of one step of a still-outstanding task (e.g. ``retry:2``) once.

        A redelivered message that repeats the step counts nothing; the marks go
        with the task's replay hash when the task finishes. False if not counted.
        """
        shard = self.keys.task_shard(task_id)
        keys = [self.keys.outstanding(crawl_id, shard), self.keys.replay(crawl_id, task_id),
                self.keys.stats(crawl_id, shard)]
        argv: list[str | int] = [task_id, step, self.replay_ttl]
        for name, amount in counts.items():
            if amount:
                argv += [name, amount]
        return bool(self._count_once(keys=keys, args=argv))

    def settle(self, crawl_id: str, settlements: Sequence[Settlement]) -> list[bool]:
        """Apply ``settlements`` of the crawl's tokens in one script; per token, whether it
        was still outstanding (False: settled before, e.g. by a redelivered batch)."""
        if not settlements:
            return []
        by_shard = group_indexes(settlements, lambda s: self.keys.task_shard(s.token))
        calls = []
        for shard, ns in by_shard.items():
            argv: list[Any] = []
            for s in (settlements[n] for n in ns):
                counted = [(name, amount) for name, amount in s.counts.items() if amount]
                argv += [s.token, s.how, len(counted)]
                for name, amount in counted:
                    argv += [name, amount]
            calls.append((self._settle, [self.keys.outstanding(crawl_id, shard), self.keys.stats(crawl_id, shard),
                                         self.keys.errors(crawl_id, shard)], argv))
        return [bool(flag) for flag in scatter(by_shard, run_scripts(self.client, calls), len(settlements), 0)]

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
        for shard, ns in group_indexes(task_ids, self.keys.task_shard).items():
            pipe.srem(self.keys.outstanding(crawl_id, shard), *(task_ids[n] for n in ns))
        pipe.hincrby(self.keys.stats(crawl_id), counters.GATE_ADMITTED, -len(task_ids))
        pipe.execute()
        return self.seen.can_forget

    def info(self, crawl_id: str) -> SeenInfo:
        """The crawl's filter: mode, items, bytes (and a Bloom gate's capacity, error rate)."""
        return self.seen.info(self.client, crawl_id)

    def seen_count(self, crawl_id: str) -> int:
        """How many fingerprints the crawl's filter holds."""
        return self.info(crawl_id).items
