"""A protocol-level Elasticsearch test server for the real ``elasticsearch`` client.

Elasticsearch cannot be installed on these machines, so the store backend's
tests talk to :class:`ESServer`: a ``ThreadingHTTPServer`` on 127.0.0.1 with an
in-memory, lock-protected store that answers with the shapes, status codes and
headers elasticsearch-py and its ``helpers`` check::

    with ESServer() as server:
        es = Elasticsearch(server.url)
        es.indices.create(index="pages", mappings={"properties": {"status": {"type": "integer"}}})
        helpers.bulk(es, ({"_index": "pages", "_id": str(i), "status": 200} for i in range(1000)))

What the client checks, and what the server therefore does:

* ``X-elastic-product: Elasticsearch`` on every response (the client refuses a
  2xx without it). As on a real cluster, 401s from the security layer lack it.
* ``Accept: application/vnd.elasticsearch+json; compatible-with=N``: answered with
  ``Content-Type: application/vnd.elasticsearch+json;compatible-with=N``
  (``application/json`` to plain requests). N must be the server's major or the
  one before, else ``400 media_type_header_exception`` as on a real server: a
  9.x client cannot talk to ``ESServer(version="8.15.0")``.
* Mapping failures of a document are ``document_parsing_exception`` (servers
  since 8.8, the default here) or ``mapper_parsing_exception`` (``version`` below
  8.8); a bad *mapping* at index creation is ``mapper_parsing_exception`` on all.

Endpoints: ``/`` (info, ping), ``/_cluster/health``, index create / exists /
get / delete, ``_mapping`` (get, put: new fields merge, a type change is a
400), ``_refresh``, ``_doc`` (index with or without an id, get, exists,
delete), ``_create``, ``_update`` (``doc``, ``doc_as_upsert``, ``upsert``,
``detect_noop``), ``_source``, ``_count``, ``_search`` (queries ``match_all``,
``match_none``, ``term``, ``terms``, ``match``, ``bool``, ``exists``, ``ids``,
``range``, ``prefix``; ``size``, ``from``, ``sort``, ``search_after``,
``_source`` filtering, ``track_total_hits``, ``seq_no_primary_term``,
``version``, ``scroll`` with ``/_search/scroll`` so ``helpers.scan`` works) and
``_bulk`` (``index``, ``create``, ``update``, ``delete``; per-item results and
errors; ``helpers.bulk`` / ``streaming_bulk`` / ``parallel_bulk``). Index
expressions may list names, ``_all`` and wildcards. ``if_seq_no`` /
``if_primary_term`` give 409s; versions, ``_seq_no`` and ``result`` follow the
real rules (a delete of a missing document is a 404 ``not_found``, an update
that changes nothing is a ``noop``).

Mappings: explicit mappings are validated (an unknown type is a 400); documents
are checked against them: ``integer``/``long``/``short``/``byte``/``unsigned_long``
(numbers and numeric strings, truncated, in range), floats, ``date`` /
``date_nanos`` (``strict_date_optional_time||epoch_millis`` or the field's
``format``: named formats and simple Java patterns), ``boolean``, ``binary``
(base64), ``ip``, ``object`` / ``nested`` (an object, not a concrete value),
``flattened`` (anything); keyword and text types take scalars. ``dynamic``
``true`` (default) adds fields as a real cluster would (long, float, boolean,
date if the string looks like one, text with a ``.keyword`` sub-field, object),
``false`` ignores them, ``strict`` refuses them.

Tests' levers: :meth:`ESServer.fail_next` (the next n bulk items, or whole
requests, fail with 429 ``es_rejected_execution_exception`` or 503
``unavailable_shards_exception`` / ``cluster_block_exception``);
:meth:`ESServer.down` closes the listening socket and every open connection
(clients get *connection refused*), :meth:`ESServer.up` listens again on the
same port with the data kept (for "answers 503 to everything" use
``fail_next(n, 503, whole=True, match="")``); :attr:`ESServer.requests` and
:attr:`ESServer.received` record what the client sent; basic auth and API keys;
TLS.

Client behaviour worth knowing (elasticsearch-py 9.5, checked against this server):
the transport retries a whole-request 429/502/503/504 by itself (``max_retries``,
default 3) before the caller sees it; ``helpers.streaming_bulk(max_retries=n)``
retries 429 *items* only with ``raise_on_error=False`` (with the default it raises
``BulkIndexError`` at once: elasticsearch-py#864); a bulk ``delete`` of a missing
document is a 404 item that the helpers count as a failure unless
``ignore_status=404``; the helpers send ``PUT /_bulk``.

Not supported (a 400 naming the feature, never a silent wrong answer):
aggregations, highlighting, scripts, suggesters, point in time, knn, aliases,
data streams, ingest pipelines (the ``pipeline`` parameter is ignored), mget,
msearch, delete/update by query, sniffing (``/_nodes``). Approximations: every
write is visible at once (no refresh interval); scores are 1.0; text analysis
is lower-cased ``\\w+`` tokens; a missing sort value is reported as ``null``;
the ``[line:column]`` in parse errors is estimated; dynamic date detection
needs a ``-`` or ``/`` in the string.
"""

from __future__ import annotations

import base64
import copy
import gzip
import ipaddress
import json
import math
import os
import re
import socket
import socketserver
import ssl
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from fnmatch import fnmatchcase
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import elasticsearch

CLIENT_MAJOR = int(elasticsearch.__versionstr__.split(".")[0])
#: The version the server reports: the installed client's major, as a real cluster it may talk to.
DEFAULT_VERSION = "9.1.0" if CLIENT_MAJOR >= 9 else "8.15.0"
LUCENE = {9: "10.2.2", 8: "9.11.1", 7: "8.11.3"}
#: Document parse failures are ``document_parsing_exception`` from this server version on.
DOCUMENT_PARSING_SINCE = (8, 8)
DEFAULT_DATE_FORMAT = "strict_date_optional_time||epoch_millis"
MAX_RESULT_WINDOW = 10000
DEFAULT_TRACK_TOTAL_HITS = 10000
SHARDS_WRITE = {"total": 2, "successful": 1, "failed": 0}
SHARDS_NOOP = {"total": 0, "successful": 0, "failed": 0}
BASIC_CHALLENGE = 'Basic realm="security", charset="UTF-8"'
AUTH_CHALLENGES = (BASIC_CHALLENGE, "ApiKey")

INTEGER_RANGES = {
    "byte": (-(2**7), 2**7 - 1, "a byte"),
    "short": (-(2**15), 2**15 - 1, "a short"),
    "integer": (-(2**31), 2**31 - 1, "an integer"),
    "long": (-(2**63), 2**63 - 1, "a long"),
    "unsigned_long": (0, 2**64 - 1, "unsigned long"),
}
FLOAT_TYPES = frozenset({"float", "double", "half_float", "scaled_float"})
DATE_TYPES = frozenset({"date", "date_nanos"})
TEXT_TYPES = frozenset({"text", "match_only_text", "search_as_you_type", "annotated_text"})
KEYWORD_TYPES = frozenset({"keyword", "wildcard", "constant_keyword", "version", "completion"})
OBJECT_TYPES = frozenset({"object", "nested"})
OPAQUE_TYPES = frozenset({
    "flattened", "geo_point", "geo_shape", "point", "shape", "dense_vector", "sparse_vector",
    "rank_feature", "rank_features", "histogram", "percolator", "join", "alias", "semantic_text",
    "token_count", "integer_range", "long_range", "float_range", "double_range", "date_range", "ip_range",
})
SCALAR_TYPES = frozenset({"boolean", "binary", "ip"})
FIELD_TYPES = (frozenset(INTEGER_RANGES) | FLOAT_TYPES | DATE_TYPES | TEXT_TYPES | KEYWORD_TYPES
               | OBJECT_TYPES | OPAQUE_TYPES | SCALAR_TYPES)
ROOT_MAPPING_KEYS = frozenset({
    "properties", "dynamic", "_source", "_meta", "_routing", "dynamic_templates", "date_detection",
    "numeric_detection", "dynamic_date_formats", "runtime", "enabled", "subobjects", "_field_names",
})
SEARCH_KEYS = frozenset({
    "query", "size", "from", "sort", "_source", "track_total_hits", "search_after", "timeout",
    "seq_no_primary_term", "version", "track_scores", "min_score", "terminate_after",
})
BULK_ACTIONS = ("index", "create", "update", "delete")
BULK_META_KEYS = frozenset({
    "_index", "_id", "routing", "if_seq_no", "if_primary_term", "version", "version_type",
    "retry_on_conflict", "pipeline", "require_alias", "dynamic_templates", "_source",
    "require_data_stream", "list_executed_pipelines", "_type",
})
INVALID_INDEX_CHARS = '\\/*?"<>| ,#:'
FAULTS = {
    429: ("es_rejected_execution_exception",
          ("rejected execution of primary operation [shard_detail=[{index}][0], "
           "shard_operation_bytes=1024, max_operation_bytes=53687091]")),
    503: ("unavailable_shards_exception",
          ("[{index}][0] primary shard is not active Timeout: [1m], "
           "request: [BulkShardRequest [[{index}][0]] containing [1] requests]")),
}
WHOLE_FAULTS = {
    429: ("es_rejected_execution_exception",
          ("rejected execution of coordinating operation [coordinating_and_primary_bytes=0, "
           "replica_bytes=0, all_bytes=0, coordinating_operation_bytes=1024, "
           "max_coordinating_and_primary_bytes=53687091]")),
    503: ("cluster_block_exception", "blocked by: [SERVICE_UNAVAILABLE/1/state not recovered / initialized];"),
}
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_ISO_DATE = re.compile(
    r"(?P<y>\d{4})(?:-(?P<mo>\d{2})(?:-(?P<d>\d{2})(?:T(?P<h>\d{2})(?::(?P<mi>\d{2})"
    r"(?::(?P<s>\d{2})(?:[.,](?P<f>\d{1,9}))?)?)?(?P<tz>Z|[+-]\d{2}(?::?\d{2})?)?)?)?)?")
_JAVA_TOKENS = re.compile(r"yyyy|uuuu|MM|dd|HH|mm|ss|SSS|XXX|Z|'[^']*'")
_STRPTIME = {"yyyy": "%Y", "uuuu": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M",
             "ss": "%S", "SSS": "%f", "XXX": "%z", "Z": "%z"}
