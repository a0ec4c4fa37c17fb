"""Reading sitemaps: fetch (indexes followed, gzip undone, size capped) and parse with lxml.

Follows the sitemaps.org protocol: a ``<urlset>`` lists pages (``<url>`` with
``<loc>`` and an optional ``<lastmod>``), a ``<sitemapindex>`` lists further
sitemaps. Elements are matched by local name, so the usual namespace, another
one or none at all read the same. A sitemap is at most :data:`MAX_BYTES`
uncompressed (the protocol's 50 MB), whether the server gzipped the transfer
(``Content-Encoding``) or the file itself (``.xml.gz``).

The feed (:mod:`crawler_tasks.stages.feeds`) decides what to do with the entries;
this module only reads.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urljoin

import requests
from lxml import etree

from ...core.errors import BadInput, FeedSourceUnavailable, FetchError
from ...core.models import CrawlRequest
from ...core.urls import validate_url
from ...net.download import download

log = logging.getLogger(__name__)

#: Uncompressed bytes one sitemap may hold (the protocol's limit).
MAX_BYTES = 50 * 1024 * 1024
#: Sitemaps read per tick, indexes included, so a looping or huge index ends.
MAX_SITEMAPS = 1000
#: Redirect hops followed to reach one sitemap.
MAX_REDIRECTS = 5
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class Entry:
    """One ``<url>`` of a urlset: its ``<loc>`` text, its ``<lastmod>`` if readable, and where."""

    loc: str
    lastmod: datetime | None
    sitemap: str


@dataclass(frozen=True)
class Sitemap:
    """A parsed sitemap: ``index`` lists sitemaps, otherwise pages; ``locs`` pairs (loc, lastmod text)."""

    index: bool
    locs: list[tuple[str, str]]


def parse_lastmod(text: str) -> datetime | None:
    """A W3C datetime (``2024-05-01``, ``2024-05-01T10:00:00+02:00``, ``…Z``) in UTC, or None."""
    text = text.strip()
    for parse in (datetime.fromisoformat, lambda t: datetime.strptime(t, "%Y-%m"),
                  lambda t: datetime.strptime(t, "%Y")):
        try:
            value = parse(text)
        except ValueError:
            continue
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
    return None


def _local(tag: object) -> str:
    return etree.QName(tag).localname if isinstance(tag, str) else ""


def parse_sitemap(body: bytes) -> Sitemap:
    """Parse one (uncompressed) sitemap; :class:`FeedSourceUnavailable` when it is not one.

    External entities and DTDs are never loaded, so a hostile sitemap cannot
    read local files or expand entity bombs.
    """
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                             huge_tree=False, remove_comments=True, remove_pis=True)
    try:
        root = etree.fromstring(body, parser=parser)
    except etree.XMLSyntaxError as exc:
        raise FeedSourceUnavailable(f"not XML: {exc}") from None
    kind = _local(root.tag)
    if kind not in ("urlset", "sitemapindex"):
        raise FeedSourceUnavailable(f"not a sitemap: root element <{kind}>")
    locs = []
    for item in root:
        fields = {_local(child.tag): (child.text or "").strip() for child in item}
        if _local(item.tag) in ("url", "sitemap"):
            locs.append((fields.get("loc", ""), fields.get("lastmod", "")))
    return Sitemap(index=kind == "sitemapindex", locs=locs)


def gunzip(body: bytes, limit: int = MAX_BYTES) -> bytes:
    """``body`` uncompressed when it is gzip data (by its magic bytes), at most ``limit`` bytes."""
    if not body.startswith(_GZIP_MAGIC):
        return body
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise FeedSourceUnavailable(f"bad gzip data: {exc}") from None
    if len(out) > limit:
        raise FeedSourceUnavailable(f"larger than {limit} bytes uncompressed")
    return out


@dataclass
class SitemapReader:
    """Walks sitemaps breadth-first, yielding the page entries of every urlset it reaches.

    ``get(url) -> bytes`` fetches one sitemap (raising
    :class:`FeedSourceUnavailable`); ``before_fetch`` runs before each fetch
    (the feed renews its lock there). A sitemap that fails is logged and
    listed in ``failed``; the walk goes on with the others. An index entry
    that is no URL is listed in ``invalid`` with its reason.
    """

    get: Callable[[str], bytes]
    before_fetch: Callable[[], object] = lambda: None
    limit: int = MAX_SITEMAPS
    read: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (index URL, reason)

    def entries(self, urls: Iterable[str]) -> Iterator[Entry]:
        queue, seen = list(urls), set()
        while queue and len(self.read) + len(self.failed) < self.limit:
            url = queue.pop(0)
            if url in seen:
                continue
            seen.add(url)
            self.before_fetch()
            try:
                sitemap = parse_sitemap(gunzip(self.get(url)))
            except FeedSourceUnavailable as exc:
                log.warning("sitemap %s: %s", url, exc)
                self.failed.append(url)
                continue
            self.read.append(url)
            if sitemap.index:
                queue.extend(self._children(url, sitemap))
            else:
                yield from (Entry(loc, parse_lastmod(lastmod) if lastmod else None, url)
                            for loc, lastmod in sitemap.locs)
        if queue:
            log.warning("sitemaps: stopped after %s sitemaps; %s not read this tick", self.limit, len(queue))

    def _children(self, index_url: str, sitemap: Sitemap) -> Iterator[str]:
        for loc, _ in sitemap.locs:
            try:
                yield validate_url(loc)
            except BadInput as exc:
                self.invalid.append((index_url, str(exc)))


def fetch_sitemap(session: requests.Session, url: str, *, timeout: float) -> bytes:
    """The body of the sitemap at ``url`` (redirects followed), at most :data:`MAX_BYTES`.

    Uses the crawler's downloader: its session (``CRAWLER_USER_AGENT``, the
    private-network guard) and one deadline of ``timeout`` per download.
    Raises :class:`FeedSourceUnavailable` for anything but a whole 200 response.
    """
    for _ in range(MAX_REDIRECTS + 1):
        try:
            got = download(session, CrawlRequest(url=url), timeout=timeout, maxsize=MAX_BYTES)
        except (FetchError, BadInput) as exc:
            raise FeedSourceUnavailable(str(exc)) from None
        location = got.headers.get("location")
        if got.status in (301, 302, 303, 307, 308) and location:
            url = urljoin(url, location)
            continue
        if got.status != 200:
            raise FeedSourceUnavailable(f"HTTP {got.status}")
        if got.truncated:
            raise FeedSourceUnavailable(f"larger than {MAX_BYTES} bytes")
        return got.body
    raise FeedSourceUnavailable(f"more than {MAX_REDIRECTS} redirects")
