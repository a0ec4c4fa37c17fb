"""Elasticsearch documents: the two indices' mappings, and what a page or a crawl's statistics become.

A page record is one document in the page index, its fingerprint the id and its
fields (``PageRecord.to_dict()``) the source. The page index is created on first
write (never by a read) with :data:`PAGES_MAPPING`; an index that exists
already is used as it is, so an operator may create it beforehand with other
settings (shards, ``index.codec: best_compression`` for the bodies). Mapping
choices:

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
* ``items`` (what a parse rule extracted): ``flattened``, ``ignore_above: 8191``:
  every leaf value of every item is a keyword under its dotted path
  (``items.price: "9.99"`` finds a page), whatever fields users' items have;
  ``rule``: keyword.
* ``links``: keyword, indexed (a ``term`` query finds every page linking to a
  URL, the reason to keep links in a search engine) but ``doc_values: false``
  (nobody sorts or aggregates on a page's thousand links, and their doc values
  would be a large share of the index), ``ignore_above: 8191`` as above.

Statistics: one document per crawl (id = crawl id) in ``<index>-stats``
(:data:`STATS_MAPPING`): long ``total_num`` / ``total_request_size`` /
``total_response_size``, ``status`` an object of longs (``status/200`` becomes
``status.200``, so sums and ranges work), every other counter in a ``flattened``
``counters`` field, date ``updated_at``. Each write replaces the document with
the snapshot it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ...core.counters import STATUS, TOTAL_NUM, TOTAL_REQUEST_SIZE, TOTAL_RESPONSE_SIZE

MAX_ID_BYTES = 512  # Elasticsearch's limit on a document id
KEYWORD_LIMIT = 8191  # characters: 4 bytes each still fits Lucene's 32,766-byte term
STATS_SUFFIX = "-stats"
TOTALS = (TOTAL_NUM, TOTAL_REQUEST_SIZE, TOTAL_RESPONSE_SIZE)


def keyword() -> dict[str, Any]:
    """A keyword field that keeps a value too long for a term in ``_source`` only."""
    return {"type": "keyword", "ignore_above": KEYWORD_LIMIT}


#: The page index's mapping (the module docstring says why each field is what it is).
PAGES_MAPPING: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "url": keyword(),
        "fingerprint": keyword(),
        "crawl_id": keyword(),
        "content_type": keyword(),
        "method": keyword(),
        "encoding": keyword(),
        "redirect_to": keyword(),
        "proxy": keyword(),
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
        "links": {**keyword(), "doc_values": False},
        "items": {"type": "flattened", "ignore_above": KEYWORD_LIMIT},
        "rule": keyword(),
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


def id_problem(doc_id: str) -> str | None:
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


def crawl_query(crawl_id: str | None) -> dict[str, Any]:
    """The query of every page document (of one crawl)."""
    return {"match_all": {}} if crawl_id is None else {"term": {"crawl_id": crawl_id}}
