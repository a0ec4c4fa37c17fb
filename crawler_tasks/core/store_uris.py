"""Store URIs as Redis, records, logs and output hold them: passwords masked.

A crawl's store travels through Redis (the crawl's configuration, every
store-queue entry, every dead letter), so it travels as :func:`masked`: each
URI of the list with its password replaced by ``***``. A process that writes
records turns the masked URI back into the real one with a
:class:`StoreResolver` built from the URIs it was configured with
(``CRAWLER_STORE``; ``crawler-tasks crawl --store`` reaches its workers the
same way). A URI without a password is its own mask, so it needs no
configuring.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .errors import StoreNotConfigured

#: A comma that starts another URI (``…,scheme://``); a comma inside a path stays.
_NEXT_URI = re.compile(r",\s*(?=[A-Za-z][A-Za-z0-9+.-]*://)")


def split_uris(uri: str) -> list[str]:
    """The store URIs of ``CRAWLER_STORE`` (one, or a comma-separated list)."""
    return [part.strip() for part in _NEXT_URI.split(uri) if part.strip()]


def sqlite_path(uri: str) -> str | None:
    """The file of an embedded SQLite store URI (a path, or ``sqlite:///path``); None for
    any other backend."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri
    return rest if scheme.lower() == "sqlite" else None


def mask(uri: str) -> str:
    """``uri`` with whatever may be a password hidden.

    Everything between the first ``:`` after ``//`` and the last ``@`` goes, so
    that a password holding an unencoded ``/``, ``?`` or ``#`` (which would
    end the host part for a URL parser) is hidden all the same.
    """
    scheme, sep, rest = uri.partition("://")
    if not sep or "@" not in rest:
        return uri
    userinfo, _, host = rest.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{host}"


def masked(uri: str) -> str:
    """``uri`` (one store URI or a comma list) with every password masked."""
    parts = split_uris(uri)
    return ",".join(mask(part) for part in parts) if parts else uri


def hides_password(uri: str) -> bool:
    """Whether ``uri`` (one store URI) is a masked one whose password was taken out."""
    scheme, sep, rest = uri.partition("://")
    userinfo, at, _ = rest.rpartition("@")
    return bool(sep and at) and userinfo.partition(":")[2] == "***"


class StoreResolver:
    """Turns masked store URIs back into the real ones this process was configured with."""

    def __init__(self, configured: Iterable[str]) -> None:
        self.known: dict[str, str] = {}
        for uri in configured:
            for part in split_uris(uri):
                self.known.setdefault(mask(part), part)

    def resolve(self, uri: str) -> str:
        """The real URI (or comma list) of ``uri``.

        A masked URI takes the configured one with the same mask; a URI without a
        password is used as it is, as is one that holds its password (given
        directly, not read from Redis). :class:`StoreNotConfigured` when a masked URI
        matches none.
        """
        parts = split_uris(uri)
        return ",".join(self._one(part) for part in parts) if parts else uri

    def _one(self, part: str) -> str:
        real = self.known.get(part)
        if real is not None:
            return real
        if hides_password(part):
            raise StoreNotConfigured(
                f"store {part} is not configured here: its password is masked in "
                "Redis, so CRAWLER_STORE must name it")
        return part
