"""Store stage: page records go to their crawl's store in batches, and are never lost.

A finished page's record waits in the store queue (:mod:`crawler_tasks.state.store_queue`);
a :class:`Dispatcher` thread in every worker process sends a store task
(``crawl.store_batch``, on the ``crawl.store`` queue) when a batch is due, and
that task, on whichever worker serves the queue, takes up to
``CRAWLER_STORE_BATCH`` records (or fewer after ``CRAWLER_STORE_FLUSH_S``),
writes each store's share in one request, and only then settles them: a store that is down gets the records back with backoff,
and past ``CRAWLER_STORE_MAX_RETRIES`` they go to the dead letters, as does at
once a record a backend refuses for good (with the backend's reason) and one
whose store cannot be opened here. ``crawler-tasks replay-dead`` writes them
again, to their own store or to another one.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis

from ..backends import RecordFailure
from ..core import codec, counters
from ..core.errors import BadInput, BrokerUnavailable, QueueFull, StoreUnavailable
from ..core.models import CrawlRequest, PageRecord
from ..core.policy import backoff, now_iso
from ..core.store_uris import masked
from ..state.gate import Settlement
from ..state.store_queue import StoreEntry
from . import enqueue, failures

if TYPE_CHECKING:
    from .deps import StoreDeps

log = logging.getLogger(__name__)


def write(rt: StoreDeps, uri: str, records: Sequence[PageRecord]) -> list[RecordFailure]:
    """Upsert ``records`` into the store ``uri`` (every backend of a comma list) in one
    batch; returns the records a backend refused for good (e.g. an Elasticsearch mapping
    error: retrying cannot help them). :class:`StoreUnavailable` propagates."""
    return rt.store(uri).upsert(records) or []


def previous(rt: StoreDeps, req: CrawlRequest) -> PageRecord | None:
    """The record an earlier fetch of ``req`` stored, when recrawls may revalidate it.

    Only with ``CRAWLER_RECRAWL_AFTER`` set (a URL can pass the gate twice) and
    for GET; a store that cannot answer now means a plain fetch.
    """
    if rt.settings.recrawl_after <= 0 or req.method != "GET":
        return None
    try:
        return rt.store(rt.limits(req.crawl_id).store).get(req.fingerprint)
    except (StoreUnavailable, BadInput):  # down, or not configured here: the write will say so
        return None


def queue_claim(rt: StoreDeps, claim_id: str, req: CrawlRequest, task_id: str) -> None:
    """A ``crawl.store`` message (sent by earlier releases): queue the record of
    ``claim_id`` for the store, end the task, drop the claim."""
    record, _ = rt.claims.load(req.crawl_id, claim_id, with_body=False)
    enqueue.complete(rt, req, task_id, [], {}, record=record)
    rt.claims.delete(req.crawl_id, claim_id)  # done now, or long ago (a late duplicate)


def flush_stats(rt: StoreDeps, crawl_ids: Sequence[str] | None = None) -> int:
    """Write the counters of each crawl that changed since its last flush to the crawl's
    store, when that store keeps statistics (Elasticsearch: ``<index>-stats``, one
    document per crawl updated in place). Returns how many crawls were written."""
    ids = list(crawl_ids) if crawl_ids is not None else rt.crawls.all_ids()
    last = rt.stats.flushed(ids)
    written = 0
    for crawl_id in ids:
        try:
            written += _flush_crawl_stats(rt, crawl_id, last.get(crawl_id))
        except (StoreUnavailable, BadInput) as exc:  # the next flush tries again; the others go on
            log.warning("statistics of crawl %s not written: %s", crawl_id, exc)
    return written


def _flush_crawl_stats(rt: StoreDeps, crawl_id: str, last: bytes | None) -> int:
    """Write one crawl's counters to its store when they changed since ``last``; 1 if written."""
    target = rt.store(rt.limits(crawl_id).store)
    if not hasattr(target, "write_stats"):
        return 0
    figures = rt.stats.read(crawl_id)
    digest = json.dumps(figures, sort_keys=True).encode()
    if last == digest:
        return 0
    target.write_stats(crawl_id, figures)
    rt.stats.mark_flushed(crawl_id, digest)
    return 1


