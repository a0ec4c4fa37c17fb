"""Elasticsearch store: page records in one index, crawl statistics in ``<index>-stats``.

URIs: ``elasticsearch://[user:password@]host[:9200]/index`` (plain HTTP) and
``elasticsearchs://…`` (TLS, certificates verified; ``?ca_certs=/path/ca.pem``
names a private CA). Without ``user:password`` the store sends
``CRAWLER_ES_API_KEY`` when it is set (the encoded key Elasticsearch returns, or
``id:key``); credentials in the URI win, being the more specific. One host per
URI: ``CRAWLER_STORE`` already uses commas to list stores.

Writes go through ``helpers.streaming_bulk`` with the fingerprint as document
id, so a redelivered batch overwrites the same documents. Bulk items that fail
with 429 or 5xx are retried inside the call with backoff; if some still fail,
:class:`StoreUnavailable` makes the store queue retry the whole batch (safe:
writes are idempotent). Any other 4xx item (``document_parsing_exception`` on
servers since 8.8, ``mapper_parsing_exception`` before, a strict mapping...) is
the record's own fault and comes back as a :class:`RecordFailure`; the rest of
the batch is stored. ``raise_on_error=False`` is required: with ``True`` the
helper raises on the first 429 item before retrying it (elasticsearch-py#864).

The page index is created on first write (never by a read) with
:data:`PAGES_MAPPING`; an index that exists already is used as it is, so an
operator may create it beforehand with other settings (shards, ``index.codec:
best_compression`` for the bodies). Mapping choices:

* ``"dynamic": false``: a field a later ``PageRecord`` gains is kept in
  ``_source`` but not indexed, instead of failing every record (``strict``) or
  guessing a type (``true``).
* keyword ``url``, ``fingerprint``, ``crawl_id``, ``content_type``, ``method``,
  ``encoding``, ``redirect_to``, each with ``ignore_above: 8191``: Lucene refuses
  a term over 32,766 bytes and Elasticsearch then fails the whole document
  ("immense term"); 8,191 characters is the longest that always fits (4 bytes a
  character), so a hostile 40 KB ``Content-Type`` or ``Location`` is stored in
  ``_source`` and merely not searchable.
* integer ``status``, ``depth``; ``size`` is a ``long`` (a byte count, and
  ``CRAWLER_DOWNLOAD_MAXSIZE`` has no ceiling); boolean ``truncated``; date
  ``fetched_at`` (ISO 8601, the default ``strict_date_optional_time``).
* text ``title``, ``text``, ``description`` (standard analyzer, which cuts
  tokens at 255 characters, so no term limit).
* ``body``: ``{"type": "text", "index": false}``: kept in ``_source`` only.
  Not keyword: a keyword has doc values by default, and doc values share the
  32,766-byte limit, so a 10 MB page would fail its record; a keyword with
  ``index`` and ``doc_values`` both off is accepted by 8.x/9.x too (the mapper
  skips a field with nothing to build) but says the same thing less plainly. A
  text field never has doc values, and unindexed it builds no terms at all.
* ``headers`` and ``meta``: ``flattened`` (one mapped field however many keys
  sites send, so no mapping explosion), ``ignore_above: 8191`` for the same
  reason as keywords.
* ``links``: keyword, indexed (a ``term`` query finds every page linking to a
  URL, the reason to keep links in a search engine) but ``doc_values: false``
  (nobody sorts or aggregates on a page's thousand links, and their doc values
  would be a large share of the index), ``ignore_above: 8191`` as above.

Reads: :meth:`~ElasticsearchStore.get` is real-time (the GET API sees writes at
once); :meth:`~ElasticsearchStore.count` and :meth:`~ElasticsearchStore.records`
refresh the index first so that a read after a write sees it (skipped when the
user may not refresh: counts may then lag by the refresh interval).
``records`` scrolls sorted by ``fetched_at`` then fingerprint: oldest first as
the store protocol asks; a sorted scroll costs a little more than ``_doc``
order, which an export does not notice.

Statistics: :meth:`~ElasticsearchStore.write_stats` writes one document per
crawl (id = crawl id) into ``<index>-stats`` (:data:`STATS_MAPPING`): long
``total_num`` / ``total_request_size`` / ``total_response_size``, ``status``
an object of longs (``status/200`` becomes ``status.200``, so sums and ranges
work), every other counter in a ``flattened`` ``counters`` field, date
``updated_at``. Each call replaces the document with the snapshot it is given.

Client: one :class:`~elasticsearch.Elasticsearch` per store and process (a
forked child builds its own), shared by the threads of the threads pool (its
connection pool blocks a thread until a connection is free). elasticsearch-py
9 talks only to Elasticsearch 9 servers (an 8.x server refuses its
``compatible-with=9`` headers: the error says so); ``retry_on_status`` of
``streaming_bulk`` needs elasticsearch-py 8.16 or later.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote

import elasticsearch
from elasticsearch import ApiError, Elasticsearch, TransportError, helpers

from ..core.counters import STATUS, TOTAL_NUM, TOTAL_REQUEST_SIZE, TOTAL_RESPONSE_SIZE
from ..core.errors import BadInput, StoreUnavailable, UnknownStore
from ..core.models import PageRecord
from ..core.store_uris import mask
from .base import BAD_PORT, RecordFailure, split_uri

if TYPE_CHECKING:
    from ..core.settings import Settings

__all__ = ["PAGES_MAPPING", "STATS_MAPPING", "ElasticsearchStore", "Target", "parse_uri"]

log = logging.getLogger(__name__)

#: URI scheme -> HTTP scheme.
SCHEMES = {"elasticsearch": "http", "elasticsearchs": "https"}
DEFAULT_PORT = 9200
URI_OPTIONS = ("ca_certs",)
REQUEST_TIMEOUT = 30.0  # seconds one HTTP request may take
TRANSPORT_RETRIES = 3  # whole requests retried by the client (connection errors, 429/502/503/504)
ITEM_RETRIES = 3  # bulk items retried after a 429 or 5xx, inside one upsert
RETRY_BACKOFF = 0.5  # seconds before the first item retry; doubles on each retry
MAX_BACKOFF = 4.0  # seconds, longest wait between item retries
CONNECTIONS = 10  # least HTTP connections per process (more with more worker threads)
CHUNK_SIZE = 500  # records per _bulk request
MAX_CHUNK_BYTES = 32 * 1024 * 1024  # bytes per _bulk request (the server's default cap is 100 MiB)
SCAN_SIZE = 500  # hits per scroll page
SCROLL = "2m"  # how long a scroll stays open between pages
MAX_ID_BYTES = 512  # Elasticsearch's limit on a document id
KEYWORD_LIMIT = 8191  # characters: 4 bytes each still fits Lucene's 32,766-byte term
STATS_SUFFIX = "-stats"
MAX_INDEX_BYTES = 255 - len(STATS_SUFFIX)  # the stats index must fit 255 bytes too
INVALID_INDEX_CHARS = '\\/*?"<>| ,#:'
REASON_CHARS = 500  # a RecordFailure reason is cut here (a parse error quotes the value)
#: Item statuses streaming_bulk retries; what still fails after that makes the batch retry.
RETRY_STATUSES = (429, *range(500, 600))
#: 4xx items that are the index's or the cluster's state, not the record's fault.
NOT_RECORD_ERRORS = frozenset({"index_not_found_exception", "index_closed_exception",
                               "cluster_block_exception", "security_exception"})
NOT_RECORD_STATUSES = frozenset({401, 403, 404, 408, 429})
TOTALS = (TOTAL_NUM, TOTAL_REQUEST_SIZE, TOTAL_RESPONSE_SIZE)


def _keyword() -> dict[str, Any]:
    return {"type": "keyword", "ignore_above": KEYWORD_LIMIT}


#: The page index's mapping (the module docstring says why each field is what it is).
PAGES_MAPPING: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "url": _keyword(),
        "fingerprint": _keyword(),
        "crawl_id": _keyword(),
        "content_type": _keyword(),
        "method": _keyword(),
        "encoding": _keyword(),
        "redirect_to": _keyword(),
        "proxy": _keyword(),
        "status": {"type": "integer"},
        "depth": {"type": "integer"},
        "size": {"type": "long"},
        "truncated": {"type": "boolean"},
        "fetched_at": {"type": "date"},
        "title": {"type": "text"},
        "text": {"type": "text"},
        "description": {"type": "text"},
        "body": {"type": "text", "index": False},
        "headers": {"type": "flattened", "ignore_above": KEYWORD_LIMIT},
        "meta": {"type": "flattened", "ignore_above": KEYWORD_LIMIT},
        "links": {**_keyword(), "doc_values": False},
    },
}

#: The stats index's mapping: one document per crawl id.
STATS_MAPPING: dict[str, Any] = {
    "dynamic": False,
    "dynamic_templates": [{"status_counts": {"path_match": "status.*", "mapping": {"type": "long"}}}],
    "properties": {
        "crawl_id": {"type": "keyword"},
        TOTAL_NUM: {"type": "long"},
        TOTAL_REQUEST_SIZE: {"type": "long"},
        TOTAL_RESPONSE_SIZE: {"type": "long"},
        "status": {"type": "object", "dynamic": True},
        "counters": {"type": "flattened"},
        "updated_at": {"type": "date"},
    },
}

#: Oldest first; the fingerprint breaks ties so the order is stable.
RECORD_SORT = [{"fetched_at": {"order": "asc", "unmapped_type": "date"}},
               {"fingerprint": {"order": "asc", "unmapped_type": "keyword"}}]


# --------------------------------------------------------------------------- URIs

@dataclass(frozen=True)
class Target:
    """Where a store lives: node URL (no credentials in it), index, how to authenticate."""

    url: str
    index: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    api_key: str | tuple[str, str] | None = field(default=None, repr=False)
    ca_certs: str | None = None

    @property
    def display(self) -> str:
        """The store's URI for messages and logs, password masked, API key never shown."""
        http, _, address = self.url.partition("://")
        scheme = "elasticsearchs" if http == "https" else "elasticsearch"
        user = f"{self.username}:***@" if self.username is not None else ""
        return f"{scheme}://{user}{address}/{self.index}"

    @property
    def auth(self) -> str:
        """How the store authenticates, in words (for a 401's message)."""
        if self.username is not None:
            return f"user {self.username!r} with the password in the store URI"
        if self.api_key is not None:
            return "the API key in CRAWLER_ES_API_KEY"
        return "no credentials (give user:password in the store URI or set CRAWLER_ES_API_KEY)"