_COMPAT = re.compile(r"compatible-with=(\d+)")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --------------------------------------------------------------------------- errors

class ESError(Exception):
    """An Elasticsearch error: the whole response body or a bulk item's ``error``."""

    def __init__(self, status: int, type_: str, reason: str, *, caused_by: dict | None = None,
                 root: dict | None = None, **extra: Any) -> None:
        super().__init__(f"{status} {type_}: {reason}")
        self.status, self.type, self.reason = status, type_, reason
        self.caused_by, self.root, self.extra = caused_by, root, extra

    def cause(self) -> dict:
        """The error object (a bulk item's ``error``, a response's ``error`` less ``root_cause``)."""
        obj = {"type": self.type, "reason": self.reason, **self.extra}
        if self.caused_by:
            obj["caused_by"] = self.caused_by
        return obj

    def body(self) -> dict:
        """The response body: ``{"error": {"root_cause": [...], ...}, "status": n}``."""
        root = self.root or {"type": self.type, "reason": self.reason, **self.extra}
        return {"error": {"root_cause": [root], **self.cause()}, "status": self.status}


class _Bad(ValueError):
    """A leaf value its field type refuses: the ``caused_by`` of the parse failure."""

    def __init__(self, type_: str, reason: str, caused_by: dict | None = None) -> None:
        super().__init__(reason)
        self.cause = {"type": type_, "reason": reason, **({"caused_by": caused_by} if caused_by else {})}


def index_not_found(name: str) -> ESError:
    return ESError(404, "index_not_found_exception", f"no such index [{name}]",
                   **{"resource.type": "index_or_alias", "resource.id": name, "index_uuid": "_na_",
                      "index": name})


def bad_request(reason: str, type_: str = "illegal_argument_exception") -> ESError:
    return ESError(400, type_, reason)


def search_failure(index: str, cause: ESError) -> ESError:
    """A query-phase failure as the search APIs report it (all shards failed)."""
    inner = cause.cause()
    return ESError(cause.status, "search_phase_execution_exception", "all shards failed",
                   root={**inner, "index": index}, caused_by=inner, phase="query", grouped=True,
                   failed_shards=[{"shard": 0, "index": index, "node": "es-server-node", "reason": inner}])


def as_search_failure(index: str, err: ESError) -> ESError:
    """A shard's error as the search reports it (already-wrapped errors unchanged)."""
    return err if err.type == "search_phase_execution_exception" else search_failure(index, err)


# --------------------------------------------------------------------------- values

def flat(value: Any) -> Iterator[Any]:
    """The items of a possibly nested JSON array (a scalar is its own one item)."""
    if isinstance(value, list):
        for item in value:
            yield from flat(item)
    else:
        yield value


def java_str(value: Any) -> str:
    """A value as Elasticsearch prints it in a reason (``true``, ``1.5``, ``{a=1}``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={java_str(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    return str(value)


def tokens(text: Any) -> list[str]:
    """The standard analyzer, roughly: lower-cased word tokens."""
    return re.findall(r"\w+", java_str(text).lower())


def parse_iso(text: str) -> int:
    """Epoch milliseconds of a ``strict_date_optional_time`` string (ValueError if not one)."""
    m = _ISO_DATE.fullmatch(text)
    if m is None:
        raise ValueError(text)
    tz = UTC
    if m["tz"] and m["tz"] != "Z":
        sign = -1 if m["tz"][0] == "-" else 1
        digits = m["tz"][1:].replace(":", "")
        tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0)))
    fraction = (m["f"] or "0").ljust(9, "0")
    moment = datetime(int(m["y"]), int(m["mo"] or 1), int(m["d"] or 1), int(m["h"] or 0),
                      int(m["mi"] or 0), int(m["s"] or 0), int(fraction[:6]), tzinfo=tz)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def _epoch(value: Any, scale: int) -> int:
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        value = Decimal(value)
    if not isinstance(value, (int, float, Decimal)):
        raise ValueError(value)
    return int(Decimal(value) * scale)


def _java_pattern(pattern: str, value: Any) -> int:
    if not isinstance(value, str):
        raise ValueError(value)
    fmt = _JAVA_TOKENS.sub(lambda m: _STRPTIME.get(m[0], m[0].strip("'")), pattern)
    moment = datetime.strptime(value, fmt)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def parse_date(value: Any, formats: str = DEFAULT_DATE_FORMAT) -> int:
    """Epoch milliseconds of a date under a ``||``-separated format list (ValueError if none fits)."""
    for name in formats.split("||"):
        try:
            if name == "epoch_millis":
                return _epoch(value, 1)
            if name == "epoch_second":
                return _epoch(value, 1000)
            if "date" in name or "time" in name or name == "year_month_day":
                if isinstance(value, str):
                    return parse_iso(value)
                raise ValueError(value)
            return _java_pattern(name, value)
        except (ValueError, OverflowError, InvalidOperation):
            continue
    raise ValueError(value)


def _integer(ftype: str, fdef: Mapping, value: Any) -> int:
    low, high, name = INTEGER_RANGES[ftype]
    coerce = fdef.get("coerce", True) not in (False, "false")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _Bad("x_content_parse_exception",
                   f"Current token ({'VALUE_' + java_str(value).upper()}) not numeric, "
                   "can not use numeric value accessors")
    if isinstance(value, str):
        if not _NUMBER.fullmatch(value):
            raise _Bad("number_format_exception", f'For input string: "{value}"' if value else "empty String")
        if not coerce:
            raise _Bad("illegal_argument_exception", f"Value [{value}] is a string and coerce is disabled")
        number: Any = Decimal(value)
    else:
        number = value
    if isinstance(number, float) and not math.isfinite(number):
        raise _Bad("illegal_argument_exception", f"Value [{value}] is out of range for {name}")
    if not coerce and number != int(number):
        raise _Bad("illegal_argument_exception", f"Value [{value}] has a decimal part")
    result = int(number)
    if not low <= result <= high:
        raise _Bad("illegal_argument_exception", f"Value [{value}] is out of range for {name}")
    return result


def _float(ftype: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _Bad("x_content_parse_exception", f"Current token ({java_str(value)}) not numeric")
    if isinstance(value, str) and not _NUMBER.fullmatch(value):
        raise _Bad("number_format_exception", f'For input string: "{value}"' if value else "empty String")
    number = float(value)
    if not math.isfinite(number):
        raise _Bad("illegal_argument_exception", f"[{ftype}] supports only finite values, but got [{value}]")
    return number


def _date(fdef: Mapping, value: Any) -> int:
    formats = fdef.get("format", DEFAULT_DATE_FORMAT)
    try:
        return parse_date(value, formats)
    except ValueError:
        raise _Bad("illegal_argument_exception",
                   f"failed to parse date field [{java_str(value)}] with format [{formats}]",
                   {"type": "date_time_parse_exception",
                    "reason": "Failed to parse with all enclosed parsers"}) from None


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "false", ""):
        return value == "true"
    raise _Bad("illegal_argument_exception",
               f"Failed to parse value [{java_str(value)}] as only [true] or [false] are allowed.")


def _binary(value: Any) -> bytes:
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise _Bad("illegal_argument_exception",
                   f"failed to decode base64 value [{java_str(value)[:20]}]: Illegal character "
                   "in base64 content") from None


def _ip(value: Any) -> Any:
    try:
        return ipaddress.ip_address(value if isinstance(value, str) else "-")
    except ValueError:
        raise _Bad("illegal_argument_exception", f"'{java_str(value)}' is not an IP string literal.") from None


def coerce(ftype: str, fdef: Mapping, value: Any) -> Any:
    """The indexed form of one leaf value of a field (``_Bad`` if the type refuses it)."""
    if ftype in INTEGER_RANGES:
        return _integer(ftype, fdef, value)
    if ftype in FLOAT_TYPES:
        return _float(ftype, value)
    if ftype in DATE_TYPES:
        return _date(fdef, value)
    if ftype == "boolean":
        return _boolean(value)
    if ftype == "binary":
        return _binary(value)
    if ftype == "ip":
        return _ip(value)
    if ftype in TEXT_TYPES or ftype in KEYWORD_TYPES:
        if isinstance(value, (dict, list)):
            raise _Bad("illegal_state_exception", "Can't get text on a START_OBJECT")
        return java_str(value)
    return value


# --------------------------------------------------------------------------- mappings

def _mapping_error(detail: str) -> ESError:
    inner = {"type": "mapper_parsing_exception", "reason": detail}
    return ESError(400, "mapper_parsing_exception", f"Failed to parse mapping: {detail}",
                   caused_by=inner, root=inner)


def _check_properties(props: Any, where: str) -> None:
    if not isinstance(props, dict):
        raise _mapping_error(f"Expected map for property [properties] on field [{where}] but got {props!r}")
    for name, fdef in props.items():
        if not isinstance(fdef, dict):
            raise _mapping_error(f"Expected map for property [fields] on field [{name}] "
                                 f"but got a {type(fdef).__name__}")
        ftype = fdef.get("type", "object")
        if ftype not in FIELD_TYPES:
            raise _mapping_error(f"No handler for type [{ftype}] declared on field [{name}]")
        if "properties" in fdef:
            if ftype not in OBJECT_TYPES:
                raise _mapping_error(f"unknown parameter [properties] on mapper [{name}] of type [{ftype}]")
            _check_properties(fdef["properties"], name)
        if "fields" in fdef:
            _check_properties(fdef["fields"], name)


def check_mapping(mappings: Any) -> dict:
    """A copy of index-creation ``mappings`` after the checks a real cluster makes (400 if bad)."""
    if mappings is None:
        return {}
    if not isinstance(mappings, dict):
        raise _mapping_error("Root mapping definition must be an object")
    unknown = [f"{k} : {json.dumps(v)}" for k, v in mappings.items() if k not in ROOT_MAPPING_KEYS]
    if unknown:
        raise _mapping_error(f"Root mapping definition has unsupported parameters:  [{', '.join(unknown)}]")
    _check_properties(mappings.get("properties", {}), "_doc")
    return copy.deepcopy(mappings)


def merge_mapping(current: dict, update: dict, prefix: str = "") -> dict:
    """``current`` with ``update``'s fields added (put mapping); a type change is a 400."""
    merged = copy.deepcopy(current)
    for key, value in update.items():
        if key != "properties":
            merged[key] = copy.deepcopy(value)
            continue
        props = merged.setdefault("properties", {})
        for name, fdef in value.items():
            old = props.get(name)
            if old is None:
                props[name] = copy.deepcopy(fdef)
                continue
            old_type, new_type = old.get("type", "object"), fdef.get("type", "object")
            if old_type != new_type:
                raise bad_request(f"mapper [{prefix}{name}] cannot be changed from type [{old_type}] "
                                  f"to [{new_type}]")
            props[name] = merge_mapping(old, fdef, f"{prefix}{name}.")
    return merged


