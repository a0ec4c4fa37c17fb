"""Claim checks: page bodies wait in Redis, broker messages carry only a task id.

A fetched body is written once (zlib) under ``page:<fetch task id>`` with a TTL;
parse reads it and adds the parsed record; store reads the record and deletes
the key. Broker messages stay a few hundred bytes whatever the page size. The
record is kept by :mod:`crawler_tasks.core.codec`: over
:data:`~crawler_tasks.core.codec.COMPRESS_OVER` bytes of JSON (one with a page's
text, or a binary body in ``body_base64``) zlib-compressed too, a small one
plain JSON (readable in redis-cli), and both are read back.
"""

from __future__ import annotations

import logging
import zlib

import redis

from ..core import codec
from ..core.errors import ClaimMissing
from ..core.memory import LARGE_BODY, Permit
from ..core.models import PageRecord
from .keys import Keys

log = logging.getLogger(__name__)


class Claims:
    """Stores and loads page claim checks."""

    def __init__(self, client: redis.Redis, keys: Keys, ttl: int) -> None:
        self.client = client
        self.keys = keys
        self.ttl = ttl

    def put(self, pipe: redis.client.Pipeline, crawl_id: str, claim_id: str, record: PageRecord,
            body: bytes | None = None) -> None:
        """Queue writing ``record`` (and ``body``) under ``claim_id`` on ``pipe``."""
        key = self.keys.page(crawl_id, claim_id)
        mapping = {"record": codec.encode(record.to_dict(), ensure_ascii=True)}
        if body is not None:
            mapping["body"] = zlib.compress(body, 3)
        pipe.hset(key, mapping=mapping)
        pipe.expire(key, self.ttl)

    def write(self, crawl_id: str, claim_id: str, record: PageRecord,
              body: bytes | None = None) -> None:
        """Write ``record`` (and ``body``) under ``claim_id`` now, in one round trip."""
        with self.client.pipeline(transaction=False) as pipe:
            self.put(pipe, crawl_id, claim_id, record, body)
            pipe.execute()

    def load(self, crawl_id: str, claim_id: str, *, with_body: bool,
             permit: Permit | None = None) -> tuple[PageRecord, bytes | None]:
        """The record and body of ``claim_id``; :class:`ClaimMissing` if it expired.

        A body over :data:`~crawler_tasks.core.memory.LARGE_BODY` bytes is decompressed only
        once ``permit`` holds its slot (the caller gives it back).
        """
        fields = ["record", "body"] if with_body else ["record"]
        values: list[bytes | None] = self.client.hmget(
            self.keys.page(crawl_id, claim_id), fields)
        if values[0] is None:
            raise ClaimMissing(f"claim {claim_id} expired or was evicted")
        record = PageRecord.from_dict(codec.decode(values[0]))
        if not with_body or values[1] is None:
            return record, None
        if permit is not None and record.size > LARGE_BODY and not permit.take():
            log.warning("claim %s waited %.0fs for a large-body permit: parsed anyway", claim_id,
                        permit.wait_s)
        return record, zlib.decompress(values[1])

    def delete(self, crawl_id: str, claim_id: str) -> None:
        self.client.delete(self.keys.page(crawl_id, claim_id))
