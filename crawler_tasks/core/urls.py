"""URL validation, canonicalisation, fingerprints and domain checks: pure functions."""

from __future__ import annotations

import hashlib
import re
from urllib.parse import SplitResult, urlsplit, urlunsplit

from w3lib.url import canonicalize_url as _w3lib_canonicalize
from w3lib.url import safe_url_string

from .errors import InvalidURL, UnsupportedScheme, URLTooLong
from .lru import memoize

SCHEMES = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}


#: Links repeat across a site's pages (menus, footers): each process remembers
#: the checks and fingerprints of recent URLs, up to this many bytes per cache
#: (about 35,000 URLs of 100 characters; a URL of a few KiB is not kept).
URL_CACHE_BYTES = 16 * 1024 * 1024


def validate_url(url: str) -> str:
    """Return ``url`` made safe to send (percent-encoded, fragment dropped) or raise.

    A user name and password are dropped (:func:`without_credentials`).
    Raises :class:`UnsupportedScheme` for schemes other than http/https and
    :class:`InvalidURL` for anything without a usable host or port.
    """
    if not isinstance(url, str):
        raise InvalidURL(f"invalid URL {url!r:.80}: not a string")
    if not url.strip():
        raise InvalidURL(f"invalid URL {url!r}: empty")
    # Dropped before (no error echoes them) and after (what validation cleaned may show some).
    return without_credentials(_validated(without_credentials(url.strip())))


#: The user name and password of a URL: what comes before the authority's last '@'.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://)[^/?#]*@")


def without_credentials(url: str) -> str:
    """``url`` without a user name or password: a request never carries them, so they
    reach no message, record, log line or error (HTTP auth belongs in headers the
    worker sets, not in URLs that are shown and stored)."""
    if "@" not in url:  # most URLs: no user information to look for
        return url
    return _USERINFO.sub(r"\1", url, count=1)


@memoize(URL_CACHE_BYTES)
def _validated(url: str) -> str:
    if any(ch in url for ch in " \t\r\n"):
        raise InvalidURL(f"invalid URL {url!r}: contains white space")
    parts, port = _split(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        what = f"scheme {scheme!r}" if scheme else "no scheme"
        raise UnsupportedScheme(f"invalid URL {url!r}: {what} (only http and https)")
    if not _has_host(parts):
        raise InvalidURL(f"invalid URL {url!r}: no host")
    if port == 0:
        raise InvalidURL(f"invalid URL {url!r}: port 0")
    try:
        safe = safe_url_string(urlunsplit(parts._replace(fragment="")))
        if not url.isascii():  # w3lib's IDNA step can leave capitals ("ᴬ" is "A") its ASCII path lowers
            safe = safe_url_string(safe)
    except ValueError as exc:  # UnicodeError: a lone surrogate cannot be encoded
        raise InvalidURL(f"invalid URL {url!r}: {exc}") from None
    # Everything but a host IDNA could not encode is percent-encoded by now.
    if not safe.isprintable() or " " in safe:
        raise InvalidURL(f"invalid URL {url!r}: control or white-space character in the host")
    # w3lib parses as browsers do, where "\\" also ends the host: what it made needs one too.
    if not _has_host(_split(safe)[0]):
        raise InvalidURL(f"invalid URL {url!r}: no host")
    return safe


def _split(url: str) -> tuple[SplitResult, int | None]:
    """``urlsplit`` and the port; :class:`InvalidURL` for what it cannot parse."""
    try:
        parts = urlsplit(url)
        return parts, parts.port
    except ValueError as exc:
        raise InvalidURL(f"invalid URL {url!r}: {exc}") from None


def _has_host(parts: SplitResult) -> bool:
    """True when ``parts`` names a host with no empty label."""
    host = parts.hostname or ""
    return bool(host) and not host.startswith(".") and ".." not in host


def canonicalize_url(url: str) -> str:
    """Canonical form used for identity: lower-case scheme and host, no default
    port, sorted query, no fragment, normalised percent-encoding (w3lib).

    Raises :class:`InvalidURL` for text w3lib cannot parse.
    """
    try:
        canonical = _w3lib_canonicalize(url, keep_fragments=False)
        # w3lib's result is not always its own canonical form: "%%30%61" decodes to the
        # escape "%0a", which a second pass upper-cases. Identity needs a fixed point; only
        # percent-escapes move, so a URL without one is done after one pass.
        for _ in range(3 if "%" in canonical else 0):
            again = _w3lib_canonicalize(canonical, keep_fragments=False)
            if again == canonical:
                break
            canonical = again
        parts = urlsplit(canonical)
        port = parts.port
    except ValueError as exc:  # UnicodeError included
        raise InvalidURL(f"invalid URL {url!r}: {exc}") from None
    if port is not None and port == _DEFAULT_PORTS.get(parts.scheme):
        userinfo, _, hostport = parts.netloc.rpartition("@")
        host = hostport.rpartition(":")[0].lower()  # an IPv6 host keeps its brackets
        netloc = f"{userinfo}@{host}" if userinfo else host
        canonical = urlunsplit(parts._replace(netloc=netloc))
    return canonical


@memoize(URL_CACHE_BYTES)
def fingerprint(url: str, method: str = "GET") -> str:
    """SHA1 hex of the method and the canonical URL.

    Two requests with the same fingerprint fetch the same resource, so the gate
    admits only the first. Requests carry no body (GET and HEAD only), so unlike
    Scrapy's none goes into the hash.
    """
    return hashlib.sha1(f"{method.upper()} {canonicalize_url(url)}".encode()).hexdigest()


@memoize(URL_CACHE_BYTES)
def host_of(url: str) -> str:
    """Lower-case host name of ``url`` ('' when it has none); cached (every link of every
    page asks)."""
    return (urlsplit(url).hostname or "").lower()


def url_length(url: str) -> int:
    """Bytes of ``url`` in UTF-8 (its characters, for the usual ASCII URL)."""
    return len(url) if url.isascii() else len(url.encode("utf-8", "surrogatepass"))


def check_length(url: str, limit: int) -> str:
    """``url`` unchanged, or :class:`URLTooLong` when it is over ``limit`` bytes (0 = no cap)."""
    if limit and url_length(url) > limit:
        raise URLTooLong(f"invalid URL {url!r:.80}...: {url_length(url)} bytes, longer than "
                         f"CRAWLER_MAX_URL_LENGTH ({limit})")
    return url


def domain_allowed(url: str, domains: frozenset[str] | set[str]) -> bool:
    """True when the host of ``url`` is one of ``domains`` or a subdomain of one.

    Looks up the host and each of its parent domains (``a.b.example.com``,
    ``b.example.com``, ``example.com``, ``com``): a few set look-ups per link
    however many domains a crawl has.
    """
    host = host_of(url)
    while True:
        if host in domains:
            return True
        dot = host.find(".")
        if dot < 0:
            return False
        host = host[dot + 1:]