def _dynamic(fdef: Mapping, inherited: str) -> str:
    value = fdef.get("dynamic", inherited)
    return str(value).lower() if not isinstance(value, bool) else ("true" if value else "false")


def _is_object(fdef: Mapping) -> bool:
    return fdef.get("type", "object") in OBJECT_TYPES


def _looks_like_date(text: str) -> bool:
    if "-" not in text and "/" not in text:
        return False
    try:
        parse_date(text, "strict_date_optional_time||yyyy/MM/dd HH:mm:ss Z||yyyy/MM/dd Z")
        return True
    except ValueError:
        return False


def infer(value: Any, date_detection: bool = True) -> dict | None:
    """The field a dynamic mapping adds for a new value (None for null or an empty array)."""
    first = next((v for v in flat(value) if v is not None), None)
    if first is None:
        return None
    if isinstance(first, bool):
        return {"type": "boolean"}
    if isinstance(first, int):
        return {"type": "long"}
    if isinstance(first, float):
        return {"type": "float"}
    if isinstance(first, dict):
        return {"properties": {}}
    if date_detection and _looks_like_date(first):
        return {"type": "date"}
    return {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}


class DocParser:
    """Checks one document against an index's mapping; returns the mapping with dynamic fields added."""

    def __init__(self, mapping: dict, doc_id: str, *, modern: bool, raw: str | None = None) -> None:
        self.mapping, self.doc_id, self.modern = mapping, doc_id, modern
        self.raw = raw
        self.date_detection = mapping.get("date_detection", True) not in (False, "false")

    def parse(self, source: Any) -> dict:
        if not isinstance(source, dict):
            raise self._failure("[1:1] failed to parse: root must be an object", "failed to parse")
        mapping = copy.deepcopy(self.mapping)
        self._object(source, mapping, "", _dynamic(mapping, "true"))
        return mapping

    def _object(self, obj: dict, owner: dict, prefix: str, dynamic: str) -> None:
        for key, value in obj.items():
            self._field(key.split("."), value, owner, prefix, dynamic)

    def _field(self, parts: list[str], value: Any, owner: dict, prefix: str, dynamic: str) -> None:
        name, rest = parts[0], parts[1:]
        path = prefix + name
        if not name:
            raise self._failure("field name cannot be an empty string", path=path)
        fdef = owner.get("properties", {}).get(name)
        if fdef is None:
            fdef = self._add(owner, name, path, {"properties": {}} if rest else value, dynamic)
            if fdef is None:
                return
        if not rest:
            self._value(path, fdef, value, dynamic)
        elif _is_object(fdef):
            self._field(rest, value, fdef, path + ".", _dynamic(fdef, dynamic))
        elif fdef.get("type") != "flattened":
            raise self._failure(f"Could not dynamically add mapping for field [{path}.{'.'.join(rest)}]. "
                                f"Existing mapping for [{path}] must be of type object but found "
                                f"[{fdef.get('type')}].", path=path)

    def _add(self, owner: dict, name: str, path: str, value: Any, dynamic: str) -> dict | None:
        new = infer(value, self.date_detection)
        if new is None or dynamic in ("false", "runtime"):
            return None
        if dynamic == "strict":
            within = path.rpartition(".")[0] or "_doc"
            raise ESError(400, "strict_dynamic_mapping_exception",
                          f"{self._where(path)}mapping set to strict, dynamic introduction of [{name}] "
                          f"within [{within}] is not allowed")
        owner.setdefault("properties", {})[name] = new
        return new

    def _value(self, path: str, fdef: dict, value: Any, dynamic: str) -> None:
        if _is_object(fdef):
            for item in flat(value):
                if item is None:
                    continue
                if not isinstance(item, dict):
                    raise self._failure(f"object mapping for [{path}] tried to parse field "
                                        f"[{path.rsplit('.', 1)[-1]}] as object, but found a concrete value",
                                        path=path)
                self._object(item, fdef, path + ".", _dynamic(fdef, dynamic))
            return
        ftype = fdef.get("type", "object")
        if ftype in OPAQUE_TYPES:
            return
        for item in flat(value):
            if item is not None:
                self._leaf(path, ftype, fdef, item)

    def _leaf(self, path: str, ftype: str, fdef: dict, item: Any) -> None:
        try:
            coerce(ftype, fdef, item)
        except _Bad as bad:
            raise self._failure(f"failed to parse field [{path}] of type [{ftype}] in document with id "
                                f"'{self.doc_id}'. Preview of field's value: '{java_str(item)}'",
                                path=path, caused_by=bad.cause) from None

    def _where(self, path: str) -> str:
        """The ``[line:column]`` prefix of a modern parse error (column estimated)."""
        if not self.modern:
            return ""
        key = json.dumps(path.rsplit(".", 1)[-1]) + ":"
        column = (self.raw or "").find(key)
        return f"[1:{column + len(key) + 1 if column >= 0 else 1}] "

    def _failure(self, reason: str, legacy: str | None = None, *, path: str = "",
                 caused_by: dict | None = None) -> ESError:
        if self.modern:
            where = "" if reason.startswith("[") else self._where(path)
            return ESError(400, "document_parsing_exception", where + reason, caused_by=caused_by)
        return ESError(400, "mapper_parsing_exception", legacy or reason, caused_by=caused_by)


@dataclass(frozen=True)
class FieldRef:
    """A searchable field: its type and definition, where its values are in ``_source``."""

    ftype: str
    fdef: Mapping
    source_path: tuple[str, ...]
    flat_key: tuple[str, ...] | None = None


def resolve_field(mapping: Mapping, path: str) -> FieldRef | None:
    """The mapped field for a dotted path: objects, multi-fields, keys inside a ``flattened`` field."""
    parts, owner = path.split("."), mapping
    for i, part in enumerate(parts):
        fdef = owner.get("properties", {}).get(part)
        if fdef is None:
            return None
        ftype, done = fdef.get("type", "object"), tuple(parts[: i + 1])
        rest = parts[i + 1:]
        if not rest or ftype == "flattened":
            return FieldRef(ftype, fdef, done, tuple(rest) if ftype == "flattened" else None)
        if ftype not in OBJECT_TYPES:
            sub = fdef.get("fields", {}).get(".".join(rest))
            return FieldRef(sub.get("type", "keyword"), sub, done) if sub else None
        owner = fdef
    return None


def extract(node: Any, parts: tuple[str, ...]) -> list[Any]:
    """The values at a dotted path of a document (nested or dotted keys, arrays flattened)."""
    if not parts:
        return [v for v in flat(node) if v is not None]
    if isinstance(node, list):
        return [v for item in node for v in extract(item, parts)]
    if not isinstance(node, dict):
        return []
    found = []
    for i in range(1, len(parts) + 1):
        key = ".".join(parts[:i])
        if key in node:
            found.extend(extract(node[key], parts[i:]))
    return found


def leaves(node: Any) -> Iterator[Any]:
    """Every scalar under a value (a ``flattened`` field's searchable values)."""
    for item in flat(node):
        if isinstance(item, dict):
            for child in item.values():
                yield from leaves(child)
        elif item is not None:
            yield item


def doc_terms(ref: FieldRef, source: Mapping) -> list[Any]:
    """The indexed terms of a field in one document (text: its tokens)."""
    values = extract(source, ref.source_path)
    if ref.ftype == "flattened":
        values = [v for value in values for v in leaves(extract(value, ref.flat_key) if ref.flat_key else value)]
        return [java_str(v) for v in values]
    if ref.ftype in OBJECT_TYPES:
        return [v for value in values for v in leaves(value)]
    if ref.ftype in TEXT_TYPES:
        return [t for v in values for t in tokens(v)]
    ignore_above = ref.fdef.get("ignore_above")
    terms = []
    for value in values:
        try:
            term = coerce(ref.ftype, ref.fdef, value)
        except _Bad:
            continue
        if ignore_above is None or not isinstance(term, str) or len(term) <= int(ignore_above):
            terms.append(term)
    return terms


def query_term(ref: FieldRef, value: Any) -> Any:
    """A query's value as the field indexes it (400 ``query_shard_exception`` if it cannot be)."""
    if ref.ftype in TEXT_TYPES or ref.ftype in ("flattened", *OBJECT_TYPES):
        return java_str(value)
    try:
        return coerce(ref.ftype, ref.fdef, value)
    except _Bad as bad:
        raise ESError(400, "query_shard_exception", f"failed to create query: {bad}",
                      caused_by=bad.cause) from None


# --------------------------------------------------------------------------- documents and indices

@dataclass
class Doc:
    """A stored document."""

    source: dict
    version: int
    seq_no: int
    primary_term: int = 1


@dataclass
class Index:
    """An index: its mapping, settings and documents (in ``_doc`` order)."""

    name: str
    mapping: dict
    settings: dict
    uuid: str = field(default_factory=lambda: base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("="))
    created_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    docs: dict[str, Doc] = field(default_factory=dict)
    deleted_versions: dict[str, int] = field(default_factory=dict)
    seq_no: int = -1

    def next_seq_no(self) -> int:
        self.seq_no += 1
        return self.seq_no

    def lookup(self, path: str) -> FieldRef | None:
        return resolve_field(self.mapping, path)

    def setting(self, name: str, default: str) -> str:
        return str(self.settings.get(name, default))


def normalize_settings(settings: Any) -> dict[str, str]:
    """Index settings as flat ``name: "value"`` pairs without the ``index.`` prefix."""
    flat_settings: dict[str, str] = {}

    def walk(node: Any, prefix: str) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            else:
                flat_settings[f"{prefix}{key}".removeprefix("index.")] = (
                    java_str(value) if not isinstance(value, list) else ",".join(map(java_str, value)))

    if settings:
        if not isinstance(settings, dict):
            raise bad_request("settings must be an object", "settings_exception")
        walk(settings, "")
    return flat_settings