def index_name_problem(name: str) -> str | None:
    """Why Elasticsearch would refuse ``name`` as an index name (None if it would not)."""
    if name != name.lower():
        return "must be lower case"
    if name[:1] in ("_", "-", "+"):
        return "must not start with '_', '-' or '+'"
    if name[:1] == ".":
        return "must not start with '.' (reserved for hidden and system indices)"
    bad = sorted({c for c in name if c in INVALID_INDEX_CHARS})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        return f"must not contain {shown} (none of {INVALID_INDEX_CHARS!r} nor space)"
    if len(name.encode()) > MAX_INDEX_BYTES:
        return f"is longer than {MAX_INDEX_BYTES} bytes (with {STATS_SUFFIX!r} it must fit 255)"
    return None


def parse_uri(uri: str, api_key: str = "") -> Target:
    """The :class:`Target` of an ``elasticsearch://`` or ``elasticsearchs://`` URI.

    Raises :class:`UnknownStore` with one line (password masked) when the URI
    is malformed: no host, a bad port, no index or one Elasticsearch refuses, an
    unknown option, a ``ca_certs`` file that is not there.
    """
    shown = mask(uri)

    def bad(problem: str) -> UnknownStore:
        return UnknownStore(f"elasticsearch store {shown!r}: {problem}")

    parts, port = split_uri(uri, bad)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise bad("the scheme must be elasticsearch:// or elasticsearchs:// (TLS)")
    if not parts.hostname:
        raise bad("no host (elasticsearch://host:9200/index)")
    if port == 0:
        raise bad(BAD_PORT)
    index = _index_of(parts.path, parts.fragment, bad)
    username, password = _credentials(parts.username, parts.password, bad)
    ca_certs = _options(parts.query, scheme, bad)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    key = None if username is not None else _api_key(api_key)
    return Target(url=f"{SCHEMES[scheme]}://{host}:{port or DEFAULT_PORT}", index=index,
                  username=username, password=password, api_key=key, ca_certs=ca_certs)


