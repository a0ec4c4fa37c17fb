"""A page's links: collected in document order within the caps, made absolute, and followed.

:class:`Links` keeps the distinct absolute http(s) links of ``<a>`` and
``<area>`` elements, fragments dropped and ``rel=nofollow`` ones skipped, at
most ``CRAWLER_MAX_LINKS_PER_PAGE`` of them (the rest only counted, never
resolved) and none longer than ``CRAWLER_MAX_URL_LENGTH`` bytes (counted).
:func:`follow` turns them into the requests a page may follow: in the crawl's
scope, within its depth.
"""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import urljoin, urlsplit, urlunsplit

from ...core.errors import InvalidURL
from ...core.limits import Limits
from ...core.lru import memoize
from ...core.models import CrawlRequest, inherited_notify
from ...core.revisit import PIN, REVISIT
from ...core.urls import SCHEMES, URL_CACHE_BYTES, domain_allowed, url_length


class Links:
    """Distinct absolute links in document order, at most ``cap`` (0 = all), how many
    candidates came past the cap (``over``), and how many were longer than ``max_length``
    bytes (``too_long``, 0 = no limit: counted, not kept)."""

    def __init__(self, base: str, cap: int, max_length: int = 0) -> None:
        self.base, self.cap, self.max_length = base, cap, max_length
        self.too_long = 0
        parts = urlsplit(base)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.seen: set[str] = set()
        self.links: list[str] = []
        self.over = 0
        self.candidates = 0

    def add(self, href: str | None, rel: str | None) -> None:
        """The link of one ``<a>`` or ``<area>`` (its ``href`` and ``rel``)."""
        href = (href or "").strip()
        if not href or href.startswith("#") or "nofollow" in (rel or "").lower().split():
            return  # a bare fragment points into this same document
        self.candidates += 1
        if self.cap and len(self.links) >= self.cap:
            self.over += 1  # not resolved, not kept: past the cap only the count matters
            return
        if href.startswith("/") and not href.startswith("//"):
            link = _absolute_path(self.origin, href)  # the same on every page of the site: cached
        else:
            link = _absolute(self.base, href)
        if link and self.max_length and url_length(link) > self.max_length:
            self.too_long += 1
            return
        if link and link not in self.seen:
            self.seen.add(link)
            self.links.append(link)


@memoize(URL_CACHE_BYTES)
def _absolute_path(origin: str, href: str) -> str | None:
    """``_absolute`` for an href starting with one ``/``: it depends only on the base's origin."""
    return _absolute(origin + "/", href)


def _absolute(base: str, href: str) -> str | None:
    try:
        parts = urlsplit(urljoin(base, href))
    except ValueError:
        return None
    if parts.scheme not in SCHEMES or not parts.netloc:
        return None
    return urlunsplit(parts._replace(fragment=""))


def follow(req: CrawlRequest, links: list[str], limits: Limits, max_url_length: int = 0,
           known: Collection[str] = (), kept_back: list[str] | None = None) -> tuple[list[CrawlRequest], int]:
    """Requests for the links ``req``'s page may follow: in the crawl's scope, within depth;
    and how many were over ``max_url_length`` bytes once percent-encoded (0 = no limit).
    Links in ``known`` (the gate answered for them lately) get no request: they go to
    ``kept_back`` instead."""
    depth = req.depth + 1
    if limits.max_depth and depth > limits.max_depth:
        return [], 0
    meta = _inherited_meta(req)
    notify = inherited_notify(req)
    out: list[CrawlRequest] = []
    too_long = 0
    scope = limits.scope(req.url)
    for link in links:
        if not domain_allowed(link, scope):
            continue
        if link in known and kept_back is not None:
            kept_back.append(link)
            continue
        try:
            child = req.followed(link, meta=meta, notify=notify)
        except InvalidURL:
            continue
        if max_url_length and len(child.url) > max_url_length:  # percent-encoding made it longer
            too_long += 1
            continue
        out.append(child)
    return out, too_long


#: Request meta a link does not inherit from its page: what belongs to the page alone.
_OWN_META = frozenset({"NotExtract", "url_id", PIN, REVISIT})


def _inherited_meta(req: CrawlRequest) -> dict:
    return {k: v for k, v in req.meta.items() if k not in _OWN_META}