def nest(flat_settings: Mapping[str, Any]) -> dict:
    """Dotted names to nested objects (how GET shows settings)."""
    nested: dict = {}
    for name, value in flat_settings.items():
        node = nested
        *parents, last = name.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return nested


def check_index_name(name: str) -> None:
    """A 400 ``invalid_index_name_exception`` for names a real cluster refuses."""
    problem = None
    if name != name.lower():
        problem = "must be lowercase"
    elif name[:1] in ("_", "-", "+"):
        problem = "must not start with '_', '-', or '+'"
    elif any(c in INVALID_INDEX_CHARS for c in name):
        problem = f"must not contain the following characters [{', '.join(INVALID_INDEX_CHARS)}]"
    elif name in (".", "..") or not name:
        problem = "must not be '.' or '..'"
    elif len(name.encode()) > 255:
        problem = "index name is too long, (256 > 255)"
    if problem:
        raise ESError(400, "invalid_index_name_exception", f"Invalid index name [{name}], {problem}",
                      index_uuid="_na_", index=name)


def b64text(token: str) -> str:
    """A base64 credential as text ("" if it is not base64)."""
    try:
        return base64.b64decode(token + "=" * (-len(token) % 4)).decode("utf-8", "replace")
    except ValueError:
        return ""


def new_id() -> str:
    """An auto-generated document id (20 URL-safe base64 characters, as real ids look)."""
    return base64.urlsafe_b64encode(os.urandom(15)).decode()


# --------------------------------------------------------------------------- queries

Predicate = Callable[[Index, str, dict], bool]


def _single(kind: str, body: Any) -> tuple[str, Any]:
    if not isinstance(body, dict) or len([k for k in body if k not in ("boost", "_name")]) != 1:
        raise bad_request(f"[{kind}] query doesn't support multiple fields, found {list(body or {})}",
                          "parsing_exception")
    return next((k, v) for k, v in body.items() if k not in ("boost", "_name"))


def _field_query(kind: str, body: Any, value_key: str) -> tuple[str, Any, dict]:
    name, spec = _single(kind, body)
    if isinstance(spec, dict):
        if value_key not in spec:
            raise bad_request(f"[{kind}] query does not support {sorted(spec)}", "parsing_exception")
        return name, spec[value_key], spec
    return name, spec, {}


def _term(body: Any) -> Predicate:
    name, value, options = _field_query("term", body, "value")
    fold = bool(options.get("case_insensitive"))

    def pred(index: Index, doc_id: str, source: dict) -> bool:
        if name == "_id":
            return doc_id == java_str(value)
        ref = index.lookup(name)
        if ref is None:
            return False
        target = query_term(ref, value)
        terms = doc_terms(ref, source)
        if fold and isinstance(target, str):
            return target.lower() in (t.lower() for t in terms if isinstance(t, str))
        return target in terms
    return pred


def _terms(body: Any) -> Predicate:
    name, values = _single("terms", body)
    if not isinstance(values, list):
        raise bad_request("[terms] query requires an array of values", "parsing_exception")
    preds = [_term({name: v}) for v in values]
    return lambda index, doc_id, source: any(p(index, doc_id, source) for p in preds)


def _match(body: Any) -> Predicate:
    name, text, options = _field_query("match", body, "query")
    need_all = str(options.get("operator", "or")).lower() == "and"

    def pred(index: Index, doc_id: str, source: dict) -> bool:
        ref = index.lookup(name)
        if ref is None:
            return False
        if ref.ftype not in TEXT_TYPES:
            return query_term(ref, text) in doc_terms(ref, source)
        wanted, have = tokens(text), set(doc_terms(ref, source))
        hits = [t in have for t in wanted]
        return bool(wanted) and (all(hits) if need_all else any(hits))
    return pred


def _exists(body: Any) -> Predicate:
    name = body.get("field") if isinstance(body, dict) else None
    if not isinstance(name, str):
        raise bad_request("[exists] must be provided with a [field]", "parsing_exception")

    def pred(index: Index, doc_id: str, source: dict) -> bool:
        ref = index.lookup(name)
        return ref is not None and bool(doc_terms(ref, source))
    return pred


def _ids(body: Any) -> Predicate:
    values = {java_str(v) for v in (body or {}).get("values", [])}
    return lambda index, doc_id, source: doc_id in values


def _range(body: Any) -> Predicate:
    name, bounds = _single("range", body)
    if not isinstance(bounds, dict):
        raise bad_request("[range] query malformed, no start_object after query name", "parsing_exception")
    checks = {"gt": lambda a, b: a > b, "gte": lambda a, b: a >= b, "lt": lambda a, b: a < b,
              "lte": lambda a, b: a <= b}

    def pred(index: Index, doc_id: str, source: dict) -> bool:
        ref = index.lookup(name)
        if ref is None:
            return False
        if ref.ftype in DATE_TYPES and "format" in bounds:
            ref = FieldRef(ref.ftype, {**ref.fdef, "format": bounds["format"]}, ref.source_path)
        limits = [(checks[op], query_term(ref, v)) for op, v in bounds.items() if op in checks and v is not None]
        return any(all(check(term, limit) for check, limit in limits) for term in doc_terms(ref, source))
    return pred


def _prefix(body: Any) -> Predicate:
    name, value, _ = _field_query("prefix", body, "value")

    def pred(index: Index, doc_id: str, source: dict) -> bool:
        ref = index.lookup(name)
        return ref is not None and any(isinstance(t, str) and t.startswith(java_str(value))
                                       for t in doc_terms(ref, source))
    return pred


def _clauses(body: dict, key: str) -> list[Predicate]:
    value = body.get(key, [])
    return [compile_query(q) for q in (value if isinstance(value, list) else [value])]


def _bool(body: Any) -> Predicate:
    if not isinstance(body, dict):
        raise bad_request("[bool] query malformed", "parsing_exception")
    unknown = set(body) - {"must", "filter", "should", "must_not", "minimum_should_match", "boost", "_name"}
    if unknown:
        raise bad_request(f"[bool] query does not support [{sorted(unknown)[0]}]", "parsing_exception")
    required = _clauses(body, "must") + _clauses(body, "filter")
    should, must_not = _clauses(body, "should"), _clauses(body, "must_not")
    minimum = int(body.get("minimum_should_match", 0 if required else 1) or 0) if should else 0

    def pred(index: Index, doc_id: str, source: dict) -> bool:
        return (all(p(index, doc_id, source) for p in required)
                and not any(p(index, doc_id, source) for p in must_not)
                and sum(p(index, doc_id, source) for p in should) >= minimum)
    return pred


QUERIES: dict[str, Callable[[Any], Predicate]] = {
    "match_all": lambda body: (lambda index, doc_id, source: True),
    "match_none": lambda body: (lambda index, doc_id, source: False),
    "term": _term, "terms": _terms, "match": _match, "exists": _exists, "ids": _ids,
    "range": _range, "prefix": _prefix, "bool": _bool,
}


def compile_query(query: Any) -> Predicate:
    """A predicate for a query (400 ``parsing_exception`` for a malformed or unsupported one)."""
    if query is None:
        return QUERIES["match_all"]({})
    if not isinstance(query, dict) or len(query) != 1:
        raise bad_request("[_na] query malformed, must start with start_object", "parsing_exception")
    kind, body = next(iter(query.items()))
    if kind not in QUERIES:
        raise bad_request(f"unknown query [{kind}]", "parsing_exception")
    return QUERIES[kind](body)


# --------------------------------------------------------------------------- search helpers

@dataclass(frozen=True)
class SortKey:
    """One sort clause."""

    field: str
    desc: bool
    missing_first: bool = False
    unmapped_type: str | None = None


def parse_sort(spec: Any) -> list[SortKey]:
    """Sort clauses from the body (``[{"f": "desc"}]``, ``["f"]``...) or the URL (``f:desc,g``)."""
    if spec is None:
        return []
    keys = []
    for item in spec if isinstance(spec, list) else [spec]:
        if isinstance(item, str):
            for part in item.split(","):
                name, _, order = part.partition(":")
                keys.append(SortKey(name, (order or ("desc" if name == "_score" else "asc")) == "desc"))
        elif isinstance(item, dict) and len(item) == 1:
            name, options = next(iter(item.items()))
            options = {"order": options} if isinstance(options, str) else dict(options)
            order = options.get("order", "desc" if name == "_score" else "asc")
            keys.append(SortKey(name, order == "desc", options.get("missing") == "_first",
                                options.get("unmapped_type")))
        else:
            raise bad_request(f"malformed sort clause {item!r}", "parsing_exception")
    return keys


def sort_value(key: SortKey, index: Index, doc: Doc) -> Any:
    """A hit's value for one sort clause (None when the document has none)."""
    if key.field == "_doc":
        return doc.seq_no
    if key.field == "_score":
        return 1.0
    ref = index.lookup(key.field)
    if ref is None:
        if key.unmapped_type:
            return None
        raise search_failure(index.name, ESError(400, "query_shard_exception",
                                                 f"No mapping found for [{key.field}] in order to sort on",
                                                 index_uuid=index.uuid, index=index.name))
    if ref.ftype in TEXT_TYPES:
        raise search_failure(index.name, bad_request(
            f"Fielddata is disabled on [{key.field}] in [{index.name}]. Text fields are not optimised for "
            "operations that require per-document field data like aggregations and sorting, so these "
            "operations are disabled by default. Please use a keyword field instead."))
    terms = [int(t) if isinstance(t, bool) else str(t) if ref.ftype == "ip" else t
             for t in doc_terms(ref, doc.source)]
    if not terms:
        return None
    return max(terms) if key.desc else min(terms)


def order_hits(hits: list[tuple[Index, str, Doc, list[Any]]], keys: list[SortKey]) -> list:
    """Hits ordered by their sort values, missing values last (or first), ties in ``_doc`` order."""
    for i in reversed(range(len(keys))):
        present = [h for h in hits if h[3][i] is not None]
        missing = [h for h in hits if h[3][i] is None]
        present.sort(key=lambda h: h[3][i], reverse=keys[i].desc)
        hits = missing + present if keys[i].missing_first else present + missing
    return hits


