"""The items feed: each item a page's parser yielded, as a row of its own.

A record keeps its items (dicts) and their types (``item_types``: the class name of
each item as yielded, ``item`` for a dict); a store that keeps a feed writes each as
an :class:`ItemRow` carrying its page's crawl, URL and fingerprint, keyed by crawl,
fingerprint and position on the page, so a page stored again replaces its items
instead of adding them twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .models import PageRecord

#: The type of an item yielded as a plain dict.
DICT_TYPE = "item"


@dataclass(frozen=True)
class ItemRow:
    """One item of the feed, with where it came from."""

    crawl_id: str
    fingerprint: str
    position: int
    type: str
    url: str
    fetched_at: str
    item: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The row as ``export --items`` writes it (JSON lines)."""
        return {"type": self.type, "url": self.url, "crawl_id": self.crawl_id, "fingerprint": self.fingerprint,
                "position": self.position, "fetched_at": self.fetched_at, "item": self.item}


def type_name(item: Any) -> str:
    """The feed's name for the kind of ``item``: its class name, ``item`` for a dict."""
    return DICT_TYPE if isinstance(item, dict) else type(item).__name__


def item_rows(record: PageRecord) -> list[ItemRow]:
    """The feed rows of ``record``'s items."""
    types = record.item_types
    return [ItemRow(record.crawl_id, record.fingerprint, n, types[n] if n < len(types) else DICT_TYPE,
                    record.url, record.fetched_at, item) for n, item in enumerate(record.items)]
