"""The one codec of what waits in Redis: plain JSON up to 4 KiB, Zstandard above, sniffed by
the first bytes; a JSON head with a text tail for large bodies; and the bytes earlier code
wrote (zlib above 4 KiB), still read."""

from __future__ import annotations

import datetime
import json
import zlib

import pytest

from crawler_tasks.core import codec
from crawler_tasks.core.codec import zstd
from tests.stored_bytes import (
    AT,
    CLAIM_PLAIN,
    CLAIM_ZLIB,
    ENTRY_PLAIN,
    ENTRY_TAIL,
    ENTRY_ZLIB,
    LARGE,
    LETTER_PLAIN,
    LETTER_ZLIB,
    SMALL,
    STORE,
    as_written,
)


def entry(token: str, record: dict, attempts: int) -> dict:
    return {"t": token, "c": "c1", "s": STORE, "a": attempts, "r": record}


def letter(record: dict, kind: str, error: str) -> dict:
    return {"record": record, "store": STORE, "kind": kind, "error": error, "at": AT}


@pytest.mark.parametrize(("raw", "value"), [
    (CLAIM_PLAIN, as_written(SMALL)),
    (CLAIM_ZLIB, as_written(LARGE)),
    (ENTRY_PLAIN, entry("t1.write", as_written(SMALL), 2)),
    (ENTRY_ZLIB, entry("t2.write", as_written(LARGE), 1)),
    (LETTER_PLAIN, letter(as_written(SMALL), "failed", "down")),
    (LETTER_ZLIB, letter(as_written(LARGE), "refused", "mapping")),
], ids=["claim", "claim-zlib", "entry", "entry-zlib", "letter", "letter-zlib"])
def test_what_earlier_code_kept_in_redis_still_decodes(raw, value):
    assert codec.decode(raw) == value
    assert codec.decode_with_tail(raw) == (value, None, len(codec.unpack(raw)))


def test_an_entry_with_a_text_tail_written_by_earlier_code_still_decodes():
    record = as_written(SMALL)
    body = record.pop("body")
    head, tail, size = codec.decode_with_tail(ENTRY_TAIL)
    assert head == entry("t1.write", record, 2) | {"tail": "body"} and tail == body == "h\u00e9llo"
    assert size == len(zlib.decompress(ENTRY_TAIL))


def test_what_it_writes_is_standard_json_in_a_standard_zstandard_frame_or_zlib_stream():
    """Any tool reads every form back: standard json, a Zstandard frame, a zlib stream."""
    small, large = as_written(SMALL), as_written(LARGE)
    assert json.loads(codec.encode(small, ensure_ascii=True)) == small
    assert json.loads(codec.encode(entry("t1.write", small, 2))) == entry("t1.write", small, 2)
    kept = codec.encode(letter(large, "refused", "mapping"))
    assert kept[:4] == codec.ZSTD_MAGIC
    assert json.loads(zstd.decompress(kept)) == letter(large, "refused", "mapping")
    record = as_written(SMALL)
    body = record.pop("body")
    head, _, tail = zlib.decompress(codec.encode_with_tail(entry("t1.write", record, 2) | {"tail": "body"},
                                                           body)).partition(b"\n")
    assert json.loads(head) == entry("t1.write", record, 2) | {"tail": "body"} and tail.decode() == body


def test_what_orjson_refuses_or_would_change_is_written_as_the_standard_library_writes_it():
    for value in ({"big": 2**70}, {1: "int key"}):
        assert codec.loads(codec.dumps(value)) == json.loads(json.dumps(value))
    with pytest.raises(TypeError):  # a date is not JSON
        codec.dumps({"when": datetime.date(2026, 1, 1)})
    with pytest.raises(UnicodeEncodeError):  # nor a lone surrogate outside a tail
        codec.dumps({"lone": "\ud800"})


def test_json_up_to_the_threshold_stays_plain_and_above_it_is_compressed_when_asked():
    def value(size: int) -> dict:
        return {"k": "x" * (size - len('{"k": ""}'))}

    at, over = value(codec.COMPRESS_OVER + 1), value(codec.COMPRESS_OVER + 2)  # + 1: compact JSON
    assert codec.encode(at) == codec.dumps(at) and len(codec.dumps(at)) == codec.COMPRESS_OVER
    assert codec.encode(over)[:4] == codec.ZSTD_MAGIC and len(codec.encode(over)) < 100
    assert codec.encode(over, compress=False) == codec.dumps(over)
    for v in (at, over):
        assert codec.decode(codec.encode(v)) == v


def test_ensure_ascii_escapes_what_a_plain_write_keeps_as_utf8():
    value = {"t": "caf\u00e9 \u2603"}
    assert codec.encode(value) == '{"t":"caf\u00e9 \u2603"}'.encode()
    assert codec.encode(value, ensure_ascii=True) == b'{"t": "caf\\u00e9 \\u2603"}'
    assert codec.decode(codec.encode(value)) == codec.decode(codec.encode(value, ensure_ascii=True))


def test_a_tail_round_trips_slice_by_slice_with_newlines_and_lone_surrogates():
    tail = ("line\n\u00e9\ud800" * (codec.SLICE // 3)) + "end"
    head = {"t": "x", "note": "a\nb"}  # a newline inside the head's JSON is escaped
    raw = codec.encode_with_tail(head, tail)
    assert raw[:1] != b"{"
    assert codec.decode_with_tail(raw)[:2] == (head, tail)
    assert codec.decode_with_tail(raw)[2] == len(zlib.decompress(raw))


@pytest.mark.parametrize("number", [2**64, 2**70 + 1, -(2**63) - 1, 10**30 + 7, 2**64 - 1, -(2**63)])
def test_an_integer_beyond_64_bits_reads_back_exactly(number):
    value = {"meta": {"id": number}, "text": "a run of 19 digits in a string: 1234567890123456789"}
    back = codec.loads(codec.dumps(value))
    assert back == value and type(back["meta"]["id"]) is int
    assert codec.loads(codec.dumps(value).decode()) == value
