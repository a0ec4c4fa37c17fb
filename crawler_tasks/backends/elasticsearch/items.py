"""The Elasticsearch items feed: each item a page's parser yielded, a document of its own in
an index per item type, ``<index>-items-<type>`` (``item`` for dicts, else the class name,
lower case).

An item document is the feed row (:class:`~crawler_tasks.core.items.ItemRow`): ``type``,
``url``, ``crawl_id``, ``fingerprint``, ``position``, ``fetched_at`` and the ``item``
itself, a ``flattened`` field (every leaf a keyword under its dotted path, so items of
any shape share one mapping and never fail a batch on a field whose type changed). Its id
is ``<crawl>:<fingerprint>:<position>``, so a batch written again rewrites the same
documents. A page stored again in its crawl replaces its items: the batch first reads the
earlier versions of its pages (one real-time ``_mget`` of their ``item_types``) and deletes
the items they had past the new count, or of another type at a position, in the same
bulk request. A process reads those earlier versions only once the feed may exist: a
batch with items, or an items index found (looked for at most once a minute).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

from elasticsearch import Elasticsearch, helpers

from ...core.items import DICT_TYPE, ItemRow, item_rows
from ...core.models import PageRecord
from .bulk import ITEMS_INFIX, doc_id
from .documents import KEYWORD_LIMIT, keyword

#: Seconds between two looks for an items index, while none was found.
LOOK_EVERY_S = 60.0


#: An items index's mapping.
ITEMS_MAPPING: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "type": keyword(),
        "url": keyword(),
        "crawl_id": keyword(),
        "fingerprint": keyword(),
        "position": {"type": "integer"},
        "fetched_at": {"type": "date"},
        "item": {"type": "flattened", "ignore_above": KEYWORD_LIMIT},
    },
}


def items_index(index: str, type_name: str) -> str:
    """The index of the items of ``type_name`` (an index name is lower case, with no
    ``\\ / * ? " < > | , #`` or space)."""
    return f"{index}{ITEMS_INFIX}{re.sub(r'[^a-z0-9_.-]', '_', type_name.lower()) or DICT_TYPE}"


def item_id(crawl_id: str, fingerprint: str, position: int) -> str:
    return f"{doc_id(crawl_id, fingerprint)}:{position}"


def item_actions(index: str, record: PageRecord, previous: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The bulk actions that write ``record``'s items, and delete what the page's earlier
    version (its ``previous`` item types) held that they do not replace."""
    rows = item_rows(record)
    actions: list[dict[str, Any]] = [
        {"_op_type": "index", "_index": items_index(index, row.type),
         "_id": item_id(row.crawl_id, row.fingerprint, row.position), "_source": row.to_dict()}
        for row in rows]
    for position, old in enumerate(previous):
        new = rows[position].type if position < len(rows) else None
        if new is None or items_index(index, new) != items_index(index, old):
            actions.append({"_op_type": "delete", "_index": items_index(index, old),
                            "_id": item_id(record.crawl_id, record.fingerprint, position)})
    return actions


class ItemFeed:
    """The items indices of one page index: whether they may exist, earlier versions, reads."""

    def __init__(self, index: str) -> None:
        self.index = index
        self.pattern = f"{index}{ITEMS_INFIX}*"
        self._seen = False
        self._looked = -LOOK_EVERY_S

    def noted(self) -> None:
        """Items were written: the feed exists."""
        self._seen = True

    def may_exist(self, client: Elasticsearch, records: Sequence[PageRecord]) -> bool:
        """Whether a page of ``records`` may have had items before (see the module doc)."""
        if self._seen or any(r.items for r in records):
            return True
        now = time.monotonic()
        if now - self._looked >= LOOK_EVERY_S:
            self._looked = now
            self._seen = bool(client.indices.exists(index=self.pattern, allow_no_indices=False))
        return self._seen

    def previous(self, client: Elasticsearch, records: Sequence[PageRecord]) -> dict[str, list[str]]:
        """The item types the stored versions of ``records`` had, by page document id."""
        ids = [doc_id(r.crawl_id, r.fingerprint) for r in records]
        found = client.mget(index=self.index, ids=ids, source_includes=["item_types"])
        return {d["_id"]: list(d["_source"].get("item_types") or ())
                for d in found["docs"] if d.get("found")}

    def rows(self, client: Elasticsearch, crawl_id: str | None, type_name: str | None) -> Iterator[ItemRow]:
        """The feed (of one crawl, of one type), by crawl, page fetch time, page and position."""
        index = items_index(self.index, type_name) if type_name else self.pattern
        query: dict[str, Any] = {"match_all": {}} if crawl_id is None else {"term": {"crawl_id": crawl_id}}
        sort = [{f: {"order": "asc", "unmapped_type": t}} for f, t in
                (("crawl_id", "keyword"), ("fetched_at", "date"), ("fingerprint", "keyword"),
                 ("position", "integer"))]
        client.indices.refresh(index=index, allow_no_indices=True, ignore_unavailable=True)
        hits = helpers.scan(client, index=index, preserve_order=True, size=500, scroll="2m",
                            query={"query": query, "sort": sort}, allow_no_indices=True,
                            ignore_unavailable=True)
        for hit in hits:
            s = hit["_source"]
            yield ItemRow(s["crawl_id"], s["fingerprint"], int(s["position"]), s["type"], s["url"],
                          s["fetched_at"], s["item"])
