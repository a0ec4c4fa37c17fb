"""How JSON objects are kept as bytes in Redis: claim checks, store entries, dead letters.

Three forms, told apart by their first bytes (an object's JSON starts with ``{``, a
Zstandard frame with its magic number, a zlib stream with ``x``), so a reader needs no flag:

* **an object**: its JSON as UTF-8, kept as it is up to :data:`COMPRESS_OVER`
  bytes (readable in redis-cli) and compressed above, with Zstandard at level 1, when the
  writer asks for compression (:func:`encode`, :func:`decode`). A page's record of 27 KB
  of JSON becomes 8 KB in about 0.1 ms and is read back in 0.05 ms (zlib at level 3:
  8 KB in 0.56 ms), so even a store entry, which waits a second, goes compressed;
  zlib is still read (what an earlier release left in Redis);
* **an object with a text tail**, for a value too large to be whole in memory
  as JSON (a large page body, where a NUL takes 6 bytes): zlib (level 1) of the
  head's JSON, a newline, and the text as UTF-8, compressed :data:`SLICE`
  characters at a time (:func:`encode_with_tail`). JSON as written here never
  holds a raw newline, so the first one ends the head; :func:`decode_with_tail`
  reads both forms;
* **an object with a JSON tail**: the head's JSON, a newline, and a second JSON document
  kept as bytes, so that a reader can hand it on without encoding it again (a store
  entry's record, :func:`encode_with_json`, :func:`decode_head`); compressed as an object.

Lone surrogates in a tail pass through (``surrogatepass``) and come back as they went.

JSON goes through orjson (:func:`dumps`, :func:`loads`): a page's record is written
and read several times on its way to the store, and the standard library's codec was a
tenth of a worker's CPU. What orjson refuses, or would write or read differently (a lone
surrogate, an integer beyond 64 bits, a key that is not a string, a date), goes through
the standard library, with its result or its error.
"""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Callable
from typing import Any

import orjson

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

#: Bytes of JSON above which an object is kept compressed (when its writer compresses).
COMPRESS_OVER = 4096
#: Zstandard level of a compressed object: the fastest of the positive levels, most of the gain.
LEVEL = 1
#: The first bytes of a Zstandard frame.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: What reading a damaged compressed object raises, beside ValueError.
DAMAGED = (zlib.error, zstd.ZstdError)
#: zlib level of an object with a text tail (megabytes: speed first).
TAIL_LEVEL = 1
#: Characters of a tail encoded at a time.
SLICE = 1 << 16


#: orjson leaves these to the standard library (which refuses them).
_STRICT = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def dumps(value: Any) -> bytes:
    """``value``'s JSON as UTF-8 (``json.dumps(value, ensure_ascii=False).encode()``, compact)."""
    try:
        return orjson.dumps(value, option=_STRICT)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, ensure_ascii=False).encode()


def loads(data: bytes | bytearray | str, fallback: Callable[[Any], Any] = json.loads) -> Any:
    """The value of JSON ``data`` (``json.loads``): orjson's, or ``fallback``'s where orjson
    refuses the JSON or would read it otherwise (:func:`lossy`)."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return fallback(data)
    return fallback(data) if lossy(value) else value


#: orjson reads an integer outside [-2**63, 2**64) as a float: one this large or larger.
_INT64 = 2.0 ** 63


def lossy(value: Any) -> bool:
    """Whether orjson's ``value`` may hold a float it made of an integer beyond 64 bits
    (a float of 2**63 or more either way: then the standard library reads the JSON again)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is float and not -_INT64 < item < _INT64:
            return True
    return False


def encode(value: dict[str, Any], *, compress: bool = True, ensure_ascii: bool = False) -> bytes:
    """``value`` as kept: its JSON, compressed above :data:`COMPRESS_OVER` bytes when
    ``compress``. ``ensure_ascii`` escapes every non-ASCII character (as ``json.dumps``)."""
    return pack(json.dumps(value).encode() if ensure_ascii else dumps(value), compress=compress)


def pack(data: bytes, *, compress: bool) -> bytes:
    """``data`` as kept: a Zstandard frame above :data:`COMPRESS_OVER` bytes when ``compress``."""
    return zstd.compress(data, LEVEL) if compress and len(data) > COMPRESS_OVER else data


def unpack(raw: bytes) -> bytes:
    """The uncompressed bytes of any form (JSON, or a head, a newline and its tail; plain,
    Zstandard or zlib)."""
    if raw[:1] == b"{":
        return raw
    if raw[:4] == ZSTD_MAGIC:
        return zstd.decompress(raw)
    return zlib.decompress(raw)


def decode(raw: bytes) -> Any:
    """The object :func:`encode` kept as ``raw``."""
    return loads(unpack(raw))


def encode_with_tail(head: dict[str, Any], tail: str) -> bytes:
    """``head`` and the text ``tail`` in one zlib stream, encoded a slice at a time (the
    tail is never whole as JSON, nor whole as UTF-8 beside its compressed form)."""
    z = zlib.compressobj(TAIL_LEVEL)
    out = [z.compress(dumps(head) + b"\n")]
    for i in range(0, len(tail), SLICE):
        out.append(z.compress(tail[i:i + SLICE].encode("utf-8", "surrogatepass")))
    out.append(z.flush())
    return b"".join(out)


def encode_with_json(head: dict[str, Any], tail: bytes, *, compress: bool = True) -> bytes:
    """``head``'s JSON, a newline, and ``tail``, JSON already encoded (a reader takes it as
    it is, :func:`decode_head`); compressed as :func:`encode` does."""
    return pack(dumps(head) + b"\n" + tail, compress=compress)


def decode_head(raw: bytes) -> tuple[Any, bytes | None, int]:
    """The head (or the whole object), the bytes after its newline (None for an object
    kept without a tail), and the size in bytes uncompressed, of any form."""
    data = unpack(raw)
    cut = data.find(b"\n")
    if cut < 0:
        return loads(data), None, len(data)
    return loads(data[:cut]), data[cut + 1:], len(data)


def decode_with_tail(raw: bytes) -> tuple[Any, str | None, int]:
    """The head (or the whole object), the tail (None for an object kept without one), and
    the size in bytes uncompressed, of either form."""
    head, tail, size = decode_head(raw)
    return head, None if tail is None else str(tail, "utf-8", "surrogatepass"), size
