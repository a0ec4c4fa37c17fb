"""Store backends, chosen by the scheme of a store URI.

A backend takes records in batches (``upsert`` of a sequence) so that bulk
backends (Elasticsearch ``_bulk``, HBase batches) fit the same interface; it
must be idempotent per fingerprint: a redelivered store task may write the
same record twice, and the store must still hold it once.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..errors import UnknownStore
from ..models import PageRecord


@dataclass(frozen=True)
class RecordFailure:
    """A record a backend refused for good (e.g. an Elasticsearch mapping error): retrying
    the same record cannot help, so it is reported rather than retried."""

    fingerprint: str
    reason: str


class Store(Protocol):
    """What the store stage needs from a backend."""

    def upsert(self, records: Sequence[PageRecord]) -> None:
        """Write ``records``, replacing any with the same fingerprint.

        Raises :class:`~crawler_tasks.errors.StoreUnavailable` when the backend
        cannot take the write now.
        """

    def records(self, crawl_id: str | None = None) -> Iterator[PageRecord]:
        """Every stored record (of one crawl), oldest first."""

    def get(self, fingerprint: str) -> PageRecord | None:
        """The stored record of ``fingerprint``, or None (a recrawl's validators come from it)."""

    def count(self, crawl_id: str | None = None) -> int:
        """How many records are stored (for one crawl)."""

    def close(self) -> None:
        """Release connections."""


def _sqlite(location: str) -> Store:
    from .sqlite import SQLiteStore

    return SQLiteStore(location)


#: scheme -> factory taking the rest of the URI.
BACKENDS: dict[str, Callable[[str], Store]] = {"sqlite": _sqlite}


def open_store(uri: str) -> Store:
    """Open the store for ``uri``: a path (SQLite) or ``scheme://…`` of a known backend."""
    if "://" not in uri:
        return _sqlite(uri)
    scheme, rest = uri.split("://", 1)
    factory = BACKENDS.get(scheme.lower())
    if factory is None:
        close = difflib.get_close_matches(scheme.lower(), BACKENDS, n=1)
        hint = f" (did you mean {close[0]}://?)" if close else ""
        raise UnknownStore(f"unknown store {uri!r}: scheme {scheme!r}{hint}; "
                           f"known: {', '.join(sorted(BACKENDS))}")
    return factory(rest)
