"""Store backends, chosen by the scheme of a store URI.

A backend takes records in batches (``upsert`` of a sequence) so that bulk
backends (Elasticsearch ``_bulk``, HBase batches) fit the same interface; it
must be idempotent per fingerprint: a batch taken back from a dead worker may write the
same record twice, and the store must still hold it once.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping, Sequence

from ..core.errors import UnknownStore
from ..core.models import PageRecord
from ..core.settings import Settings
from ..core.store_uris import mask, split_uris, sqlite_path
from .base import RecordFailure, Store

__all__ = ["BACKENDS", "FanOut", "RecordFailure", "Store", "open_store"]


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

    def get(self, fingerprint: str, crawl_id: str | None = None) -> PageRecord | None:
        return self.stores[0].get(fingerprint, crawl_id)

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

    path = sqlite_path(uri)
    assert path is not None  # reached for a path or sqlite:// only
    return SQLiteStore(path)


def _elasticsearch(uri: str, settings: Settings) -> Store:
    from .elasticsearch import ElasticsearchStore

    return ElasticsearchStore.from_uri(uri, settings)


def _hbase(uri: str, settings: Settings) -> Store:
    from .hbase import HBaseStore

    return HBaseStore.from_uri(uri, settings)


def _kafka(uri: str, settings: Settings) -> Store:
    from .kafka import KafkaStore

    return KafkaStore.from_uri(uri)


def _warc(uri: str, settings: Settings) -> Store:
    from .warc import WARCStore

    return WARCStore.from_uri(uri, max_bytes=settings.warc_max_bytes)


#: scheme -> factory taking the whole URI and the settings.
BACKENDS: dict[str, Callable[[str, Settings], Store]] = {
    "sqlite": _sqlite, "elasticsearch": _elasticsearch, "elasticsearchs": _elasticsearch,
    "hbase": _hbase, "warc": _warc, "kafka": _kafka, "kafkas": _kafka,
}

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
