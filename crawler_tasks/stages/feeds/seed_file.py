"""The ``seed_file`` feed: the lines of a file of seeds, submitted again on every tick.

``CRAWLER_SEED_FILE``, re-read whole every ``CRAWLER_SEED_INTERVAL`` s: one URL or
JSON seed object per line, blank lines and ``#`` comments skipped (a BOM before
the first line too); a line that is not UTF-8 or is over :data:`MAX_LINE` bytes
is refused, never held in memory whole. Every line is submitted again each time
and the gate refuses the ones already admitted, so a re-read feeds the new lines
(and, with ``CRAWLER_RECRAWL_AFTER``, the lines whose recrawl window passed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

from ...core.errors import BadInput, FeedSourceUnavailable
from ...core.models import CrawlRequest
from .chunks import chunks, judge, submit_chunk
from .lock import FeedLock
from .outcomes import Fed

if TYPE_CHECKING:
    from ...core.addresses import AddressPolicy
    from ..deps import FeedDeps

#: Bytes of the longest seed-file line read; a longer line is refused.
MAX_LINE = 64 * 1024


def feed_seed_file(rt: FeedDeps, lock: FeedLock, fed: Fed, batch: int) -> None:
    """Submit every line of ``CRAWLER_SEED_FILE``, ``batch`` seeds per gate call."""
    path = rt.settings.seed_file
    try:
        with open(path, "rb") as handle:
            requests = _file_requests(handle, path, rt.settings.seed_crawl_id, fed, rt.addresses,
                                      rt.settings.max_url_length)
            for chunk in chunks(requests, batch):
                if not submit_chunk(rt, lock, fed, chunk):
                    return
    except OSError as exc:
        raise FeedSourceUnavailable(f"seed file {path}: {exc.strerror or exc}") from None


def _file_requests(handle: IO[bytes], path: str, crawl_id: str, fed: Fed,
                   policy: AddressPolicy, max_url_length: int) -> Iterator[CrawlRequest]:
    for number, raw in _lines(handle):
        try:
            request = _line_request(raw, number, crawl_id, policy, max_url_length)
        except BadInput as exc:
            fed.refuse(f"{path}:{number}", exc)
            continue
        if request is not None:
            yield request


def _line_request(raw: bytes | None, number: int, crawl_id: str,
                  policy: AddressPolicy, max_url_length: int) -> CrawlRequest | None:
    """The request of one file line; None for a blank line or a comment."""
    if raw is None:
        raise BadInput(f"line longer than {MAX_LINE} bytes")
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise BadInput("not UTF-8") from None
    if number == 1:
        text = text.lstrip("\ufeff")
    if not text or text.startswith("#"):
        return None
    return judge(text, crawl_id, policy, max_url_length)


def _lines(handle: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes) of each line; None for a line over :data:`MAX_LINE` (not kept in memory)."""
    number = 0
    while raw := handle.readline(MAX_LINE + 1):
        number += 1
        if len(raw) > MAX_LINE:
            while raw and not raw.endswith(b"\n"):
                raw = handle.readline(MAX_LINE)
            yield number, None
        else:
            yield number, raw