def _index_of(path: str, fragment: str, bad: Any) -> str:
    if fragment:
        raise bad("index names must not contain '#'")
    index = unquote(path.removeprefix("/")).removesuffix("/")
    if not index:
        raise bad("no index: name it as the path (elasticsearch://host:9200/pages)")
    if "/" in index:
        raise bad(f"the path must be one index name, not {index!r}")
    problem = index_name_problem(index)
    if problem:
        raise bad(f"index name {index!r} {problem}")
    return index


def _credentials(user: str | None, password: str | None, bad: Any) -> tuple[str | None, str | None]:
    if user is None and password is None:
        return None, None
    if not user or password is None:
        raise bad("credentials must be given as user:password@")
    return unquote(user), unquote(password)


def _options(query: str, scheme: str, bad: Any) -> str | None:
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - set(URI_OPTIONS))
    if unknown:
        raise bad(f"unknown option {unknown[0]!r} (known: {', '.join(URI_OPTIONS)})")
    ca_certs = options.get("ca_certs")
    if ca_certs is None:
        return None
    if scheme != "elasticsearchs":
        raise bad("ca_certs needs elasticsearchs:// (TLS)")
    if not os.path.isfile(ca_certs):
        raise bad(f"ca_certs: no such file {ca_certs!r}")
    return ca_certs