def write_batch(rt: StoreDeps, consumer: str, raw: Sequence[bytes]) -> None:
    """Write the store entries ``raw`` that ``consumer`` took, one upsert per store URI,
    then settle each: written, refused for good (kept in the dead letters with the
    backend's reason), put back with backoff while its store is down, or, past
    ``CRAWLER_STORE_MAX_RETRIES``, kept in the dead letters; each counted once. Only
    then is the taken list released."""
    settled = _Settled()
    for part in _decoded_parts(raw, rt.settings.store_batch_bytes):
        # A backend's request for a large record costs several times its body: it counts
        # as one of the process's large bodies.
        with rt.large_bodies.permit() as permit:
            if any(e.record.large for e in part) and not permit.take():
                log.warning("a store batch with a large record waited %.0fs for a large-body permit: "
                            "writing it anyway", permit.wait_s)
            _write_part(rt, consumer, part, settled)
        del part  # not held while the next part decodes
    settled.apply(rt)
    rt.store_queue.release(consumer)


def _write_part(rt: StoreDeps, consumer: str, entries: list[StoreEntry], settled: _Settled) -> None:
    """Write ``entries``, one upsert per store URI, and note how each one settles."""
    for uri, group in _by_store(entries).items():
        rt.store_queue.renew(consumer, rt.settings.store_lease_s)
        try:
            refused = {f.fingerprint: f.reason for f in write(rt, uri, [e.record for e in group])}
        except Exception as exc:  # StoreUnavailable, or a bug: never drop the records
            if not isinstance(exc, (StoreUnavailable, BadInput)):
                log.exception("store %s failed unexpectedly", masked(uri))
            _failed(rt, uri, group, exc, settled)
            continue
        for e in group:
            reason = refused.get(e.record.fingerprint)
            if reason is None:
                settled.add(e, Settlement.END, {counters.STORED: 1})
                settled.stored(e)
            else:
                _refused(e, reason, settled)


def _refused(e: StoreEntry, reason: str, settled: _Settled) -> None:
    """A backend refused ``e``'s record for good (retrying the same record cannot help):
    it goes to the dead letters with the backend's reason, for a replay elsewhere."""
    log.error("store %s refused %s (%s), kept in the dead letters (crawler-tasks dead-letters, "
              "replay-dead --to): %s", masked(e.store), e.record.url, e.record.fingerprint, reason)
    letter = _letter(_letter_data(e, REFUSED, reason))
    settled.add(e, f"store refused: {reason} ({e.record.url})",
                {counters.STORE_REFUSED: 1, counters.STORE_DEAD_LETTERS: 1}, letter=letter,
                failure=(REFUSED, f"store {masked(e.store)} refused the record: {reason}"))


def _decoded_parts(raw: Sequence[bytes], max_bytes: int) -> Iterator[list[StoreEntry]]:
    """The entries ``raw`` decoded a part at a time: each part at most ``max_bytes``
    decompressed (or one entry), so a batch of large pages is never decoded at once."""
    part: list[StoreEntry] = []
    size = 0
    for item in raw:
        try:
            entry, n = StoreEntry.decode_sized(item)
        except (ValueError, KeyError, TypeError, zlib.error, BadInput) as exc:
            log.error("dropped an unreadable store entry (%s bytes): %s", len(item), exc)
            continue
        if part and size + n > max_bytes:
            yield part
            part, size = [], 0
        part.append(entry)
        size += n
    if part:
        yield part


def _by_store(entries: Sequence[StoreEntry]) -> dict[str, list[StoreEntry]]:
    groups: dict[str, list[StoreEntry]] = {}
    for e in entries:
        groups.setdefault(e.store, []).append(e)
    return groups


