"""Elasticsearch bulk writes: a batch of page documents through ``streaming_bulk``, its failed items read.

Writes go through ``helpers.streaming_bulk`` with the fingerprint as document
id, so a redelivered batch overwrites the same documents. Bulk items that fail
with 429 or 5xx are retried inside the call with backoff; if some still fail,
:class:`StoreUnavailable` makes the store queue retry the whole batch (safe:
writes are idempotent). Any other 4xx item (``document_parsing_exception`` on
servers since 8.8, ``mapper_parsing_exception`` before, a strict mapping...) is
the record's own fault and comes back as a :class:`RecordFailure`; the rest of
the batch is stored. ``raise_on_error=False`` is required: with ``True`` the
helper raises on the first 429 item before retrying it (elasticsearch-py#864).
``retry_on_status`` needs elasticsearch-py 8.16 or later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elasticsearch import Elasticsearch, helpers

from ...core.models import PageRecord
from ..base import RecordFailure
from .errors import error_of, one_line

CHUNK_SIZE = 500  # records per _bulk request
MAX_CHUNK_BYTES = 32 * 1024 * 1024  # bytes per _bulk request (the server's default cap is 100 MiB)
MAX_BACKOFF = 4.0  # seconds, longest wait between item retries
REASON_CHARS = 500  # a RecordFailure reason is cut here (a parse error quotes the value)
#: Item statuses streaming_bulk retries; what still fails after that makes the batch retry.
RETRY_STATUSES = (429, *range(500, 600))
#: 4xx items that are the index's or the cluster's state, not the record's fault.
NOT_RECORD_ERRORS = frozenset({"index_not_found_exception", "index_closed_exception",
                               "cluster_block_exception", "security_exception"})
NOT_RECORD_STATUSES = frozenset({401, 403, 404, 408, 429})


def index_action(index: str, record: PageRecord) -> dict[str, Any]:
    """The bulk action that writes ``record`` as the document of its fingerprint."""
    return {"_op_type": "index", "_index": index, "_id": doc_id(record.crawl_id, record.fingerprint),
            "_source": record.to_dict()}


def doc_id(crawl_id: str, fingerprint: str) -> str:
    """A page document's id: its crawl, then its fingerprint (a crawl id holds no ``:``)."""
    return f"{crawl_id}:{fingerprint}"


def send(client: Elasticsearch, actions: list[dict[str, Any]], *, item_retries: int,
         retry_backoff: float) -> tuple[list[RecordFailure], list[dict[str, Any]]]:
    """Send ``actions``; the records refused for good, and the items still failing otherwise."""
    refused: list[RecordFailure] = []
    pending: list[dict[str, Any]] = []
    results = helpers.streaming_bulk(
        client, actions, chunk_size=CHUNK_SIZE, max_chunk_bytes=MAX_CHUNK_BYTES,
        raise_on_error=False, yield_ok=False, max_retries=item_retries,
        initial_backoff=retry_backoff, max_backoff=MAX_BACKOFF, retry_on_status=RETRY_STATUSES)
    for _, result in results:
        action, item = next(iter(result.items()))
        if action == "delete" and item.get("status") == 404:
            continue  # a stale item already gone
        failure = item_failure(item)
        if failure is None:
            pending.append(item)
        else:
            refused.append(failure)
    return refused, pending


def item_failure(item: Mapping[str, Any]) -> RecordFailure | None:
    """The :class:`RecordFailure` of a failed bulk item that is the record's own fault, else None.

    Record faults: 4xx items such as ``document_parsing_exception`` (8.8+),
    ``mapper_parsing_exception`` (older servers), ``strict_dynamic_mapping_exception``
    or an immense term. Not record faults (None: the batch is retried): 429, 5xx,
    401/403, a missing, closed or blocked index.
    """
    status = int(item.get("status", 500))
    type_, reason = error_of(item)
    if not 400 <= status < 500 or status in NOT_RECORD_STATUSES or type_ in NOT_RECORD_ERRORS:
        return None
    error = item.get("error")
    cause = error.get("caused_by") if isinstance(error, Mapping) else None
    text = f"{type_}: {reason}"
    if isinstance(cause, Mapping):
        text += f" (caused by {cause.get('type')}: {cause.get('reason')})"
    where = str(item.get("_index", ""))
    about = f" (in {where})" if ITEMS_INFIX in where else ""
    return RecordFailure(fingerprint_of(str(item.get("_id", ""))), one_line(text + about, REASON_CHARS))


def fingerprint_of(document_id: str) -> str:
    """The page fingerprint in a page's (``crawl:fp``) or an item's (``crawl:fp:n``) document id."""
    parts = document_id.split(":")
    return parts[1] if len(parts) == 3 else parts[-1]


ITEMS_INFIX = "-items-"


def index_missing(pending: list[dict[str, Any]]) -> bool:
    """Whether an item still failing says the index is gone (deleted under the store)."""
    return any(error_of(item)[0] == "index_not_found_exception" for item in pending)


def unwritten(pending: list[dict[str, Any]], total: int, item_retries: int) -> str:
    """What the items still failing after the retries say, in one line (the first one's error)."""
    first = pending[0]
    type_, reason = error_of(first)
    return (f"{len(pending)} of {total} record(s) not written after {item_retries} retries: "
            f"{first.get('status')} {type_}: {one_line(reason)}")
