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

Around the batch: :mod:`.dispatcher` sends the store tasks, :mod:`.notify` sends what a
batch tells the calling app and the error handler, :mod:`.dead_letters` reads and
replays the letters, :mod:`.statistics` writes the crawls' counters.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..backends import RecordFailure
from ..core import codec, counters
from ..core.errors import BadInput, StoreUnavailable
from ..core.models import PageRecord
from ..core.store_uris import masked
from ..core.timing import backoff, now_iso
from ..state.gate import Fate, Settlement
from ..state.store_queue import StoreEntry
from . import notify

if TYPE_CHECKING:
    from .deps import StoreDeps

log = logging.getLogger(__name__)

#: What a record's token is followed by for its change callback (``on_change``).
CHANGE = ":change"


def write(rt: StoreDeps, uri: str, records: Sequence[PageRecord]) -> list[RecordFailure]:
    """Upsert ``records`` into the store ``uri`` (every backend of a comma list) in one
    batch; returns the records a backend refused for good (e.g. an Elasticsearch mapping
    error: retrying cannot help them). :class:`StoreUnavailable` propagates."""
    return rt.store(uri).upsert(records) or []


def write_batch(rt: StoreDeps, consumer: str, raw: Sequence[bytes]) -> dict[str, int]:
    """Write the store entries ``raw`` that ``consumer`` took, one upsert per store URI,
    then settle each: written, refused for good (kept in the dead letters with the
    backend's reason), put back with backoff while its store is down, or, past
    ``CRAWLER_STORE_MAX_RETRIES``, kept in the dead letters; each counted once. Only
    then is the taken list released. Returns the batch's records per crawl."""
    settled = _Settled()
    unreadable: list[bytes] = []
    crawls: dict[str, int] = {}
    for part in _decoded_parts(raw, rt.settings.store_batch_bytes, unreadable):
        for entry in part:
            crawls[entry.crawl_id] = crawls.get(entry.crawl_id, 0) + 1
        # A backend's request for a large record costs several times its body: it counts
        # as one of the process's large bodies.
        with rt.large_bodies.permit() as permit:
            if any(e.record.large for e in part) and not permit.take():
                log.warning("a store batch with a large record waited %.0fs for a large-body permit: "
                            "writing it anyway", permit.wait_s)
            _write_part(rt, consumer, part, settled)
        del part  # not held while the next part decodes
    for item in unreadable:
        _set_aside(rt, item, settled)
    settled.apply(rt, consumer)
    rt.store_queue.release(consumer)
    return crawls


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
                settled.add(e, Fate.END, {counters.STORED: 1})
                settled.stored(e)
            else:
                _refused(e, reason, settled)


def _refused(e: StoreEntry, reason: str, settled: _Settled) -> None:
    """A backend refused ``e``'s record for good (retrying the same record cannot help):
    it goes to the dead letters with the backend's reason, for a replay elsewhere."""
    log.error("store %s refused %s (%s), kept in the dead letters (crawler-tasks dead-letters, "
              "replay-dead --to): %s", masked(e.store), e.record.url, e.record.fingerprint, reason)
    letter = _letter(e, REFUSED, reason)
    settled.add(e, Fate.FAILED, {counters.STORE_REFUSED: 1, counters.STORE_DEAD_LETTERS: 1},
                error=f"store refused: {reason} ({e.record.url})", letter=letter,
                failure=(REFUSED, f"store {masked(e.store)} refused the record: {reason}"))


def _decoded_parts(raw: Sequence[bytes], max_bytes: int,
                   unreadable: list[bytes]) -> Iterator[list[StoreEntry]]:
    """The entries ``raw`` decoded a part at a time: each part at most ``max_bytes``
    decompressed (or one entry), so a batch of large pages is never decoded at once; what
    cannot be decoded goes to ``unreadable``."""
    part: list[StoreEntry] = []
    size = 0
    for item in raw:
        try:
            entry, n = StoreEntry.decode_sized(item)
        except UNREADABLE as exc:
            log.error("an unreadable store entry (%s bytes: %s): set aside with the unreadable dead "
                      "letters", len(item), exc)
            unreadable.append(item)
            continue
        if part and size + n > max_bytes:
            yield part
            part, size = [], 0
        part.append(entry)
        size += n
    if part:
        yield part


#: What decoding a store-queue entry or a dead letter raises when it is damaged.
UNREADABLE = (ValueError, KeyError, TypeError, AttributeError, *codec.DAMAGED, BadInput)
#: The token and crawl of an entry whose head is readable as text though the rest is not.
_TOKEN = re.compile(rb'"t":\s*"([^"\\]+)"')
_CRAWL = re.compile(rb'"c":\s*"([^"\\]+)"')


def _set_aside(rt: StoreDeps, raw: bytes, settled: _Settled) -> None:
    """Keep an unreadable entry on the unreadable list and let its page leave its crawl
    (counted ``store/unreadable``), when its token and crawl can still be read."""
    rt.dead_letters.unreadable(raw)
    try:
        head = codec.decode_head(raw)[0]
        token, crawl_id = str(head["t"]), str(head["c"])
    except (*UNREADABLE, IndexError):
        text = raw if raw[:1] == b"{" else b""
        token_match, crawl_match = _TOKEN.search(text), _CRAWL.search(text)
        if token_match is None or crawl_match is None:
            log.error("an unreadable store entry names no token: its crawl may not drain")
            return
        token, crawl_id = token_match.group(1).decode(), crawl_match.group(1).decode()
    settled.by_crawl.setdefault(crawl_id, []).append(
        Settlement(token, Fate.FAILED, {counters.STORE_UNREADABLE: 1},
                   error=f"store entry unreadable, set aside ({token})"))


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
        settled.add(e, Fate.KEEP, {counters.STORE_RETRIES: 1})
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
        letter = _letter(e, FAILED, str(exc))
        line = f"store failed: {exc} ({e.record.url})" if down else f"{name}: {exc} ({e.record.url})"
        settled.add(e, Fate.FAILED, counts, error=line, letter=letter,
                    failure=(FAILED, f"store {masked(uri)} failed: {exc} ({e.attempts} retries)"))