def _failed(rt: StoreDeps, uri: str, group: Sequence[StoreEntry], exc: Exception,
            settled: _Settled) -> None:
    """The store of ``group`` failed. While it is down (:class:`StoreUnavailable`) each
    entry is retried later; past its retries, or at once for any other error (an unknown
    store, a bug: retrying cannot help), it is kept in the dead letters
    (crawler-tasks dead-letters, replay-dead), counted once."""
    s = rt.settings
    down = isinstance(exc, StoreUnavailable)
    again = [e for e in group if down and e.attempts < s.store_max_retries]
    gone = [e for e in group if not (down and e.attempts < s.store_max_retries)]
    for e in again:
        settled.later(backoff(s, e.attempts), e.failed_again())
        settled.add(e, Settlement.KEEP, {counters.STORE_RETRIES: 1})
    if again:
        log.warning("store %s failed for %s records, retry %s in %.1fs: %s", masked(uri), len(again),
                    again[0].attempts + 1, backoff(s, again[0].attempts), exc)
    name = type(exc).__name__
    counts = {counters.STORE_FAILED: 1, counters.STORE_DEAD_LETTERS: 1}
    if not down:
        counts.update({counters.ERRORS: 1, counters.error(name): 1})
    for e in gone:
        log.error("store of %s failed (%s retries): its record goes to the dead letters "
                  "(crawler-tasks dead-letters, replay-dead): %s", e.record.url, e.attempts, exc)
        letter = _letter(_letter_data(e, FAILED, str(exc)))
        line = f"store failed: {exc} ({e.record.url})" if down else f"{name}: {exc} ({e.record.url})"
        settled.add(e, line, counts, letter=letter,
                    failure=(FAILED, f"store {masked(uri)} failed: {exc} ({e.attempts} retries)"))


def page_summary(entry: StoreEntry) -> dict[str, Any]:
    """What a page callback receives: small JSON, never the page itself."""
    r = entry.record
    return {"url": r.url, "status": r.status, "fingerprint": r.fingerprint, "crawl_id": r.crawl_id,
            "depth": r.depth, "items": len(r.items), "store": masked(entry.store), "description": r.description}


def _call_back(rt: StoreDeps, crawl_id: str, due: dict[str, dict[str, Any]]) -> set[str]:
    """Send the page callbacks ``due`` (token -> callback and payload), each taken from the
    staged ones as soon as it is sent: a worker killed part-way leaves only the callbacks it
    had not sent (and at most the one it was sending) to the next delivery of its batch.
    One the broker refuses is logged (its page is stored all the same). Returns the tokens
    taken."""
    taken = set()
    for token, call in due.items():
        try:
            enqueue.publish_callback(rt, call["callback"], call["page"], f"{token}.page")
        except Exception as exc:  # noqa: BLE001 - a broker error must not undo the batch
            log.error("page callback %s for %s not sent: %s", call["callback"]["task"], call["page"]["url"], exc)
            continue
        rt.callbacks.take(crawl_id, [token])
        taken.add(token)
    return taken


def note_finished(rt: StoreDeps) -> int:
    """Note the running crawls found drained (their ``finished`` time); how many."""
    when = now_iso()
    running = rt.crawls.running_ids()
    drained = [cid for cid, n in rt.crawls.outstanding_many(running).items() if n == 0]
    return sum(rt.crawls.finished(cid, when) for cid in drained)