def after(values: list[Any], cursor: list[Any], keys: list[SortKey]) -> bool:
    """Whether a hit's sort values come strictly after ``search_after``'s."""
    for value, mark, key in zip(values, cursor, keys, strict=False):
        if value == mark:
            continue
        if value is None or mark is None:
            return value is None
        return value < mark if key.desc else value > mark
    return False


def source_filter(body_spec: Any, params: Mapping[str, str]) -> tuple[bool, list[str], list[str]]:
    """(enabled, includes, excludes) from ``_source`` in the body or the URL."""
    spec = body_spec if body_spec is not None else params.get("_source")
    if spec in (False, "false"):
        return False, [], []
    includes: list[str] = []
    excludes = [p for p in params.get("_source_excludes", "").split(",") if p]
    if isinstance(spec, str) and spec != "true":
        includes = spec.split(",")
    elif isinstance(spec, list):
        includes = list(spec)
    elif isinstance(spec, dict):
        includes = _as_list(spec.get("includes", spec.get("include", [])))
        excludes += _as_list(spec.get("excludes", spec.get("exclude", [])))
    includes += [p for p in params.get("_source_includes", "").split(",") if p]
    return True, includes, excludes


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def filter_source(node: Any, includes: list[str], excludes: list[str], prefix: str = "") -> Any:
    """A ``_source`` with only the included and not excluded paths (wildcards allowed)."""
    if isinstance(node, list):
        return [filter_source(item, includes, excludes, prefix) for item in node]
    if not isinstance(node, dict):
        return node
    kept = {}
    for key, value in node.items():
        path = prefix + key
        if any(fnmatchcase(path, p) for p in excludes):
            continue
        if not includes or any(fnmatchcase(path, p) for p in includes):
            kept[key] = filter_source(value, [], excludes, path + ".")
        elif isinstance(value, (dict, list)) and any(p.startswith(path + ".") or "*" in p for p in includes):
            inner = filter_source(value, includes, excludes, path + ".")
            if inner:
                kept[key] = inner
    return kept


def flag(params: Mapping[str, str], name: str) -> bool:
    return params.get(name, "false") in ("", "true")


# --------------------------------------------------------------------------- the cluster

@dataclass
class Call:
    """One request as the endpoints see it."""

    method: str
    path: str
    params: dict[str, str]
    body: bytes
    groups: dict[str, str]

    def json(self) -> Any:
        if not self.body.strip():
            return None
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise ESError(400, "x_content_parse_exception", f"[1:1] Unexpected character: {exc}") from None

    def json_object(self) -> dict:
        body = self.json()
        if body is not None and not isinstance(body, dict):
            raise bad_request("request body must be an object", "parsing_exception")
        return body or {}


@dataclass
class BulkOp:
    """One action of a ``_bulk`` body."""

    action: str
    index: str
    doc_id: str | None
    meta: dict
    source: Any = None
    raw: str | None = None
    error: ESError | None = None


@dataclass
class Scroll:
    """A scroll's remaining hits."""

    hits: list[dict]
    total: dict | None
    size: int
    shards: dict


