"""HBase store URIs: ``hbase://`` parsed into the store's arguments, and those arguments checked.

``hbase://host[:port]/table[?transport=framed][&protocol=compact][&prefix=p][&pool=8]``:
port 9090, the buffered transport, the binary protocol, no table prefix and 8
pooled connections unless the URI says otherwise. Transport and protocol must
be the gateway's (``hbase thrift start -f -c`` serves framed + compact);
``prefix`` is happybase's ``table_prefix`` (the table is ``<prefix>_<table>``).
The Thrift gateway takes no credentials, so a URI with some is refused.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from ...core.errors import UnknownStore
from ...core.store_uris import mask
from ..base import split_uri

DEFAULT_PORT = 9090
DEFAULT_POOL = 8  # connections per process, shared by its threads
MAX_POOL = 1024
TRANSPORTS = ("buffered", "framed")
PROTOCOLS = ("binary", "compact")
OPTIONS = ("transport", "protocol", "prefix", "pool")

_TABLE_NAME = re.compile(r"(?:[A-Za-z0-9_]+:)?[A-Za-z0-9_][A-Za-z0-9_.-]*")
_PREFIX = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def parse_uri(uri: str) -> dict[str, Any]:
    """The constructor arguments an ``hbase://`` URI names; :class:`UnknownStore` if malformed."""

    def bad(why: str) -> UnknownStore:
        return UnknownStore(f"hbase store {mask(uri)!r}: {why}")

    parts, port = split_uri(uri, bad)
    if parts.scheme.lower() != "hbase":
        raise bad("expected hbase://host:port/table")
    if not parts.hostname:
        raise bad("no host (expected hbase://host:port/table)")
    if parts.username is not None or parts.password is not None:
        raise bad("credentials are not supported (the Thrift gateway takes none)")
    if parts.fragment:
        raise bad(f"unexpected fragment #{parts.fragment}")
    table = parts.path.strip("/")
    if not table:
        raise bad("no table (expected hbase://host:port/table)")
    return {"host": parts.hostname, "port": DEFAULT_PORT if port is None else port, "table": table,
            **_parse_options(parts.query, bad)}


def _parse_options(query: str, bad: Callable[[str], UnknownStore]) -> dict[str, Any]:
    """``transport``, ``protocol``, ``prefix`` and ``pool`` from a URI's query."""
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise bad(f"bad query {query!r}: expected name=value pairs") from None
    options: dict[str, Any] = {}
    for name, value in pairs:
        if name not in OPTIONS:
            close = difflib.get_close_matches(name, OPTIONS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise bad(f"unknown option {name!r}{hint}; known: {', '.join(OPTIONS)}")
        if name in options or (name == "pool" and "pool_size" in options):
            raise bad(f"option {name!r} given twice")
        if name == "pool":
            try:
                options["pool_size"] = int(value)
            except ValueError:
                raise bad(f"pool: {value!r} is not a whole number") from None
        else:
            options[name] = value
    return options


def check_arguments(host: str, port: int, table: str, transport: str, protocol: str, prefix: str | None,
                    pool_size: int) -> None:
    """Refuse constructor arguments no gateway could use (messages start with the field)."""
    if not host:
        raise UnknownStore("host: empty")
    if not isinstance(port, int) or not 0 < port < 65536:
        raise UnknownStore(f"port: {port!r} is not between 1 and 65535")
    if not _TABLE_NAME.fullmatch(table):
        raise UnknownStore(f"table: {table!r} is not an HBase table name "
                           "(letters, digits, '_', '-', '.'; an optional 'namespace:')")
    if transport not in TRANSPORTS:
        raise UnknownStore(f"transport: {transport!r} is not one of {', '.join(TRANSPORTS)}")
    if protocol not in PROTOCOLS:
        raise UnknownStore(f"protocol: {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    if prefix is not None and not _PREFIX.fullmatch(prefix):
        raise UnknownStore(f"prefix: {prefix!r} is not a table name prefix (letters, digits, '_', '-', '.')")
    if not isinstance(pool_size, int) or not 0 < pool_size <= MAX_POOL:
        raise UnknownStore(f"pool: {pool_size!r} is not between 1 and {MAX_POOL}")