def call_back_done(rt: StoreDeps) -> int:
    """Send the ``on_done`` callback of each crawl that has drained (the worker that takes
    it sends it); how many were sent."""
    sent = 0
    waiting = rt.callbacks.waiting_done()
    for crawl_id, left in rt.crawls.outstanding_many(waiting).items():
        if left:
            continue
        spec = rt.callbacks.take_done(crawl_id)
        if spec is None:
            continue  # another worker took it
        payload = {"crawl_id": crawl_id, "stats": rt.stats.read(crawl_id)}
        try:
            enqueue.publish_callback(rt, spec, payload, f"{crawl_id}.done.{uuid.uuid4().hex[:12]}")
            sent += 1
        except Exception as exc:  # noqa: BLE001 - put back: the next look sends it
            rt.callbacks.await_done(crawl_id, spec)
            log.error("on_done callback %s for crawl %s not sent: %s", spec["task"], crawl_id, exc)
    return sent


def _tell(rt: StoreDeps, entry: StoreEntry, reason: str, description: str) -> None:
    """The error handler hears of a record given up; its follow-ups go through the gate."""
    if rt.program.error_handler is None:
        return
    record = entry.record
    req = CrawlRequest(url=record.url, method=record.method, meta=record.meta, depth=record.depth,
                       crawl_id=record.crawl_id)
    follow, counts = failures.tell(rt.program, failures.failure_of("store", reason, description, req, record.status),
                                   req, rt.limits(req.crawl_id))
    try:
        if counts:
            rt.gate.add_counts(req.crawl_id, counts)
        if follow:
            enqueue.fetches(rt, follow)
    except (redis.RedisError, QueueFull, BrokerUnavailable) as exc:
        log.error("the error handler's follow-ups of %s were not sent: %s", record.url, exc)


class _Settled:
    """The settlements of one batch, applied in an order that can repeat but not lose:
    dead letters and retries are queued before the tokens settle, and a letter whose
    token had already settled (a batch written twice) is taken back."""

    def __init__(self) -> None:
        self.by_crawl: dict[str, list[Settlement]] = {}
        self.letters: dict[str, bytes] = {}
        self.delayed: list[tuple[float, bytes]] = []
        #: Records given up, for the error handler: token -> (entry, reason, description).
        self.failures: dict[str, tuple[StoreEntry, str, str]] = {}
        #: Page callbacks of records written, per crawl: token -> (callback, payload).
        self.callbacks: dict[str, dict[str, dict[str, Any]]] = {}

    def stored(self, entry: StoreEntry) -> None:
        """``entry``'s record is written: its page callback, if it has one, is due."""
        if entry.notify is not None:
            self.callbacks.setdefault(entry.crawl_id, {})[entry.token] = {
                "callback": entry.notify["on_page"], "page": page_summary(entry)}

    def add(self, entry: StoreEntry, how: str, counts: dict[str, int], *, letter: bytes = b"",
            failure: tuple[str, str] | None = None) -> None:
        if how != Settlement.KEEP and entry.counts:  # the page's own counters, once: as it leaves
            counts = {**counts, **{k: counts.get(k, 0) + v for k, v in entry.counts.items()}}
        self.by_crawl.setdefault(entry.crawl_id, []).append(Settlement(entry.token, how, counts))
        if letter:
            self.letters[entry.token] = letter
        if failure is not None:
            self.failures[entry.token] = (entry, *failure)

    def later(self, seconds: float, entry: StoreEntry) -> None:
        self.delayed.append((seconds, entry.encode(compress=True)))  # small while the batch goes on

    def apply(self, rt: StoreDeps) -> None:
        rt.dead_letters.add(*self.letters.values())
        rt.store_queue.delay(self.delayed)
        # Staged before the tokens settle: a worker dying after the settlement leaves them
        # for the next delivery of this batch, which sends them.
        left = {crawl_id: rt.callbacks.stage(crawl_id, due) for crawl_id, due in self.callbacks.items()}
        settled_now: set[str] = set()
        for crawl_id, settlements in self.by_crawl.items():
            live = rt.gate.settle(crawl_id, settlements)
            settled_now.update(s.token for s, was_live in zip(settlements, live) if was_live)
        for crawl_id, due in self.callbacks.items():
            sent = _call_back(rt, crawl_id, {t: c for t, c in due.items()
                                             if t in settled_now or t in left[crawl_id]})
            rt.callbacks.take(crawl_id, [t for t in due if t not in sent])  # the rest: refused, or sent before
        for token, letter in self.letters.items():
            if token not in settled_now:  # settled by an earlier delivery of the same entry
                rt.dead_letters.remove(letter)
        for token, (entry, reason, description) in self.failures.items():
            if token in settled_now:  # once per record, however often its batch was written
                _tell(rt, entry, reason, description)


