"""The ``sitemaps`` feed: the ``<loc>`` of every sitemap ``CRAWLER_SITEMAP_URLS`` reaches, as seeds.

Every ``CRAWLER_SEED_INTERVAL`` s; indexes are followed
(:mod:`crawler_tasks.stages.feeds.sitemap_reader` reads them): every ``<loc>`` is a seed; a
``<lastmod>`` newer than the one recorded when that URL was last fed re-admits
it (``dont_filter``). The dates are kept per crawl in a sorted set of at most
``CRAWLER_SITEMAP_LASTMOD_MAX`` entries. The tick fails only when no sitemap
could be read; the ones that failed are counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from ...core.errors import BadInput, FeedSourceUnavailable
from ...core.models import CrawlRequest
from ..seed import build_requests, refuse_blocked
from .chunks import chunks, submit_chunk
from .lock import FeedLock
from .outcomes import Fed
from .sitemap_reader import Entry, SitemapReader, fetch_sitemap

if TYPE_CHECKING:
    from ...core.addresses import AddressPolicy
    from ..deps import FeedDeps


def feed_sitemaps(rt: FeedDeps, lock: FeedLock, fed: Fed, batch: int) -> None:
    """Submit the ``<loc>`` of every sitemap reachable from ``CRAWLER_SITEMAP_URLS``.

    A URL whose ``<lastmod>`` is newer than the one recorded when it was last
    fed goes with ``dont_filter`` (re-admitted); the others meet the gate.
    """
    crawl_id, settings = rt.settings.seed_crawl_id, rt.settings
    reader = SitemapReader(
        get=lambda url: fetch_sitemap(rt.session, url, timeout=settings.download_timeout),
        before_fetch=lock.renew)
    entries = _sitemap_requests(reader.entries(settings.sitemap_urls), crawl_id, fed, rt.addresses,
                                settings.max_url_length)
    for chunk in chunks(entries, batch):
        chunk = _readmit_newer(rt, crawl_id, chunk)
        if not submit_chunk(rt, lock, fed, [request for request, _ in chunk]):
            break
        _remember_lastmod(rt, crawl_id, chunk)
    for index_url, reason in reader.invalid:
        fed.refuse(f"a <loc> of the sitemap index {index_url}", reason)
    fed.sources_failed = len(reader.failed)
    if reader.failed and not reader.read:
        raise FeedSourceUnavailable(f"no sitemap could be read ({', '.join(reader.failed)[:300]})")


def _sitemap_requests(entries: Iterable[Entry], crawl_id: str, fed: Fed,
                      policy: AddressPolicy, max_url_length: int
                      ) -> Iterator[tuple[CrawlRequest, datetime | None]]:
    for entry in entries:
        try:
            [request] = build_requests([entry.loc], crawl_id=crawl_id, max_url_length=max_url_length)
            refuse_blocked([request], policy)
        except BadInput as exc:
            fed.refuse(f"a <loc> of {entry.sitemap}", exc)
            continue
        yield request, entry.lastmod


def _readmit_newer(rt: FeedDeps, crawl_id: str, chunk: list[tuple[CrawlRequest, datetime | None]]
                   ) -> list[tuple[CrawlRequest, datetime | None]]:
    """The chunk with ``dont_filter`` on where ``lastmod`` is newer than the recorded one.

    Keeps in each pair only a lastmod to record (new or newer), None otherwise.
    """
    recorded = rt.feeds.lastmods(crawl_id, [r.fingerprint for r, _ in chunk])
    out: list[tuple[CrawlRequest, datetime | None]] = []
    for (request, lastmod), before in zip(chunk, recorded):
        if lastmod is None:
            out.append((request, None))
        elif before is None:
            out.append((request, lastmod))
        elif lastmod.timestamp() > before:
            out.append((request.replace(dont_filter=True), lastmod))
        else:
            out.append((request, None))
    return out


def _remember_lastmod(rt: FeedDeps, crawl_id: str,
                      chunk: list[tuple[CrawlRequest, datetime | None]]) -> None:
    """Record the chunk's new lastmod dates, keeping the ``CRAWLER_SITEMAP_LASTMOD_MAX`` newest.

    A URL whose date was dropped is gated as one the sitemap never dated: admitted if
    new, refused if seen, and its date recorded again.
    """
    dates = {r.fingerprint: lastmod.timestamp() for r, lastmod in chunk if lastmod is not None}
    if not dates:
        return
    rt.feeds.remember_lastmods(crawl_id, dates)
