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

from collections.abc import Iterable

from ..errors import StoreNotConfigured
from . import mask, split_uris


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
        password is used as it is, as is one that still holds its password (an
        entry queued by an earlier release). :class:`StoreNotConfigured` when a
        masked URI matches none.
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