def housekeeping(rt: StoreDeps) -> None:
    """Once a second, in every worker process: give back the batches of dead writers, move
    due retries, publish the seeds of seed calls that died half-way, note drained crawls
    and send their ``on_done`` callbacks."""
    rt.store_queue.tick()
    enqueue.recover_seed_calls(rt)
    note_finished(rt)
    call_back_done(rt)


def write_turn(rt: StoreDeps, writer: str, *, now: bool = True) -> int:
    """One store task's work: take a batch onto ``writer``'s list (``now``: whatever waits,
    as its task was sent because a batch was due; else only a due batch) and write it, or,
    if nothing is left for it, give up its lease. Returns how many entries it took."""
    s = rt.settings
    raw = rt.store_queue.take(writer, s.store_batch, s.store_flush_s, s.store_lease_s, now=now,
                              max_bytes=s.store_batch_bytes)
    if raw:
        write_batch(rt, writer, raw)
    else:
        rt.store_queue.release(writer)
    return len(raw)


def flush_once(rt: StoreDeps, writer: str, *, now: bool = True) -> int:
    """Housekeeping, then one batch written by ``writer`` here, in this process (tests and
    tools; workers send store tasks instead)."""
    housekeeping(rt)
    return write_turn(rt, writer, now=now)


def dispatch(rt: StoreDeps) -> str | None:
    """Send a store task if a batch is due and no writer is on it (or more full batches
    wait than writers at work); the writer's id, or None. A broker that refuses the
    task gives the lease back at once, so the next look sends it again."""
    s = rt.settings
    writer = uuid.uuid4().hex
    if not rt.store_queue.dispatch(writer, s.store_batch, s.store_flush_s, s.store_lease_s, s.store_writers):
        return None
    try:
        enqueue.publish_writer(rt, writer)
    except Exception:
        rt.store_queue.release(writer)
        raise
    return writer


