"""HBase row keys: a page row keyed by its site first, an index row keyed by its fingerprint.

**Page rows: the site first.** ``<reversed host>:<scheme>[:<port>]<path>[?<query>] <fingerprint>
<crawl id>``, e.g. ``com.example.www:https:8443/a/b?q=1 3f78… news``, built from the
canonical URL (:func:`~crawler_tasks.core.urls.canonicalize_url`: lower-case host, no
default port, sorted query), Apache Nutch's layout with the fingerprint and the crawl
appended (a crawl's records are its own). HBase keeps
rows sorted by key, so one site's pages are one contiguous range:
:meth:`~crawler_tasks.backends.hbase.HBaseStore.scan_site` reads a host (all its
schemes and ports) with the prefix ``com.example.www:`` and its subdomains with
``com.example.www.``; a salted fingerprint spreads writes better but cannot do
that, and the issue asks for scans by site. The scheme is in the key because
http and https pages are different fingerprints; IP addresses are kept as
written (an IPv6 one in brackets), and no credentials ever go in a key. The
fingerprint suffix (after a space, which sorts below every character a URL may
hold, so rows still sort by URL) makes the key unique per fingerprint whatever
the URL text: a GET and a HEAD of one URL, or URLs differing only in user info,
never share a row, and the URL part can be cut at ``KEY_URL_BYTES`` to keep keys
short (HBase repeats the key in every cell). A redelivered record builds the
same key, so its write overwrites the same row.

**Index rows: ``get(fingerprint, crawl_id)`` in the same table.** A fingerprint alone
does not give the key, so every record also writes the rows
``~fp:<fingerprint> <crawl id>`` and ``~fp:<fingerprint>`` (the latest of any crawl)
with one cell ``i:row`` (family ``i``) naming its page row.
Index rows sort after every page row (``~`` cannot start a host name), so scans
of pages stop at ``~`` and never meet them. Keeping them in the same table (not
a second ``<table>_fp`` table) means one table to create and one ``mutateRows``
per batch for pages and index alike; the index row goes in the same call as
its page row's metadata, or a later one.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ...core.errors import BadInput, InvalidURL
from ...core.urls import canonicalize_url

KEY_URL_BYTES = 1024  # bytes of URL kept in a row key (the fingerprint keeps keys unique)
INDEX_PREFIX = b"~fp:"
PAGES_STOP = b"~"  # page rows sort below it, index rows above

_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")


def _site(host: str) -> str:
    """A host as it leads a row key: labels reversed, IP addresses as written."""
    host = host.rstrip(".")
    if ":" in host:
        return f"[{host}]"
    if _IPV4.fullmatch(host):
        return host
    return ".".join(reversed(host.split(".")))


def row_key(url: str, fingerprint: str, crawl_id: str = "") -> bytes:
    """The row key of a record: ``<reversed host>:<scheme>[:<port>]<path>[?<query>] <fingerprint>``,
    then `` <crawl id>`` (a crawl's records are its own).

    Raises :class:`InvalidURL` for a URL with no host.
    """
    canonical = canonicalize_url(url)
    try:
        parts = urlsplit(canonical)
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(f"invalid URL {url!r:.200}: {exc}") from None
    if not parts.hostname:
        raise InvalidURL(f"invalid URL {url!r:.200}: no host")
    where = f"{_site(parts.hostname)}:{parts.scheme}" + (f":{port}" if port is not None else "")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    head = (where + path).encode("utf-8", "surrogatepass")[:KEY_URL_BYTES]
    tail = fingerprint + (f" {crawl_id}" if crawl_id else "")
    return head + b" " + tail.encode("utf-8", "surrogatepass")


def index_key(fingerprint: str, crawl_id: str = "") -> bytes:
    """The key of the index row that names ``fingerprint``'s page row in ``crawl_id`` (without
    one: the page row written last, of any crawl)."""
    tail = fingerprint + (f" {crawl_id}" if crawl_id else "")
    return INDEX_PREFIX + tail.encode("utf-8", "surrogatepass")


def site_prefix(host: str, *, subdomains: bool = False) -> bytes:
    """The key prefix of one host's rows (every scheme and port), or of its subdomains' rows."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address
    try:
        name = urlsplit(canonicalize_url(f"http://{host}/")).hostname
    except (InvalidURL, ValueError):
        name = None
    if not name:
        raise BadInput(f"host: {host!r:.200} is not a host name")
    return (_site(name) + ("." if subdomains else ":")).encode()


def after(prefix: bytes) -> bytes:
    """The first key past every key starting with ``prefix`` (which ends in '.' or ':')."""
    return prefix[:-1] + bytes([prefix[-1] + 1])
