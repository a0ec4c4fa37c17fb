"""Dead letters: the records no store took, listed and written again (``crawler-tasks
dead-letters`` and ``replay-dead``).

A letter is a record with its store (passwords masked), why it was kept (``refused``: the
backend refused it for good; ``failed``: its store stayed down past
``CRAWLER_STORE_MAX_RETRIES``, or could not be opened) and when. The list is read a page
at a time (:meth:`~crawler_tasks.state.dead_letters.DeadLetters.walk`); a letter that cannot
be read is set aside on the unreadable list and counted, and the others go on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..backends import RecordFailure
from ..core import codec, counters
from ..core.errors import BadInput, StoreUnavailable
from ..core.models import PageRecord
from ..core.store_uris import masked
from .store import UNREADABLE, write

if TYPE_CHECKING:
    from .deps import StoreDeps

log = logging.getLogger(__name__)

def read_letter(raw: bytes) -> tuple[dict[str, Any], PageRecord]:
    """A letter's fields and its record; raises one of :data:`~crawler_tasks.stages.store.UNREADABLE` for what is not one."""
    data = codec.decode(raw)
    record = PageRecord.from_dict(data["record"])
    for name in ("kind", "store", "error", "at"):
        data.setdefault(name, "")
    return data, record


def dead_letters(rt: StoreDeps, crawl_id: str | None = None) -> list[dict[str, Any]]:
    """The dead letters, of one crawl or all, newest first: ``record``, ``store`` (passwords
    masked), ``kind`` (``refused`` or ``failed``), ``error`` (the backend's reason), ``at``.
    One that cannot be read is set aside (``rt.dead_letters.unreadable_count()``)."""
    out = []
    for raw in rt.dead_letters.walk():
        read = _read_or_set_aside(rt, raw)
        if read is not None and (crawl_id is None or read[1].crawl_id == crawl_id):
            out.append(read[0])
    out.reverse()
    return out


@dataclass
class Replay:
    """What a replay of the dead letters did: how many it wrote, the (URL, store, reason)
    of each letter still failing (kept), and how many could not be read (set aside)."""

    written: int = 0
    failing: list[tuple[str, str, str]] = field(default_factory=list)
    unreadable: int = 0


def replay_dead(rt: StoreDeps, crawl_id: str | None = None, *, to: str | None = None) -> Replay:
    """Write the dead letters (of one crawl) again, oldest first, to their own store or to ``to``.

    A written one leaves the list and counts ``store/replayed`` (and ``stored``) in its
    crawl. One whose store is down, cannot be opened here (unknown, not configured) or
    refuses the record again stays as it was, and the others go on; one that cannot be
    read is set aside.
    """
    done = Replay()
    for raw in rt.dead_letters.walk():
        read = _read_or_set_aside(rt, raw)
        if read is None:
            done.unreadable += 1
            continue
        entry, record = read
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


def _read_or_set_aside(rt: StoreDeps, raw: bytes) -> tuple[dict[str, Any], PageRecord] | None:
    try:
        return read_letter(raw)
    except UNREADABLE as exc:
        log.error("a dead letter of %s bytes could not be read (%s: %s): set aside with the "
                  "unreadable ones", len(raw), type(exc).__name__, exc)
        rt.dead_letters.set_aside(raw)
        return None