class Dispatcher:
    """Sends store tasks when batches are due: one thread in each worker process.

    It looks (one script call) every quarter of ``CRAWLER_STORE_FLUSH_S`` (between 20
    and 250 ms), and does the :func:`housekeeping` once a second. Writing is the store
    tasks' (``crawl.store_batch`` on ``crawl.store``), so only the workers that consume
    that queue write to the backends.
    """

    #: Seconds between two rounds of housekeeping.
    TICK_S = 1.0

    def __init__(self, rt: StoreDeps) -> None:
        self.rt = rt
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_tick = 0.0

    def look_once(self) -> str | None:
        """Housekeeping when its second has come, then :func:`dispatch`."""
        if time.monotonic() >= self._next_tick:
            housekeeping(self.rt)
            self._next_tick = time.monotonic() + self.TICK_S
        return dispatch(self.rt)

    def start(self) -> Dispatcher:
        self._thread = threading.Thread(target=self._run, name="crawler-store-dispatcher", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        s = self.rt.settings
        poll = min(max(s.store_flush_s / 4, 0.02), 0.25)
        failures = 0
        while not self._stop.is_set():
            try:
                sent = self.look_once()
                failures = 0
            except redis.RedisError as exc:
                failures += 1
                log.warning("store queue: state Redis failed (%s times): %s", failures, exc)
                self._stop.wait(backoff(s, failures - 1))
                continue
            except Exception:  # a broker that refused the task, or a bug: look again later
                log.exception("store queue: no store task sent")
                self._stop.wait(1.0)
                continue
            if sent is None:
                self._stop.wait(poll)

    def stop(self, *, drain_s: float = 0.0) -> None:
        """Stop the thread; with ``drain_s`` (a worker that serves ``crawl.store``, at its
        warm shutdown), write what waits for up to that long first, as its store tasks
        would have. What is left stays in Redis for the other store workers."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if drain_s > 0:
            drain(self.rt, drain_s)


def drain(rt: StoreDeps, seconds: float) -> int:
    """Write what waits in the store queue here, batch after batch, for up to ``seconds``;
    how many entries were taken."""
    writer, taken = uuid.uuid4().hex, 0
    deadline = time.monotonic() + seconds
    try:
        housekeeping(rt)  # dead writers' batches and due retries join what waits
    except Exception as exc:  # noqa: BLE001 - the others will write it
        log.warning("store queue not drained at shutdown (other workers will): %s", exc)
        return 0
    while time.monotonic() < deadline:
        try:
            n = write_turn(rt, writer)
        except Exception as exc:  # noqa: BLE001 - the others will write it
            log.warning("store queue not drained at shutdown (other workers will): %s", exc)
            break
        if not n:
            break
        taken += n
    return taken


#: Why a dead letter was kept: its store refused the record for good, or could not take it.
REFUSED, FAILED = "refused", "failed"


def _letter_data(e: StoreEntry, kind: str, error: str) -> dict:
    return {"record": e.record.to_dict(), "store": masked(e.store), "kind": kind, "error": error,
            "at": now_iso()}


def _letter(data: dict) -> bytes:
    """A dead letter as kept in Redis (:mod:`crawler_tasks.core.codec`): JSON,
    zlib-compressed above 4 KiB (a page's body makes it tens of KB, and letters pile up
    while a store stays down)."""
    return codec.encode(data)


def _read_letter(raw: bytes) -> dict:
    data = codec.decode(raw)
    data.setdefault("kind", FAILED)  # letters of earlier releases: their store failed
    return data


def dead_letters(rt: StoreDeps, crawl_id: str | None = None) -> list[dict]:
    """The dead letters (newest first), of one crawl or all: ``record``, ``store`` (passwords
    masked), ``kind`` (``refused`` or ``failed``), ``error`` (the backend's reason), ``at``."""
    entries = [_read_letter(raw) for raw in rt.dead_letters.all()]
    return [e for e in entries if crawl_id is None or e["record"]["crawl_id"] == crawl_id]


@dataclass
class Replay:
    """What a replay of the dead letters did: how many it wrote, and the (URL, store, reason)
    of each letter still failing (kept)."""

    written: int = 0
    failing: list[tuple[str, str, str]] = field(default_factory=list)


def replay_dead(rt: StoreDeps, crawl_id: str | None = None, *, to: str | None = None) -> Replay:
    """Write the dead letters (of one crawl) again, to their own store or to ``to``.

    A written one leaves the list and counts ``store/replayed`` (and ``stored``) in its
    crawl. One whose store is down, cannot be opened here (unknown, not configured) or
    refuses the record again stays as it was, and the others go on.
    """
    done = Replay()
    for raw in rt.dead_letters.all():
        entry = _read_letter(raw)
        record = PageRecord.from_dict(entry["record"])
        if crawl_id is not None and record.crawl_id != crawl_id:
            continue
        target = to or entry["store"]
        try:
            refused = write(rt, target, [record])
        except (StoreUnavailable, BadInput) as exc:
            refused = [RecordFailure(record.fingerprint, str(exc))]
        if refused:
            log.info("dead letter %s still not stored: %s", record.url, refused[0].reason)
            done.failing.append((record.url, masked(target), refused[0].reason))
            continue
        rt.dead_letters.remove(raw)
        rt.gate.add_counts(record.crawl_id, {counters.STORE_REPLAYED: 1, counters.STORED: 1})
        done.written += 1
    return done