class Cluster:
    """The in-memory cluster: indices, documents and the REST endpoints over them.

    Not thread-safe by itself: :class:`ESServer` calls it under one lock.
    """

    def __init__(self, version: str, take_item_fault: Callable[[], int | None]) -> None:
        self.version = version
        self.major = int(version.split(".")[0])
        self.modern = tuple(int(p) for p in version.split(".")[:2]) >= DOCUMENT_PARSING_SINCE
        self.take_item_fault = take_item_fault
        self.indices: dict[str, Index] = {}
        self.scrolls: dict[str, Scroll] = {}
        self.cluster_uuid = new_id()[:22]

    # ---- index resolution

    def resolve(self, expression: str, params: Mapping[str, str] | None = None) -> list[Index]:
        """The indices an expression names (``a,b``, ``_all``, ``*``, ``log-*``); 404 for a missing name."""
        found: dict[str, Index] = {}
        ignore = flag(params or {}, "ignore_unavailable")
        for part in expression.split(","):
            if part in ("_all", "*", ""):
                found.update(self.indices)
            elif "*" in part or "?" in part:
                found.update({n: i for n, i in self.indices.items() if fnmatchcase(n, part)})
            elif part in self.indices:
                found[part] = self.indices[part]
            elif not ignore:
                raise index_not_found(part)
        return list(found.values())

    def one(self, name: str) -> Index:
        if name not in self.indices:
            raise index_not_found(name)
        return self.indices[name]

    def for_write(self, name: str) -> Index:
        """The index a write goes to, created with a dynamic mapping if missing (as by default)."""
        if name not in self.indices:
            check_index_name(name)
            self.indices[name] = Index(name, {}, {})
        return self.indices[name]

    # ---- cluster endpoints

    def info(self, call: Call) -> tuple[int, Any]:
        minimum = {9: ("8.18.0", "8.0.0"), 8: ("7.17.0", "7.0.0")}.get(self.major, ("6.8.0", "6.0.0-beta1"))
        return 200, {
            "name": "es-server-node", "cluster_name": "es-server", "cluster_uuid": self.cluster_uuid,
            "version": {"number": self.version, "build_flavor": "default", "build_type": "tar",
                        "build_hash": "0" * 40, "build_date": "2025-01-01T00:00:00.000000000Z",
                        "build_snapshot": False, "lucene_version": LUCENE.get(self.major, "9.11.1"),
                        "minimum_wire_compatibility_version": minimum[0],
                        "minimum_index_compatibility_version": minimum[1]},
            "tagline": "You Know, for Search"}

    def health(self, call: Call) -> tuple[int, Any]:
        replicas = any(i.setting("number_of_replicas", "1") != "0" for i in self.indices.values())
        count = len(self.indices)
        return 200, {
            "cluster_name": "es-server", "status": "yellow" if replicas else "green", "timed_out": False,
            "number_of_nodes": 1, "number_of_data_nodes": 1, "active_primary_shards": count,
            "active_shards": count, "relocating_shards": 0, "initializing_shards": 0,
            "unassigned_shards": sum(i.setting("number_of_replicas", "1") != "0" for i in self.indices.values()),
            "delayed_unassigned_shards": 0, "number_of_pending_tasks": 0, "number_of_in_flight_fetch": 0,
            "task_max_waiting_in_queue_millis": 0, "active_shards_percent_as_number": 100.0 if not replicas else 50.0}

    # ---- index endpoints

    def create_index(self, call: Call) -> tuple[int, Any]:
        name = call.groups["index"]
        check_index_name(name)
        if name in self.indices:
            existing = self.indices[name]
            raise ESError(400, "resource_already_exists_exception",
                          f"index [{name}/{existing.uuid}] already exists", index_uuid=existing.uuid, index=name)
        body = call.json_object()
        unknown = set(body) - {"mappings", "settings", "aliases"}
        if unknown:
            raise bad_request(f"unknown key [{sorted(unknown)[0]}] for create index", "parse_exception")
        if body.get("aliases"):
            raise bad_request("es_server does not support aliases")
        self.indices[name] = Index(name, check_mapping(body.get("mappings")), normalize_settings(body.get("settings")))
        return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}

    def index_exists(self, call: Call) -> tuple[int, Any]:
        try:
            return (200 if self.resolve(call.groups["index"], call.params) else 404), None
        except ESError:
            return 404, None

    def get_index(self, call: Call) -> tuple[int, Any]:
        return 200, {i.name: {"aliases": {}, "mappings": i.mapping, "settings": {"index": self._settings(i)}}
                     for i in self.resolve(call.groups["index"], call.params)}

    def _settings(self, index: Index) -> dict:
        defaults = {"number_of_shards": "1", "number_of_replicas": "1"}
        return nest({**defaults, **index.settings, "uuid": index.uuid, "provided_name": index.name,
                     "creation_date": str(index.created_ms), "version.created": "8000099"})

    def delete_index(self, call: Call) -> tuple[int, Any]:
        for index in self.resolve(call.groups["index"], call.params):
            del self.indices[index.name]
        return 200, {"acknowledged": True}

    def get_mapping(self, call: Call) -> tuple[int, Any]:
        indices = self.resolve(call.groups.get("index", "_all"), call.params)
        return 200, {i.name: {"mappings": i.mapping} for i in indices}

    def put_mapping(self, call: Call) -> tuple[int, Any]:
        update = check_mapping(call.json_object())
        for index in self.resolve(call.groups["index"], call.params):
            index.mapping = merge_mapping(index.mapping, update)
        return 200, {"acknowledged": True}

    def refresh(self, call: Call) -> tuple[int, Any]:
        count = len(self.resolve(call.groups.get("index", "_all"), call.params))
        return 200, {"_shards": {"total": 2 * count, "successful": count, "failed": 0}}

    # ---- documents

    def _result(self, index: Index, doc_id: str, doc: Doc, result: str, shards: dict = SHARDS_WRITE) -> dict:
        return {"_index": index.name, "_id": doc_id, "_version": doc.version, "result": result,
                "_shards": dict(shards), "_seq_no": doc.seq_no, "_primary_term": doc.primary_term}

    def _conflict(self, index: Index, doc_id: str, reason: str) -> ESError:
        return ESError(409, "version_conflict_engine_exception", f"[{doc_id}]: version conflict, {reason}",
                       index_uuid=index.uuid, shard="0", index=index.name)

    def _check_seq_no(self, index: Index, doc_id: str, meta: Mapping[str, Any]) -> None:
        seq_no, term = meta.get("if_seq_no"), meta.get("if_primary_term")
        if seq_no is None and term is None:
            return
        current = index.docs.get(doc_id)
        wanted = f"required seqNo [{seq_no}], primary term [{term}]"
        if current is None:
            raise self._conflict(index, doc_id, f"{wanted}. but no document was found")
        if int(seq_no) != current.seq_no or int(term if term is not None else 1) != current.primary_term:
            raise self._conflict(index, doc_id, f"{wanted}. current document has seqNo [{current.seq_no}] "
                                                f"and primary term [{current.primary_term}]")

    def _store(self, index: Index, doc_id: str, source: Any, raw: str | None) -> tuple[Doc, bool]:
        index.mapping = DocParser(index.mapping, doc_id, modern=self.modern, raw=raw).parse(source)
        current = index.docs.pop(doc_id, None)
        version = (current.version if current else index.deleted_versions.pop(doc_id, 0)) + 1
        doc = index.docs[doc_id] = Doc(source, version, index.next_seq_no())
        return doc, current is None

    def write(self, name: str, doc_id: str | None, source: Any, meta: Mapping[str, Any], *,
              create: bool = False, raw: str | None = None) -> tuple[int, dict]:
        """Index (or create) one document: 201 created, 200 updated, 409 if ``create`` finds one."""
        index = self.for_write(name)
        doc_id = doc_id or new_id()
        current = index.docs.get(doc_id)
        if create and current is not None:
            raise self._conflict(index, doc_id, f"document already exists (current version [{current.version}])")
        self._check_seq_no(index, doc_id, meta)
        doc, created = self._store(index, doc_id, source, raw)
        return (201 if created else 200), self._result(index, doc_id, doc, "created" if created else "updated")

    def update(self, name: str, doc_id: str, body: Any, meta: Mapping[str, Any]) -> tuple[int, dict]:
        """Partial update with ``doc`` (merged), ``doc_as_upsert`` or ``upsert``; noop if nothing changes."""
        if not isinstance(body, dict) or ("doc" not in body and "upsert" not in body):
            if isinstance(body, dict) and "script" in body:
                raise bad_request("es_server does not support scripts")
            raise ESError(400, "action_request_validation_exception",
                          "Validation Failed: 1: script or doc is missing;")
        index = self.for_write(name)
        self._check_seq_no(index, doc_id, meta)
        current = index.docs.get(doc_id)
        if current is None:
            upsert = body.get("doc") if body.get("doc_as_upsert") else body.get("upsert")
            if upsert is None:
                raise ESError(404, "document_missing_exception", f"[{doc_id}]: document missing",
                              index_uuid=index.uuid, shard="0", index=index.name)
            doc, _ = self._store(index, doc_id, copy.deepcopy(upsert), None)
            return 201, self._result(index, doc_id, doc, "created")
        merged = deep_merge(current.source, body.get("doc") or {})
        if merged == current.source and body.get("detect_noop", True) not in (False, "false"):
            return 200, self._result(index, doc_id, current, "noop", SHARDS_NOOP)
        doc, _ = self._store(index, doc_id, merged, None)
        return 200, self._result(index, doc_id, doc, "updated")

    def delete(self, name: str, doc_id: str, meta: Mapping[str, Any]) -> tuple[int, dict]:
        """Delete one document: 200 deleted, 404 ``not_found`` (a result, not an error)."""
        index = self.one(name)
        self._check_seq_no(index, doc_id, meta)
        current = index.docs.pop(doc_id, None)
        version = (current.version if current else index.deleted_versions.get(doc_id, 0)) + 1
        index.deleted_versions[doc_id] = version
        tombstone = Doc({}, version, index.next_seq_no())
        return (200 if current else 404), self._result(index, doc_id, tombstone,
                                                       "deleted" if current else "not_found")

    def index_doc(self, call: Call) -> tuple[int, Any]:
        if not call.body.strip():
            raise ESError(400, "action_request_validation_exception", "Validation Failed: 1: source is missing;")
        create = call.params.get("op_type") == "create" or "/_create/" in call.path
        return self.write(call.groups["index"], call.groups.get("id"), call.json(), call.params,
                          create=create, raw=call.body.decode("utf-8", "replace"))

    def update_doc(self, call: Call) -> tuple[int, Any]:
        return self.update(call.groups["index"], call.groups["id"], call.json(), call.params)

    def delete_doc(self, call: Call) -> tuple[int, Any]:
        return self.delete(call.groups["index"], call.groups["id"], call.params)

    def get_doc(self, call: Call) -> tuple[int, Any]:
        index, doc_id = self.one(call.groups["index"]), call.groups["id"]
        doc = index.docs.get(doc_id)
        if doc is None:
            return 404, {"_index": index.name, "_id": doc_id, "found": False}
        body = {"_index": index.name, "_id": doc_id, "_version": doc.version, "_seq_no": doc.seq_no,
                "_primary_term": doc.primary_term, "found": True}
        enabled, includes, excludes = source_filter(None, call.params)
        if enabled:
            body["_source"] = filter_source(doc.source, includes, excludes)
        return 200, body

    def mget(self, call: Call) -> tuple[int, Any]:
        """``_mget``: real-time gets of ``ids`` (of the path's index) or ``docs``, each found or not."""
        body, default = call.json_object(), call.groups.get("index")
        specs = [{"_index": default, "_id": i} for i in body.get("ids", [])] + list(body.get("docs", []))
        if not specs:
            raise ESError(400, "action_request_validation_exception", "Validation Failed: 1: no documents to get;")
        enabled, includes, excludes = source_filter(None, call.params)
        docs = []
        for spec in specs:
            name, doc_id = spec.get("_index") or default, str(spec["_id"])
            if name is None:
                raise ESError(400, "action_request_validation_exception", "Validation Failed: 1: index is missing;")
            index = self.indices.get(name)
            if index is None:
                docs.append({"_index": name, "_id": doc_id, "error": index_not_found(name).cause()})
                continue
            doc = index.docs.get(doc_id)
            if doc is None:
                docs.append({"_index": name, "_id": doc_id, "found": False})
                continue
            got = {"_index": name, "_id": doc_id, "_version": doc.version, "_seq_no": doc.seq_no,
                   "_primary_term": doc.primary_term, "found": True}
            if enabled:
                got["_source"] = filter_source(doc.source, includes, excludes)
            docs.append(got)
        return 200, {"docs": docs}

    def doc_exists(self, call: Call) -> tuple[int, Any]:
        index = self.indices.get(call.groups["index"])
        return (200 if index and call.groups["id"] in index.docs else 404), None

    def get_source(self, call: Call) -> tuple[int, Any]:
        index, doc_id = self.one(call.groups["index"]), call.groups["id"]
        doc = index.docs.get(doc_id)
        if doc is None:
            raise ESError(404, "resource_not_found_exception",
                          f"Document not found [{index.name}]/[{doc_id}]")
        _, includes, excludes = source_filter(None, call.params)
        return 200, filter_source(doc.source, includes, excludes)

    # ---- bulk

    def bulk(self, call: Call) -> tuple[int, Any]:
        """``_bulk``: every action applied in order, each with its own status, result or error."""
        started = time.monotonic()
        ops = parse_bulk(call.body, call.groups.get("index"), self.modern)
        items = [self._bulk_item(op) for op in ops]
        errors = any("error" in next(iter(item.values())) for item in items)
        return 200, {"errors": errors, "took": int((time.monotonic() - started) * 1000), "items": items}

    def _bulk_item(self, op: BulkOp) -> dict:
        if op.action in ("index", "create") and op.doc_id is None:
            op.doc_id = new_id()
        fault = self.take_item_fault()
        try:
            if fault is not None:
                raise fault_error(fault, op.index, FAULTS)
            if op.error is not None:
                raise op.error
            status, result = self._apply(op)
        except ESError as err:
            return {op.action: {"_index": op.index, "_id": op.doc_id, "status": err.status, "error": err.cause()}}
        return {op.action: {**result, "status": status}}

    def _apply(self, op: BulkOp) -> tuple[int, dict]:
        if op.action == "delete":
            return self.delete(op.index, op.doc_id or "", op.meta)
        if op.action == "update":
            return self.update(op.index, op.doc_id or "", op.source, op.meta)
        return self.write(op.index, op.doc_id, op.source, op.meta, create=op.action == "create", raw=op.raw)

    # ---- search

    def count(self, call: Call) -> tuple[int, Any]:
        indices = self.resolve(call.groups.get("index", "_all"), call.params)
        body = call.json_object()
        unknown = set(body) - {"query"}
        if unknown:
            raise bad_request(f"request does not support [{sorted(unknown)[0]}]", "parsing_exception")
        pred = compile_query(body.get("query"))
        total = sum(self._matches(index, pred) for index in indices)
        return 200, {"count": total, "_shards": self._shards(indices)}

    def _matches(self, index: Index, pred: Predicate) -> int:
        try:
            return sum(1 for doc_id, doc in index.docs.items() if pred(index, doc_id, doc.source))
        except ESError as err:
            raise as_search_failure(index.name, err) from None

    @staticmethod
    def _shards(indices: list[Index]) -> dict:
        return {"total": len(indices), "successful": len(indices), "skipped": 0, "failed": 0}

    def search(self, call: Call) -> tuple[int, Any]:
        """``_search``: query, sort, ``search_after``, paging, ``_source`` filtering, scroll."""
        started = time.monotonic()
        indices = self.resolve(call.groups.get("index", "_all"), call.params)
        body = call.json_object()
        unsupported = set(body) - SEARCH_KEYS
        if unsupported:
            raise bad_request(f"es_server does not support [{sorted(unsupported)[0]}] in a search")
        size = int(body.get("size", call.params.get("size", 10)))
        start = int(body.get("from", call.params.get("from", 0)))
        keys = parse_sort(body.get("sort", call.params.get("sort")))
        self._check_window(indices, start, size)
        hits = self._search_hits(indices, compile_query(body.get("query")), keys)
        total = self._total(len(hits), body.get("track_total_hits", call.params.get("track_total_hits")))
        if body.get("search_after") is not None:
            if not keys:
                raise bad_request("Sort must contain at least one field.", "search_phase_execution_exception")
            hits = [h for h in hits if after(h[3], body["search_after"], keys)]
        rendered = [self._hit(h, keys, body, call.params) for h in hits]
        response = {"took": 0, "timed_out": False, "_shards": self._shards(indices),
                    "hits": {**({"total": total} if total else {}), "max_score": None, "hits": []}}
        if "scroll" in call.params:
            scroll_id = base64.b64encode(os.urandom(24)).decode()
            self.scrolls[scroll_id] = Scroll(rendered, total, size, response["_shards"])
            response = {"_scroll_id": scroll_id, **response}
            rendered = self._next_page(scroll_id)
        else:
            rendered = rendered[start:start + size]
        response["hits"]["hits"] = rendered
        response["hits"]["max_score"] = 1.0 if rendered and not keys else None
        response["took"] = int((time.monotonic() - started) * 1000)
        return 200, response

    def _check_window(self, indices: list[Index], start: int, size: int) -> None:
        for index in indices:
            limit = int(index.setting("max_result_window", str(MAX_RESULT_WINDOW)))
            if start + size > limit:
                raise search_failure(index.name, bad_request(
                    f"Result window is too large, from + size must be less than or equal to: [{limit}] but "
                    f"was [{start + size}]. See the scroll api for a more efficient way to request large data "
                    "sets. This limit can be set by changing the [index.max_result_window] index level setting."))

    def _search_hits(self, indices: list[Index], pred: Predicate, keys: list[SortKey]) -> list:
        hits = []
        for index in indices:
            try:
                for doc_id, doc in index.docs.items():
                    if pred(index, doc_id, doc.source):
                        hits.append((index, doc_id, doc, [sort_value(k, index, doc) for k in keys]))
            except ESError as err:
                raise as_search_failure(index.name, err) from None
        return order_hits(hits, keys) if keys else hits

    @staticmethod
    def _total(count: int, track: Any) -> dict | None:
        if track in (False, "false"):
            return None
        limit = DEFAULT_TRACK_TOTAL_HITS if track is None else (None if track in (True, "true") else int(track))
        if limit is not None and count > limit:
            return {"value": limit, "relation": "gte"}
        return {"value": count, "relation": "eq"}

    @staticmethod
    def _hit(hit: tuple, keys: list[SortKey], body: Mapping, params: Mapping[str, str]) -> dict:
        index, doc_id, doc, values = hit
        rendered: dict[str, Any] = {"_index": index.name, "_id": doc_id, "_score": None if keys else 1.0}
        if body.get("version") or flag(params, "version"):
            rendered["_version"] = doc.version
        if body.get("seq_no_primary_term") or flag(params, "seq_no_primary_term"):
            rendered.update(_seq_no=doc.seq_no, _primary_term=doc.primary_term)
        enabled, includes, excludes = source_filter(body.get("_source"), params)
        if enabled:
            rendered["_source"] = filter_source(doc.source, includes, excludes)
        if keys:
            rendered["sort"] = values
        return rendered

    def _next_page(self, scroll_id: str) -> list[dict]:
        scroll = self.scrolls[scroll_id]
        page, scroll.hits = scroll.hits[:scroll.size], scroll.hits[scroll.size:]
        return page

    def scroll(self, call: Call) -> tuple[int, Any]:
        body = call.json_object()
        scroll_id = body.get("scroll_id") or call.groups.get("scroll_id") or call.params.get("scroll_id")
        if scroll_id not in self.scrolls:
            missing = {"type": "search_context_missing_exception",
                       "reason": f"No search context found for id [{scroll_id}]"}
            raise ESError(404, "search_phase_execution_exception", "all shards failed", root=missing,
                          caused_by=missing, phase="query", grouped=True, failed_shards=[])
        scroll = self.scrolls[scroll_id]
        page = self._next_page(scroll_id)
        hits = {**({"total": scroll.total} if scroll.total else {}),
                "max_score": 1.0 if page and "sort" not in page[0] else None, "hits": page}
        return 200, {"_scroll_id": scroll_id, "took": 0, "timed_out": False, "_shards": scroll.shards,
                     "hits": hits}

    def clear_scroll(self, call: Call) -> tuple[int, Any]:
        body = call.json_object()
        ids = body.get("scroll_id") or call.groups.get("scroll_id") or []
        ids = ids.split(",") if isinstance(ids, str) else list(ids)
        if ids == ["_all"]:
            ids = list(self.scrolls)
        freed = sum(self.scrolls.pop(i, None) is not None for i in ids)
        return (200 if freed or not ids else 404), {"succeeded": True, "num_freed": freed}


