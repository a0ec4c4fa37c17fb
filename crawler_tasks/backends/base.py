"""What every backend shares: the :class:`Store` protocol, a refused record, URI parsing."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import SplitResult, urlsplit

from ..core.errors import BadInput, UnknownStore
from ..core.models import PageRecord


@dataclass(frozen=True)
class RecordFailure:
    """A record a backend refused for good (e.g. an Elasticsearch mapping error): retrying
    the same record cannot help, so it is reported rather than retried."""

    fingerprint: str
    reason: str


class WriteOnlyStore(BadInput):
    """A store that cannot be read back (a WARC archive, a Kafka topic: read them with their
    own tools)."""


class WriteOnly:
    """The reads of a write-only store: :meth:`records` raises :class:`WriteOnlyStore`
    (naming the store and how to read it instead), :meth:`get` finds nothing (a recrawl
    through it revalidates nothing) and :meth:`count` is 0 (counting would mean reading
    it all)."""

    #: The store as messages name it, and how to read what it wrote.
    shown: str
    read_with: str

    def records(self, crawl_id: str | None = None) -> Iterator[PageRecord]:
        raise WriteOnlyStore(f"{self.shown} is write-only: {self.read_with}")

    def get(self, fingerprint: str, crawl_id: str | None = None) -> PageRecord | None:
        return None

    def count(self, crawl_id: str | None = None) -> int:
        return 0


class Store(Protocol):
    """What the store stage needs from a backend."""

    def upsert(self, records: Sequence[PageRecord]) -> list[RecordFailure]:
        """Write ``records``, replacing any of the same crawl and fingerprint (a crawl's
        records are its own: another crawl's record of the same URL stays).

        Returns the records refused for good (each with its reason); raises
        :class:`~crawler_tasks.core.errors.StoreUnavailable` when the backend cannot
        take the write now (the caller retries the whole batch: writes are
        idempotent).
        """

    def records(self, crawl_id: str | None = None) -> Iterator[PageRecord]:
        """Every stored record (of one crawl): oldest first in SQLite and Elasticsearch, in
        row-key (site) order in HBase; a write-only store (WARC, Kafka) raises ``WriteOnlyStore``."""

    def get(self, fingerprint: str, crawl_id: str | None = None) -> PageRecord | None:
        """The stored record of ``fingerprint`` in crawl ``crawl_id``, or, without one, the
        latest of any crawl (a recrawl's validators come from it); None when none is."""

    def count(self, crawl_id: str | None = None) -> int:
        """How many records are stored (for one crawl)."""

    def close(self) -> None:
        """Release connections."""


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