def _api_key(raw: str) -> str | tuple[str, str] | None:
    """The key as the client takes it: the encoded form, or ``id:key`` as a pair."""
    raw = raw.strip()
    if not raw:
        return None
    key_id, colon, secret = raw.partition(":")  # base64 has no ':', so this is unambiguous
    return (key_id, secret) if colon else raw


# --------------------------------------------------------------------------- errors

def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _error_of(body: Any) -> tuple[str, str]:
    """(type, reason) of an Elasticsearch error body or bulk item error."""
    error = body.get("error", body) if isinstance(body, Mapping) else body
    if isinstance(error, Mapping):
        return str(error.get("type", "error")), str(error.get("reason", ""))
    return "error", "no details" if error is None else str(error)  # None: the answer to a HEAD


def item_failure(item: Mapping[str, Any]) -> RecordFailure | None:
    """The :class:`RecordFailure` of a failed bulk item that is the record's own fault, else None.

    Record faults: 4xx items such as ``document_parsing_exception`` (8.8+),
    ``mapper_parsing_exception`` (older servers), ``strict_dynamic_mapping_exception``
    or an immense term. Not record faults (None: the batch is retried): 429, 5xx,
    401/403, a missing, closed or blocked index.
    """
    status = int(item.get("status", 500))
    type_, reason = _error_of(item)
    if not 400 <= status < 500 or status in NOT_RECORD_STATUSES or type_ in NOT_RECORD_ERRORS:
        return None
    error = item.get("error")
    cause = error.get("caused_by") if isinstance(error, Mapping) else None
    text = f"{type_}: {reason}"
    if isinstance(cause, Mapping):
        text += f" (caused by {cause.get('type')}: {cause.get('reason')})"
    return RecordFailure(str(item.get("_id", "")), _one_line(text, REASON_CHARS))


def _describe(exc: Exception, target: Target, timeout: float) -> str:
    """One line saying what went wrong, without credentials."""
    if isinstance(exc, elasticsearch.AuthenticationException):
        return f"the credentials were refused (401 Unauthorized): the store sent {target.auth}"
    if isinstance(exc, elasticsearch.AuthorizationException):
        return f"permission denied (403): {_one_line(_error_of(exc.body)[1])}"
    if isinstance(exc, elasticsearch.UnsupportedProductError):
        return "the server does not say it is Elasticsearch (no X-elastic-product header)"
    if isinstance(exc, ApiError):
        return _describe_api_error(exc)
    if isinstance(exc, elasticsearch.ConnectionTimeout):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, elasticsearch.SSLError):
        short = _short(exc)
        hint = "; name its CA with ?ca_certs=/path/ca.pem" if "CERTIFICATE_VERIFY_FAILED" in short else ""
        return f"TLS failed: {short}{hint}"
    if isinstance(exc, elasticsearch.ConnectionError):
        return f"cannot connect: {_short(exc)}"
    return _one_line(f"{type(exc).__name__}: {exc}")


def _describe_api_error(exc: ApiError) -> str:
    type_, reason = _error_of(exc.body)
    if type_ == "media_type_header_exception":
        major = elasticsearch.__versionstr__.split(".")[0]
        return (f"the server refused the compatible-with={major} headers of elasticsearch-py "
                f"{elasticsearch.__versionstr__}, which talks to Elasticsearch {major} servers only "
                f"(for an older cluster install the client of its major version)")
    return f"{exc.status_code} {type_}: {_one_line(reason)}"


def _short(exc: Exception) -> str:
    """A transport error's message without the client's nested wrappers."""
    message = getattr(exc, "message", None) or str(exc)
    message = re.sub(r"^\w*Connection\([^)]*\):\s*", "", str(message))
    return _one_line(message, 200)


def _id_problem(doc_id: str) -> str | None:
    """Why ``doc_id`` cannot be a document id (such an item would fail the whole bulk request)."""
    if not isinstance(doc_id, str) or not doc_id:
        return "invalid_id: a document id must be a non-empty string"
    if len(doc_id.encode()) > MAX_ID_BYTES:
        return f"invalid_id: longer than {MAX_ID_BYTES} bytes (a document id)"
    return None