class _Settled:
    """The settlements of one batch, applied in an order that can repeat but not lose:
    dead letters and retries are queued before the tokens settle, and a letter whose
    token had already settled (a batch written twice) is taken back."""

    def __init__(self) -> None:
        self.by_crawl: dict[str, list[Settlement]] = {}
        #: Dead letters of this batch: token -> (crawl id, letter).
        self.letters: dict[str, tuple[str, bytes]] = {}
        self.delayed: list[tuple[float, bytes]] = []
        #: Records given up, for the error handler: token -> (entry, reason, description).
        self.failures: dict[str, tuple[StoreEntry, str, str]] = {}
        #: Page callbacks of records written, per crawl: token -> (callback, payload).
        self.callbacks: dict[str, dict[str, dict[str, Any]]] = {}

    def stored(self, entry: StoreEntry) -> None:
        """``entry``'s record is written: its page callback, and the change callback of a
        revisit that found it changed, are due (the latter under ``<token>:change``)."""
        asks = entry.notify or {}
        due = self.callbacks.setdefault(entry.crawl_id, {})
        if "on_page" in asks:
            due[entry.token] = {"callback": asks["on_page"], "page": notify.page_summary(entry)}
        if "on_change" in asks and entry.record.changed is True:
            due[f"{entry.token}{CHANGE}"] = {"callback": asks["on_change"], "page": notify.change_summary(entry)}

    def add(self, entry: StoreEntry, fate: Fate, counts: dict[str, int], *, error: str = "",
            letter: bytes = b"", failure: tuple[str, str] | None = None) -> None:
        """Settle ``entry`` as ``fate`` (``error``: the line a failed one leaves), with its
        dead ``letter`` and the ``failure`` the error handler hears of, if any."""
        if fate is not Fate.KEEP and entry.counts:  # the page's own counters, once: as it leaves
            counts = {**counts, **{k: counts.get(k, 0) + v for k, v in entry.counts.items()}}
        self.by_crawl.setdefault(entry.crawl_id, []).append(Settlement(entry.token, fate, counts, error))
        if letter:
            self.letters[entry.token] = (entry.crawl_id, letter)
        if failure is not None:
            self.failures[entry.token] = (entry, *failure)

    def later(self, seconds: float, entry: StoreEntry) -> None:
        self.delayed.append((seconds, entry.encode()))

    def apply(self, rt: StoreDeps, consumer: str) -> None:
        """Apply the settlements of ``consumer``'s batch (see the class docstring)."""
        letters = list(self.letters.items())
        over = rt.dead_letters.add(*(raw for _, (_, raw) in letters))
        for token, (crawl_id, _) in letters[len(letters) - over:] if over else ():
            log.error("dead letter of %s not kept: %s dead letters wait already (CRAWLER_DEAD_LETTERS_MAX)",
                      token, rt.dead_letters.max_letters)
            rt.gate.add_counts(crawl_id, {counters.STORE_DEAD_LETTERS_DROPPED: 1})
        rt.store_queue.delay(consumer, self.delayed)
        # Staged before the tokens settle: a worker dying after the settlement leaves them
        # for the next delivery of this batch, which sends them.
        left = {crawl_id: rt.callbacks.stage(crawl_id, due) for crawl_id, due in self.callbacks.items()}
        settled_now: set[str] = set()
        for crawl_id, settlements in self.by_crawl.items():
            live = rt.gate.settle(crawl_id, settlements)
            settled_now.update(s.token for s, was_live in zip(settlements, live) if was_live)
        for crawl_id, due in self.callbacks.items():
            sent = notify.call_back(rt, crawl_id, {t: c for t, c in due.items()
                                             if t.removesuffix(CHANGE) in settled_now or t in left[crawl_id]})
            rt.callbacks.take(crawl_id, [t for t in due if t not in sent])  # the rest: refused, or sent before
        for token, (_, letter) in self.letters.items():
            if token not in settled_now:  # settled by an earlier delivery of the same entry
                rt.dead_letters.remove(letter)
        for token, (entry, reason, description) in self.failures.items():
            if token in settled_now:  # once per record, however often its batch was written
                notify.tell(rt, entry, reason, description)


#: Why a dead letter was kept: its store refused the record for good, or could not take it.
REFUSED, FAILED = "refused", "failed"


def _letter(e: StoreEntry, kind: str, error: str) -> bytes:
    """The dead letter of ``e``'s record as kept in Redis (:mod:`crawler_tasks.core.codec`):
    JSON, compressed above 4 KiB (a page's body makes it tens of KB, and letters pile up
    while a store stays down); read by :mod:`crawler_tasks.stages.dead_letters`."""
    return codec.encode({"record": e.record.to_dict(), "store": masked(e.store), "kind": kind,
                         "error": error, "at": now_iso()})