def deep_merge(base: Any, update: Any) -> Any:
    """An update's ``doc`` merged into a source: objects recursively, anything else replaced."""
    if not isinstance(base, dict) or not isinstance(update, dict):
        return copy.deepcopy(update)
    merged = dict(base)
    for key, value in update.items():
        merged[key] = deep_merge(base.get(key), value) if key in base else copy.deepcopy(value)
    return merged


def fault_error(status: int, index: str, table: Mapping[int, tuple[str, str]]) -> ESError:
    """The error an injected fault answers with (429 rejected execution, 503 unavailable...)."""
    type_, reason = table.get(status, ("exception", f"injected failure with status [{status}]"))
    return ESError(status, type_, reason.format(index=index or "_na_"))


def _bulk_line(line: bytes, number: int) -> dict:
    try:
        meta = json.loads(line)
    except ValueError:
        raise bad_request(f"Malformed action/metadata line [{number}], expected START_OBJECT but found "
                          "[VALUE_STRING]") from None
    if not isinstance(meta, dict) or len(meta) != 1:
        raise bad_request(f"Malformed action/metadata line [{number}], expected START_OBJECT or END_OBJECT "
                          f"but found [{type(meta).__name__}]")
    action, options = next(iter(meta.items()))
    if action not in BULK_ACTIONS:
        raise bad_request(f"Malformed action/metadata line [{number}], expected field [create], [delete], "
                          f"[index] or [update] but found [{action}]")
    if not isinstance(options, dict):
        raise bad_request(f"Malformed action/metadata line [{number}], expected START_OBJECT")
    unknown = set(options) - BULK_META_KEYS
    if unknown:
        raise bad_request(f"Action/metadata line [{number}] contains an unknown parameter [{sorted(unknown)[0]}]")
    return meta


def _bulk_source(action: str, line: bytes, op: BulkOp, modern: bool) -> None:
    op.raw = line.decode("utf-8", "replace")
    try:
        op.source = json.loads(line)
    except ValueError as exc:
        if action == "update":
            raise ESError(400, "x_content_parse_exception", f"[1:1] failed to parse update request: {exc}") from None
        cause = {"type": "json_parse_exception", "reason": str(exc)}
        op.error = ESError(400, "document_parsing_exception" if modern else "mapper_parsing_exception",
                           ("[1:1] " if modern else "") + "failed to parse", caused_by=cause)


def parse_bulk(body: bytes, default_index: str | None, modern: bool = True) -> list[BulkOp]:
    """The actions of an NDJSON bulk body; a malformed body is a 400 for the whole request."""
    if not body.strip():
        raise ESError(400, "action_request_validation_exception", "Validation Failed: 1: no requests added;")
    if not body.endswith(b"\n"):
        raise bad_request("The bulk request must be terminated by a newline [\\n]")
    lines = [line for line in body.split(b"\n") if line.strip()]
    ops, number, missing = [], 0, []
    while number < len(lines):
        meta = _bulk_line(lines[number], number + 1)
        action, options = next(iter(meta.items()))
        index = options.get("_index") or default_index
        if not index:
            missing.append(len(ops) + 1)
        op = BulkOp(action, index or "", None if options.get("_id") is None else str(options["_id"]), options)
        number += 1
        if action != "delete":
            if number >= len(lines):
                raise bad_request("The bulk request must be terminated by a newline [\\n]")
            _bulk_source(action, lines[number], op, modern)
            number += 1
        if action in ("update", "delete") and op.doc_id is None:
            raise ESError(400, "action_request_validation_exception", "Validation Failed: 1: id is missing;")
        ops.append(op)
    if missing:
        reasons = "".join(f"{n}: index is missing;" for n in missing)
        raise ESError(400, "action_request_validation_exception", f"Validation Failed: {reasons}")
    return ops


# --------------------------------------------------------------------------- routing

INDEX = r"(?P<index>_all|[^/_][^/]*)"
ID = r"(?P<id>[^/]+)"
ROUTES: list[tuple[frozenset[str], re.Pattern, str]] = [
    (frozenset(m.split()), re.compile(p), name) for m, p, name in [
        ("GET HEAD", r"/", "info"),
        ("GET", r"/_cluster/health", "health"),
        ("POST PUT", r"/_bulk", "bulk"),
        ("GET POST", r"/_search", "search"),
        ("GET POST", r"/_search/scroll(?:/(?P<scroll_id>[^/]+))?", "scroll"),
        ("DELETE", r"/_search/scroll(?:/(?P<scroll_id>[^/]+))?", "clear_scroll"),
        ("GET POST", r"/_count", "count"),
        ("GET POST", r"/_refresh", "refresh"),
        ("GET", r"/_mapping", "get_mapping"),
        ("HEAD", rf"/{INDEX}", "index_exists"),
        ("GET", rf"/{INDEX}", "get_index"),
        ("PUT", rf"/{INDEX}", "create_index"),
        ("DELETE", rf"/{INDEX}", "delete_index"),
        ("GET", rf"/{INDEX}/_mapping", "get_mapping"),
        ("PUT POST", rf"/{INDEX}/_mapping", "put_mapping"),
        ("GET POST", rf"/{INDEX}/_refresh", "refresh"),
        ("POST PUT", rf"/{INDEX}/_bulk", "bulk"),
        ("GET POST", rf"/{INDEX}/_search", "search"),
        ("GET POST", rf"/{INDEX}/_count", "count"),
        ("POST", rf"/{INDEX}/_doc", "index_doc"),
        ("PUT POST", rf"/{INDEX}/_doc/{ID}", "index_doc"),
        ("GET", rf"/{INDEX}/_doc/{ID}", "get_doc"),
        ("GET POST", r"/_mget", "mget"),
        ("GET POST", rf"/{INDEX}/_mget", "mget"),
        ("HEAD", rf"/{INDEX}/_doc/{ID}", "doc_exists"),
        ("DELETE", rf"/{INDEX}/_doc/{ID}", "delete_doc"),
        ("PUT POST", rf"/{INDEX}/_create/{ID}", "index_doc"),
        ("POST", rf"/{INDEX}/_update/{ID}", "update_doc"),
        ("GET", rf"/{INDEX}/_source/{ID}", "get_source"),
    ]
]


def route(method: str, path: str) -> tuple[str, dict[str, str]]:
    """The endpoint for a request and its path parameters (unquoted); 405 or 400 if none."""
    allowed: set[str] = set()
    for methods, pattern, name in ROUTES:
        m = pattern.fullmatch(path)
        if m is None:
            continue
        if method in methods:
            return name, {k: unquote(v) for k, v in m.groupdict().items() if v is not None}
        allowed |= methods
    if allowed:
        raise ESError(405, "illegal_argument_exception",
                      f"Incorrect HTTP method for uri [{path}] and method [{method}], allowed: "
                      f"[{', '.join(sorted(allowed))}]")
    raise bad_request(f"no handler found for uri [{path}] and method [{method}]")


