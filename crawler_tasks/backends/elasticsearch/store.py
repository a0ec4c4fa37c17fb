"""The Elasticsearch store: page records in one index, crawl statistics in ``<index>-stats``,
the items feed in ``<index>-items-<type>`` (:mod:`~crawler_tasks.backends.elasticsearch.items`).

What the documents are: :mod:`~crawler_tasks.backends.elasticsearch.documents`;
how a batch is written and its failed items read:
:mod:`~crawler_tasks.backends.elasticsearch.bulk`. Each index is created on its
first write (never by a read) unless it exists.

Reads: :meth:`~ElasticsearchStore.get` is real-time (the GET API sees writes at
once); :meth:`~ElasticsearchStore.count` and :meth:`~ElasticsearchStore.records`
refresh the index first so that a read after a write sees it (skipped when the
user may not refresh: counts may then lag by the refresh interval).
``records`` scrolls sorted by ``fetched_at`` then fingerprint: oldest first as
the store protocol asks; a sorted scroll costs a little more than ``_doc``
order, which an export does not notice.

Client: one :class:`~elasticsearch.Elasticsearch` per store and process (a
forked child builds its own), shared by the threads of the threads pool (its
connection pool blocks a thread until a connection is free). elasticsearch-py
9 talks only to Elasticsearch 9 servers (an 8.x server refuses its
``compatible-with=9`` headers: the error says so). Client errors become one-line
:class:`StoreUnavailable` (:mod:`~crawler_tasks.backends.elasticsearch.errors`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import elasticsearch
from elasticsearch import ApiError, Elasticsearch, TransportError, helpers

from ...core.errors import BadInput, StoreUnavailable
from ...core.items import ItemRow
from ...core.models import PageRecord
from ..base import RecordFailure
from . import bulk
from .documents import (
    PAGES_MAPPING,
    RECORD_SORT,
    STATS_MAPPING,
    STATS_SUFFIX,
    crawl_query,
    id_problem,
    stats_document,
)
from .errors import describe, error_of
from .items import ITEMS_MAPPING, ItemFeed, item_actions
from .uri import Target, parse_uri

if TYPE_CHECKING:
    from ...core.settings import Settings

log = logging.getLogger(__package__)  # the store's one logger: crawler_tasks.backends.elasticsearch

REQUEST_TIMEOUT = 30.0  # seconds one HTTP request may take
TRANSPORT_RETRIES = 3  # whole requests retried by the client (connection errors, 429/502/503/504)
ITEM_RETRIES = 3  # bulk items retried after a 429 or 5xx, inside one upsert
RETRY_BACKOFF = 0.5  # seconds before the first item retry; doubles on each retry
CONNECTIONS = 10  # least HTTP connections per process (more with more worker threads)
SCAN_SIZE = 500  # hits per scroll page
SCROLL = "2m"  # how long a scroll stays open between pages


class ElasticsearchStore:
    """Page records in an Elasticsearch index, one document per fingerprint (see the package doc)."""

    def __init__(self, target: Target, *, request_timeout: float = REQUEST_TIMEOUT,
                 transport_retries: int = TRANSPORT_RETRIES, item_retries: int = ITEM_RETRIES,
                 retry_backoff: float = RETRY_BACKOFF, connections: int = CONNECTIONS) -> None:
        self.target = target
        self.index = target.index
        self.stats_index = target.index + STATS_SUFFIX
        self.request_timeout = request_timeout
        self.transport_retries = transport_retries
        self.item_retries = item_retries
        self.retry_backoff = retry_backoff
        self.connections = connections
        self._lock = threading.Lock()
        self._ensure_lock = threading.Lock()
        self._client: Elasticsearch | None = None
        self._pid = 0
        self._ready: set[str] = set()
        self.feed = ItemFeed(self.index)

    @classmethod
    def from_uri(cls, uri: str, settings: Settings, **options: Any) -> ElasticsearchStore:
        """A store for ``uri``, authenticated by ``settings.es_api_key`` unless the URI has a user.

        ``options`` go to the constructor (timeouts, retries; tests shorten the backoff).
        Raises :class:`UnknownStore` for a malformed URI; connects only when first used.
        """
        options.setdefault("connections", max(CONNECTIONS, settings.worker_concurrency))
        return cls(parse_uri(uri, settings.es_api_key), **options)

    def __repr__(self) -> str:
        return f"<ElasticsearchStore {self.target.display}>"

    # ---- connection

    @property
    def client(self) -> Elasticsearch:
        """This process's client (built on first use; a forked child builds its own)."""
        pid = os.getpid()
        with self._lock:
            if self._client is None or self._pid != pid:
                self._client, self._pid = self._connect(), pid
                self._ready = set()
            return self._client

    def _connect(self) -> Elasticsearch:
        t = self.target
        options: dict[str, Any] = {
            "request_timeout": self.request_timeout, "max_retries": self.transport_retries,
            "connections_per_node": self.connections}
        if t.username is not None:
            options["basic_auth"] = (t.username, t.password or "")
        elif t.api_key is not None:
            options["api_key"] = t.api_key
        if t.ca_certs:
            options["ca_certs"] = t.ca_certs
        return Elasticsearch(t.url, **options)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Client errors become one-line :class:`StoreUnavailable` (the store queue retries the batch)."""
        try:
            yield
        except (ApiError, TransportError, helpers.ScanError) as exc:
            detail = describe(exc, self.target, self.request_timeout)
            raise StoreUnavailable(f"elasticsearch store {self.target.display}: {detail}") from None

    def _ensure(self, index: str, mappings: Mapping[str, Any]) -> None:
        """Create ``index`` with ``mappings`` unless it exists (once per process)."""
        if index in self._ready:
            return
        with self._ensure_lock:
            if index in self._ready:
                return
            client = self.client
            try:
                exists = client.indices.exists(index=index)
            except elasticsearch.BadRequestError:
                client.info()  # a HEAD's 400 has no body; GET / says why (an 8.x server, a 9.x client)
                raise
            if not exists:
                try:
                    client.indices.create(index=index, mappings=mappings)
                    log.info("elasticsearch store %s: created index %s", self.target.display, index)
                except elasticsearch.BadRequestError as exc:
                    # Another worker created it between our check and our create: fine.
                    if error_of(exc.body)[0] != "resource_already_exists_exception":
                        raise
            self._ready.add(index)

    def _refresh(self, index: str) -> bool:
        """Make recent writes searchable; False when the index does not exist."""
        try:
            self.client.indices.refresh(index=index)
        except elasticsearch.NotFoundError:
            return False
        except elasticsearch.AuthorizationException:
            pass  # a read-only user: counts may lag by the refresh interval
        return True

    # ---- writes

    def upsert(self, records: Sequence[PageRecord]) -> list[RecordFailure]:
        """Write ``records`` (id ``<crawl id>:<fingerprint>``); return those refused for good.

        Raises :class:`StoreUnavailable` when the cluster cannot be reached,
        refuses the credentials, or still rejects items (429, 5xx) after the
        retries: the whole batch may then be written again.
        """
        failures: list[RecordFailure] = []
        valid = []
        for record in records:
            problem = id_problem(record.fingerprint) or id_problem(bulk.doc_id(record.crawl_id, record.fingerprint))
            if problem:
                failures.append(RecordFailure(str(record.fingerprint), problem))
                continue
            valid.append(record)
        if not valid:
            return failures
        with self._errors():
            self._ensure(self.index, PAGES_MAPPING)
            actions = [bulk.index_action(self.index, record) for record in valid] + self._item_actions(valid)
            refused, pending = bulk.send(self.client, actions, item_retries=self.item_retries,
                                         retry_backoff=self.retry_backoff)
        if pending:
            if bulk.index_missing(pending):
                self._ready.discard(self.index)  # deleted under us: create it again on the retry
            raise StoreUnavailable(f"elasticsearch store {self.target.display}: "
                                   f"{bulk.unwritten(pending, len(actions), self.item_retries)}")
        return failures + refused

    def _item_actions(self, records: Sequence[PageRecord]) -> list[dict[str, Any]]:
        """The items feed's share of a batch: each record's items written, and what an earlier
        version of its page held that they do not replace deleted."""
        if not self.feed.may_exist(self.client, records):
            return []
        previous = self.feed.previous(self.client, records)
        actions = [a for r in records
                   for a in item_actions(self.index, r, previous.get(bulk.doc_id(r.crawl_id, r.fingerprint), ()))]
        for index in {a["_index"] for a in actions if a["_op_type"] == "index"}:
            self._ensure(index, ITEMS_MAPPING)
            self.feed.noted()
        return actions

    def item_rows(self, crawl_id: str | None = None, kind: str | None = None) -> Iterator[ItemRow]:
        """The items feed (of one crawl, of one type), by crawl, page fetch time and position."""
        with self._errors():
            yield from self.feed.rows(self.client, crawl_id, kind)

    def item_counts(self, crawl_id: str | None = None) -> dict[tuple[str, str], int]:
        """Items per (crawl, type), in order of crawl and type."""
        counts: dict[tuple[str, str], int] = {}
        for row in self.item_rows(crawl_id):
            counts[(row.crawl_id, row.type)] = counts.get((row.crawl_id, row.type), 0) + 1
        return dict(sorted(counts.items()))

    def write_stats(self, crawl_id: str, counters: Mapping[str, int]) -> None:
        """Replace the statistics document of ``crawl_id`` in ``<index>-stats`` with ``counters``.

        ``counters`` are the crawl's cumulative counters (``total_num``,
        ``status/200``...), so each call is a full snapshot and the last one wins.
        """
        problem = id_problem(crawl_id)
        if problem:
            raise BadInput(f"crawl_id: {problem.removeprefix('invalid_id: ')}")
        doc = stats_document(crawl_id, counters, datetime.now(UTC))
        with self._errors():
            self._ensure(self.stats_index, STATS_MAPPING)
            self.client.index(index=self.stats_index, id=crawl_id, document=doc)

    # ---- reads

    def read_stats(self, crawl_id: str) -> dict[str, Any] | None:
        """The statistics document of ``crawl_id``, or None."""
        with self._errors():
            try:
                return dict(self.client.get(index=self.stats_index, id=crawl_id)["_source"])
            except elasticsearch.NotFoundError:
                return None

    def records(self, crawl_id: str | None = None) -> Iterator[PageRecord]:
        """Every stored record (of one crawl), oldest ``fetched_at`` first."""
        with self._errors():
            if not self._refresh(self.index):
                return
            hits = helpers.scan(self.client, index=self.index, preserve_order=True, size=SCAN_SIZE,
                                scroll=SCROLL, query={"query": crawl_query(crawl_id), "sort": RECORD_SORT})
            for hit in hits:
                yield PageRecord.from_dict(hit["_source"])

    def get(self, fingerprint: str, crawl_id: str | None = None) -> PageRecord | None:
        """The record of ``fingerprint`` in ``crawl_id`` (real-time: no refresh needed), or
        without a crawl the latest of any crawl (a search: as of the last refresh); None."""
        if crawl_id is None:
            return self._latest(fingerprint)
        doc = bulk.doc_id(crawl_id, fingerprint)
        if id_problem(doc):
            return None
        with self._errors():
            try:
                hit = self.client.get(index=self.index, id=doc)
            except elasticsearch.NotFoundError:
                return None
        return PageRecord.from_dict(hit["_source"])

    def _latest(self, fingerprint: str) -> PageRecord | None:
        with self._errors():
            try:
                found = self.client.search(index=self.index, query={"term": {"fingerprint": fingerprint}},
                                           sort=[{"fetched_at": {"order": "desc", "unmapped_type": "date"}}],
                                           size=1)
            except elasticsearch.NotFoundError:
                return None
        hits = found["hits"]["hits"]
        return PageRecord.from_dict(hits[0]["_source"]) if hits else None

    def count(self, crawl_id: str | None = None) -> int:
        """How many records are stored (for one crawl), after a refresh."""
        with self._errors():
            if not self._refresh(self.index):
                return 0
            return int(self.client.count(index=self.index, query=crawl_query(crawl_id))["count"])

    def close(self) -> None:
        """Close this process's connections (a later call connects again)."""
        with self._lock:
            client, self._client = self._client, None
            mine = self._pid == os.getpid()
            self._ready = set()
        if client is not None and mine:
            client.close()