def stats_document(crawl_id: str, counters: Mapping[str, int], now: datetime) -> dict[str, Any]:
    """The stats document of one crawl: totals, ``status.<code>``, other counters, ``updated_at``."""
    doc: dict[str, Any] = {"crawl_id": crawl_id, **dict.fromkeys(TOTALS, 0), "status": {},
                           "counters": {}, "updated_at": now.isoformat(timespec="milliseconds")}
    for name, value in counters.items():
        code = name[len(STATUS.prefix):] if name.startswith(STATUS.prefix) else ""
        if name in TOTALS:
            doc[name] = int(value)
        elif code.isascii() and code.isdigit():
            doc["status"][code] = int(value)
        else:
            doc["counters"][name] = int(value)
    return doc


def _crawl_query(crawl_id: str | None) -> dict[str, Any]:
    return {"match_all": {}} if crawl_id is None else {"term": {"crawl_id": crawl_id}}


# --------------------------------------------------------------------------- the store

class ElasticsearchStore:
    """Page records in an Elasticsearch index, one document per fingerprint (see the module doc)."""

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
            detail = _describe(exc, self.target, self.request_timeout)
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
                    if _error_of(exc.body)[0] != "resource_already_exists_exception":
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
        """Write ``records`` (id = fingerprint); return those refused for good.

        Raises :class:`StoreUnavailable` when the cluster cannot be reached,
        refuses the credentials, or still rejects items (429, 5xx) after the
        retries: the whole batch may then be written again.
        """
        failures: list[RecordFailure] = []
        actions = []
        for record in records:
            problem = _id_problem(record.fingerprint)
            if problem:
                failures.append(RecordFailure(str(record.fingerprint), problem))
                continue
            actions.append({"_op_type": "index", "_index": self.index, "_id": record.fingerprint,
                            "_source": record.to_dict()})
        if not actions:
            return failures
        with self._errors():
            self._ensure(self.index, PAGES_MAPPING)
            refused, pending = self._bulk(actions)
        if pending:
            raise self._still_failing(pending, len(actions))
        return failures + refused

    def _bulk(self, actions: list[dict[str, Any]]) -> tuple[list[RecordFailure], list[dict[str, Any]]]:
        """Send ``actions``; the records refused for good, and the items still failing otherwise."""
        refused: list[RecordFailure] = []
        pending: list[dict[str, Any]] = []
        results = helpers.streaming_bulk(
            self.client, actions, chunk_size=CHUNK_SIZE, max_chunk_bytes=MAX_CHUNK_BYTES,
            raise_on_error=False, yield_ok=False, max_retries=self.item_retries,
            initial_backoff=self.retry_backoff, max_backoff=MAX_BACKOFF, retry_on_status=RETRY_STATUSES)
        for _, result in results:
            item = next(iter(result.values()))
            failure = item_failure(item)
            if failure is None:
                pending.append(item)
            else:
                refused.append(failure)
        return refused, pending

    def _still_failing(self, pending: list[dict[str, Any]], total: int) -> StoreUnavailable:
        if any(_error_of(item)[0] == "index_not_found_exception" for item in pending):
            self._ready.discard(self.index)  # deleted under us: create it again on the retry
        first = pending[0]
        type_, reason = _error_of(first)
        return StoreUnavailable(
            f"elasticsearch store {self.target.display}: {len(pending)} of {total} record(s) not "
            f"written after {self.item_retries} retries: {first.get('status')} {type_}: {_one_line(reason)}")

    def write_stats(self, crawl_id: str, counters: Mapping[str, int]) -> None:
        """Replace the statistics document of ``crawl_id`` in ``<index>-stats`` with ``counters``.

        ``counters`` are the crawl's cumulative counters (``total_num``,
        ``status/200``...), so each call is a full snapshot and the last one wins.
        """
        problem = _id_problem(crawl_id)
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
                                scroll=SCROLL, query={"query": _crawl_query(crawl_id), "sort": RECORD_SORT})
            for hit in hits:
                yield PageRecord.from_dict(hit["_source"])

    def get(self, fingerprint: str) -> PageRecord | None:
        """The record of ``fingerprint`` (real-time: no refresh needed), or None."""
        if _id_problem(fingerprint):
            return None
        with self._errors():
            try:
                hit = self.client.get(index=self.index, id=fingerprint)
            except elasticsearch.NotFoundError:
                return None
        return PageRecord.from_dict(hit["_source"])

    def count(self, crawl_id: str | None = None) -> int:
        """How many records are stored (for one crawl), after a refresh."""
        with self._errors():
            if not self._refresh(self.index):
                return 0
            return int(self.client.count(index=self.index, query=_crawl_query(crawl_id))["count"])

    def close(self) -> None:
        """Close this process's connections (a later call connects again)."""
        with self._lock:
            client, self._client = self._client, None
            mine = self._pid == os.getpid()
            self._ready = set()
        if client is not None and mine:
            client.close()
