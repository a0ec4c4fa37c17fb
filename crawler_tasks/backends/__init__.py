"""Store backends, chosen by the scheme of a store URI.

A backend takes records in batches (``upsert`` of a sequence) so that bulk
backends (Elasticsearch ``_bulk``, HBase batches) fit the same interface; it
must be idempotent per fingerprint: a batch taken back from a dead worker may write the
same record twice, and the store must still hold it once.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import SplitResult, urlsplit

from ..errors import UnknownStore
from ..models import PageRecord
from ..settings import Settings


@dataclass(frozen=True)
class RecordFailure:
    """A record a backend refused for good (e.g. an Elasticsearch mapping error): retrying
    the same record cannot help, so it is reported rather than retried."""

    fingerprint: str
    reason: str


class Store(Protocol):
    """What the store stage needs from a backend."""

    def upsert(self, records: Sequence[PageRecord]) -> list[RecordFailure]:
        """Write ``records``, replacing any with the same fingerprint.

        Returns the records refused for good (each with its reason); raises
        :class:`~crawler_tasks.errors.StoreUnavailable` when the backend cannot
        take the write now (the caller retries the whole batch: writes are
        idempotent).
        """

    def records(self, crawl_id: str | None = None) -> Iterator[PageRecord]:
        """Every stored record (of one crawl): oldest first in SQLite and Elasticsearch, in
        row-key (site) order in HBase; a write-only store (WARC) raises ``WriteOnlyStore``."""

    def get(self, fingerprint: str) -> PageRecord | None:
        """The stored record of ``fingerprint``, or None (a recrawl's validators come from it)."""

    def count(self, crawl_id: str | None = None) -> int:
        """How many records are stored (for one crawl)."""

    def close(self) -> None:
        """Release connections."""


class FanOut:
    """Several stores as one (``CRAWLER_STORE`` with a comma list): every record goes to
    each; reads (export, a recrawl's validators) come from the first."""

    def __init__(self, stores: Sequence[Store]) -> None:
        self.stores = list(stores)

    def upsert(self, records: Sequence[PageRecord]) -> list[RecordFailure]:
        """Write to every store; a store that is down fails the call (retried as a whole)."""
        failures: dict[str, RecordFailure] = {}
        for store in self.stores:
            for failure in store.upsert(records) or []:
                failures.setdefault(failure.fingerprint, failure)
        return list(failures.values())

    def records(self, crawl_id: str | None = None) -> Iterator[PageRecord]:
        return self.stores[0].records(crawl_id)

    def get(self, fingerprint: str) -> PageRecord | None:
        return self.stores[0].get(fingerprint)

    def count(self, crawl_id: str | None = None) -> int:
        return self.stores[0].count(crawl_id)

    def write_stats(self, crawl_id: str, counters: Mapping[str, int]) -> None:
        for store in self.stores:
            if hasattr(store, "write_stats"):
                store.write_stats(crawl_id, counters)

    def close(self) -> None:
        for store in self.stores:
            store.close()


def _sqlite(uri: str, settings: Settings) -> Store:
    from .sqlite import SQLiteStore

    return SQLiteStore(uri.split("://", 1)[1] if "://" in uri else uri)


def _elasticsearch(uri: str, settings: Settings) -> Store:
    from .elasticsearch import ElasticsearchStore

    return ElasticsearchStore.from_uri(uri, settings)


def _hbase(uri: str, settings: Settings) -> Store:
    from .hbase import HBaseStore

    return HBaseStore.from_uri(uri, settings)


def _warc(uri: str, settings: Settings) -> Store:
    from .warc import WARCStore

    return WARCStore.from_uri(uri, max_bytes=settings.warc_max_bytes)


#: scheme -> factory taking the whole URI and the settings.
BACKENDS: dict[str, Callable[[str, Settings], Store]] = {
    "sqlite": _sqlite, "elasticsearch": _elasticsearch, "elasticsearchs": _elasticsearch,
    "hbase": _hbase, "warc": _warc,
}

#: A comma that starts another URI (``…,scheme://``); a comma inside a path stays.
_NEXT_URI = re.compile(r",\s*(?=[A-Za-z][A-Za-z0-9+.-]*://)")


def split_uris(uri: str) -> list[str]:
    """The store URIs of ``CRAWLER_STORE`` (one, or a comma-separated list)."""
    return [part.strip() for part in _NEXT_URI.split(uri) if part.strip()]


def open_store(uri: str, settings: Settings | None = None) -> Store:
    """Open the store(s) for ``uri``: a path (SQLite), ``scheme://…`` of a known backend,
    or a comma-separated list of them (see :class:`FanOut`)."""
    settings = settings or Settings()
    uris = split_uris(uri)
    if not uris:
        raise UnknownStore("empty store URI")
    stores = [_open_one(u, settings) for u in uris]
    return stores[0] if len(stores) == 1 else FanOut(stores)


def _open_one(uri: str, settings: Settings) -> Store:
    if "://" not in uri:
        return _sqlite(uri, settings)
    scheme = uri.split("://", 1)[0]
    factory = BACKENDS.get(scheme.lower())
    if factory is None:
        close = difflib.get_close_matches(scheme.lower(), BACKENDS, n=1)
        hint = f" (did you mean {close[0]}://?)" if close else ""
        raise UnknownStore(f"unknown store {mask(uri)!r}: scheme {scheme!r}{hint}; "
                           f"known: {', '.join(sorted(BACKENDS))}")
    return factory(uri, settings)


#: What a store URI with a port that is not a number from 0 to 65535 is told.
BAD_PORT = "bad port: the port must be a number from 1 to 65535"


def split_uri(uri: str, bad: Callable[[str], UnknownStore]) -> tuple[SplitResult, int | None]:
    """``uri`` split, and its port read; a URI :func:`urllib.parse.urlsplit` cannot take
    raises ``bad(problem)`` (the backend's one-line :class:`UnknownStore`)."""
    try:
        parts = urlsplit(uri)
        return parts, parts.port
    except ValueError as exc:
        raise bad(BAD_PORT if "port" in str(exc).lower() else str(exc)) from None


def mask(uri: str) -> str:
    """``uri`` with whatever may be a password hidden.

    Everything between the first ``:`` after ``//`` and the last ``@`` goes, so
    that a password holding an unencoded ``/``, ``?`` or ``#`` (which would
    end the host part for a URL parser) is hidden all the same.
    """
    scheme, sep, rest = uri.partition("://")
    if not sep or "@" not in rest:
        return uri
    userinfo, _, host = rest.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{host}"
