"""Elasticsearch store URIs: ``elasticsearch://`` and ``elasticsearchs://`` read into a :class:`Target`.

``elasticsearch://[user:password@]host[:9200]/index`` (plain HTTP) and
``elasticsearchs://…`` (TLS, certificates verified; ``?ca_certs=/path/ca.pem``
names a private CA). Without ``user:password`` the store sends
``CRAWLER_ES_API_KEY`` when it is set (the encoded key Elasticsearch returns, or
``id:key``); credentials in the URI win, being the more specific. One host per
URI: ``CRAWLER_STORE`` already uses commas to list stores. The index name must
be one Elasticsearch accepts, with room for the ``-stats`` index beside it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

from ...core.errors import UnknownStore
from ...core.store_uris import mask
from ..base import BAD_PORT, split_uri
from .documents import STATS_SUFFIX

#: URI scheme -> HTTP scheme.
SCHEMES = {"elasticsearch": "http", "elasticsearchs": "https"}
DEFAULT_PORT = 9200
URI_OPTIONS = ("ca_certs",)
MAX_INDEX_BYTES = 255 - len(STATS_SUFFIX)  # the stats index must fit 255 bytes too
INVALID_INDEX_CHARS = '\\/*?"<>| ,#:'


@dataclass(frozen=True)
class Target:
    """Where a store lives: node URL (no credentials in it), index, how to authenticate."""

    url: str
    index: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    api_key: str | tuple[str, str] | None = field(default=None, repr=False)
    ca_certs: str | None = None

    @property
    def display(self) -> str:
        """The store's URI for messages and logs, password masked, API key never shown."""
        http, _, address = self.url.partition("://")
        scheme = "elasticsearchs" if http == "https" else "elasticsearch"
        user = f"{self.username}:***@" if self.username is not None else ""
        return f"{scheme}://{user}{address}/{self.index}"

    @property
    def auth(self) -> str:
        """How the store authenticates, in words (for a 401's message)."""
        if self.username is not None:
            return f"user {self.username!r} with the password in the store URI"
        if self.api_key is not None:
            return "the API key in CRAWLER_ES_API_KEY"
        return "no credentials (give user:password in the store URI or set CRAWLER_ES_API_KEY)"


def index_name_problem(name: str) -> str | None:
    """Why Elasticsearch would refuse ``name`` as an index name (None if it would not)."""
    if name != name.lower():
        return "must be lower case"
    if name[:1] in ("_", "-", "+"):
        return "must not start with '_', '-' or '+'"
    if name[:1] == ".":
        return "must not start with '.' (reserved for hidden and system indices)"
    bad = sorted({c for c in name if c in INVALID_INDEX_CHARS})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        return f"must not contain {shown} (none of {INVALID_INDEX_CHARS!r} nor space)"
    if len(name.encode()) > MAX_INDEX_BYTES:
        return f"is longer than {MAX_INDEX_BYTES} bytes (with {STATS_SUFFIX!r} it must fit 255)"
    return None


def parse_uri(uri: str, api_key: str = "") -> Target:
    """The :class:`Target` of an ``elasticsearch://`` or ``elasticsearchs://`` URI.

    Raises :class:`UnknownStore` with one line (password masked) when the URI
    is malformed: no host, a bad port, no index or one Elasticsearch refuses, an
    unknown option, a ``ca_certs`` file that is not there.
    """
    shown = mask(uri)

    def bad(problem: str) -> UnknownStore:
        return UnknownStore(f"elasticsearch store {shown!r}: {problem}")

    parts, port = split_uri(uri, bad)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise bad("the scheme must be elasticsearch:// or elasticsearchs:// (TLS)")
    if not parts.hostname:
        raise bad("no host (elasticsearch://host:9200/index)")
    if port == 0:
        raise bad(BAD_PORT)
    index = _index_of(parts.path, parts.fragment, bad)
    username, password = _credentials(parts.username, parts.password, bad)
    ca_certs = _options(parts.query, scheme, bad)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    key = None if username is not None else _api_key(api_key)
    return Target(url=f"{SCHEMES[scheme]}://{host}:{port or DEFAULT_PORT}", index=index,
                  username=username, password=password, api_key=key, ca_certs=ca_certs)


def _index_of(path: str, fragment: str, bad: Any) -> str:
    if fragment:
        raise bad("index names must not contain '#'")
    index = unquote(path.removeprefix("/")).removesuffix("/")
    if not index:
        raise bad("no index: name it as the path (elasticsearch://host:9200/pages)")
    if "/" in index:
        raise bad(f"the path must be one index name, not {index!r}")
    problem = index_name_problem(index)
    if problem:
        raise bad(f"index name {index!r} {problem}")
    return index


def _credentials(user: str | None, password: str | None, bad: Any) -> tuple[str | None, str | None]:
    if user is None and password is None:
        return None, None
    if not user or password is None:
        raise bad("credentials must be given as user:password@")
    return unquote(user), unquote(password)


def _options(query: str, scheme: str, bad: Any) -> str | None:
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - set(URI_OPTIONS))
    if unknown:
        raise bad(f"unknown option {unknown[0]!r} (known: {', '.join(URI_OPTIONS)})")
    ca_certs = options.get("ca_certs")
    if ca_certs is None:
        return None
    if scheme != "elasticsearchs":
        raise bad("ca_certs needs elasticsearchs:// (TLS)")
    if not os.path.isfile(ca_certs):
        raise bad(f"ca_certs: no such file {ca_certs!r}")
    return ca_certs


def _api_key(raw: str) -> str | tuple[str, str] | None:
    """The key as the client takes it: the encoded form, or ``id:key`` as a pair."""
    raw = raw.strip()
    if not raw:
        return None
    key_id, colon, secret = raw.partition(":")  # base64 has no ':', so this is unambiguous
    return (key_id, secret) if colon else raw