# --------------------------------------------------------------------------- HTTP

@dataclass(frozen=True)
class Received:
    """One request as the client sent it."""

    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def ndjson(self) -> list[Any]:
        return [json.loads(line) for line in self.body.splitlines() if line.strip()]


@dataclass
class Reply:
    """A response: status, JSON body (None: empty), extra headers, whether it names the product."""

    status: int
    body: Any = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    product: bool = True


class _Faults:
    """Injected failures: per bulk item, and per whole request."""

    def __init__(self) -> None:
        self.items: deque[int] = deque()
        self.whole: deque[tuple[int, str]] = deque()

    def take_item(self) -> int | None:
        return self.items.popleft() if self.items else None

    def take_whole(self, path: str) -> int | None:
        if self.whole and self.whole[0][1] in path:
            return self.whole.popleft()[0]
        return None


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], es: ESServer) -> None:
        self.es = es
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse lookup of the host name (slow where DNS is missing)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: clients hang up, refuse certificates, or the test took the server down."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30
    #: Headers and body go out in two writes; without TCP_NODELAY the body waits ~40 ms for a delayed ACK.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def setup(self) -> None:
        if self.server.es.ssl_context is not None:
            self.request = self.server.es.ssl_context.wrap_socket(self.request, server_side=True)
        self.server.es._track(self.request)
        super().setup()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.es._untrack(self.request)
            if isinstance(self.request, ssl.SSLSocket):  # socketserver closes only the raw socket it accepted
                try:
                    self.request.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                self.request.close()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = b""
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            body = gzip.decompress(body)
        return body

    def _handle(self) -> None:
        split = urlsplit(self.path)
        received = Received(self.command, split.path, dict(parse_qsl(split.query, keep_blank_values=True)),
                            {k.lower(): v for k, v in self.headers.items()}, self._body())
        reply = self.server.es._respond(received)
        payload = b"" if reply.body is None else json.dumps(reply.body).encode()
        self.send_response_only(reply.status)
        if reply.product:
            self.send_header("X-elastic-product", "Elasticsearch")
        self.send_header("content-type", self.server.es._content_type(received))
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("content-length", "0" if self.command == "HEAD" else str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _handle


class ESServer:
    """An Elasticsearch stand-in on 127.0.0.1 for tests with the real client (see the module doc).

    ``username``/``password`` require HTTP basic auth, ``api_key`` (``"id:key"``
    base64-encoded, or an ``(id, key)`` pair, as the client takes it) accepts
    ``Authorization: ApiKey``; with both, either works. ``tls=(certfile, keyfile)``
    serves https. ``version`` is the Elasticsearch version it claims.
    """

    def __init__(self, *, username: str | None = None, password: str | None = None,
                 api_key: str | tuple[str, str] | None = None, tls: tuple[str, str] | None = None,
                 version: str = DEFAULT_VERSION, port: int = 0) -> None:
        self.username, self.password = username, password
        if isinstance(api_key, (tuple, list)):
            api_key = base64.b64encode(":".join(api_key).encode()).decode()
        self.api_key = api_key
        self.ssl_context = self._ssl(tls)
        self.version = version
        self._port = port
        self._lock = threading.RLock()
        self._faults = _Faults()
        self._hold: str | None = None
        self._release = threading.Event()
        self._drop_held = False
        self.held = threading.Event()
        self.cluster = Cluster(version, self._faults.take_item)
        self._received: list[Received] = []
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @staticmethod
    def _ssl(tls: tuple[str, str] | None) -> ssl.SSLContext | None:
        if tls is None:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        return context

    # ---- lifecycle

    def start(self) -> ESServer:
        """Listen (on a free port the first time, on the same port after :meth:`down`)."""
        if self._httpd is None:
            self._httpd = _HTTPServer(("127.0.0.1", self._port), self)
            self._port = self._httpd.server_address[1]
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                            name=f"es-server-{self._port}", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop every connection (the data is kept until the object goes)."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def down(self) -> None:
        """Refuse connections: close the listening socket and every open connection (data kept)."""
        self.stop()

    def up(self) -> None:
        """Listen again on the same port, with the same data."""
        self.start()

    @property
    def is_up(self) -> bool:
        return self._httpd is not None

    def __enter__(self) -> ESServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://127.0.0.1:{self._port}"

    def _track(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)

    def _untrack(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.discard(conn)

    # ---- test levers

    def fail_next(self, n: int, status: int = 429, *, whole: bool = False, match: str = "/_bulk") -> None:
        """Fail the next ``n`` bulk items with ``status`` (their actions are not applied).

        With ``whole=True`` the next ``n`` requests whose path contains ``match``
        (``""``: any request) fail as a whole before doing anything. 429 answers
        ``es_rejected_execution_exception``; 503 ``unavailable_shards_exception``
        (items) or ``cluster_block_exception`` (requests). Note that the client's
        transport itself retries whole-request 429/502/503/504 (``max_retries``, 3).
        """
        with self._lock:
            if whole:
                self._faults.whole.extend([(status, match)] * n)
            else:
                self._faults.items.extend([status] * n)

    def hold(self, match: str = "/_bulk") -> None:
        """Keep the next requests whose path contains ``match`` waiting, unanswered and
        unapplied, until :meth:`release`; :attr:`held` is set when one arrives."""
        self._release.clear()
        self.held.clear()
        self._hold = match

    def release(self, *, drop: bool = False) -> None:
        """Let held requests (and later ones) go on; ``drop``: the held ones are dropped
        unapplied and their connections closed (their client died meanwhile)."""
        self._drop_held = drop
        self._hold = None
        self._release.set()

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.items.clear()
            self._faults.whole.clear()

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(method, path) of every request received, oldest first."""
        with self._lock:
            return [(r.method, r.path) for r in self._received]

    @property
    def received(self) -> list[Received]:
        """Every request received, with its parameters, headers and body."""
        with self._lock:
            return list(self._received)

    def clear_requests(self) -> None:
        with self._lock:
            self._received.clear()

    def documents(self, index: str) -> dict[str, dict]:
        """The stored ``_source`` of every document of an index, by id."""
        with self._lock:
            return {i: copy.deepcopy(d.source) for i, d in self.cluster.one(index).docs.items()}

    def mapping(self, index: str) -> dict:
        with self._lock:
            return copy.deepcopy(self.cluster.one(index).mapping)

    def index_names(self) -> list[str]:
        with self._lock:
            return list(self.cluster.indices)

    # ---- requests

    def _content_type(self, received: Received) -> str:
        m = _COMPAT.search(received.headers.get("accept", ""))
        return f"application/vnd.elasticsearch+json;compatible-with={m[1]}" if m else "application/json"

    def _respond(self, received: Received) -> Reply:
        with self._lock:
            self._received.append(received)
        if self._hold is not None and self._hold in received.path:
            self.held.set()
            self._release.wait(60)
            if self._drop_held:
                raise ConnectionAbortedError("held request dropped")
        try:
            self._authenticate(received)
            self._check_compat(received)
            with self._lock:
                fault = self._faults.take_whole(received.path)
                if fault is not None:
                    raise fault_error(fault, received.path.strip("/").split("/")[0], WHOLE_FAULTS)
                name, groups = route(received.method, received.path)
                call = Call(received.method, received.path, received.params, received.body, groups)
                status, body = getattr(self.cluster, name)(call)
            return Reply(status, body)
        except ESError as err:
            return Reply(err.status, err.body(), *self._auth_headers(err))
        except Exception as exc:  # noqa: BLE001 - a bug here must reach the client as a 500, not a hang
            traceback.print_exc(file=sys.stderr)
            return Reply(500, ESError(500, "exception", f"es_server: {exc!r}").body())

    def _auth_headers(self, err: ESError) -> tuple[list[tuple[str, str]], bool]:
        if err.status != 401:
            return [], True
        return [("WWW-Authenticate", c) for c in AUTH_CHALLENGES], False

    def _authenticate(self, received: Received) -> None:
        """401 ``security_exception`` unless the request carries the configured credentials."""
        if self.username is None and self.api_key is None:
            return
        target = received.path + (("?" + "&".join(f"{k}={v}" for k, v in received.params.items()))
                                  if received.params else "")
        scheme, _, token = received.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "basic" and self.username is not None:
            user, _, password = b64text(token).partition(":")
            if (user, password) == (self.username, self.password):
                return
            raise self._unauthorized(f"unable to authenticate user [{user}] for REST request [{target}]")
        if scheme.lower() == "apikey" and self.api_key is not None:
            if token == self.api_key:
                return
            key_id = b64text(token).partition(":")[0]
            raise self._unauthorized(
                "unable to authenticate with provided credentials and anonymous access is not allowed "
                "for this request",
                additional_unsuccessful_credentials=f"API key: unable to find apikey with id {key_id}")
        raise self._unauthorized(f"missing authentication credentials for REST request [{target}]")

    @staticmethod
    def _unauthorized(reason: str, **extra: Any) -> ESError:
        return ESError(401, "security_exception", reason, header={"WWW-Authenticate": list(AUTH_CHALLENGES)},
                       **extra)

    def _check_compat(self, received: Received) -> None:
        """400 ``media_type_header_exception`` for a compatible-with version this server does not speak."""
        accept, content = received.headers.get("accept", ""), received.headers.get("content-type", "")
        wanted = {name: int(m[1]) for name, h in (("Accept", accept), ("Content-Type", content))
                  if (m := _COMPAT.search(h))}
        major = self.cluster.major
        if len(set(wanted.values())) > 1:
            detail = ("A compatible version is required on both Content-Type and Accept headers if either one "
                      "has requested a compatible version and the compatible versions must match. "
                      f"Accept={accept}, Content-Type={content}")
        elif wanted and not set(wanted.values()) <= {major, major - 1}:
            detail = (f"Accept version must be either version {major} or {major - 1}, but found "
                      f"{next(iter(wanted.values()))}. Accept={accept}")
        else:
            return
        raise ESError(400, "media_type_header_exception",
                      f"Invalid media-type value on headers [{', '.join(wanted)}]",
                      caused_by={"type": "status_exception", "reason": detail})
