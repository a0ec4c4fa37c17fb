"""A worker's JSON decoder: kombu's values, through orjson where that gives the same."""

from __future__ import annotations

import datetime
import json
import uuid

import pytest
from kombu.serialization import dumps as kombu_dumps
from kombu.serialization import loads as kombu_registry_loads
from kombu.utils import json as kombu_json

from crawler_tasks.broker import transport
from crawler_tasks.broker.messages import fetch_message, loads

SAMPLES = [
    '{"a": 1, "b": [1.5, "x", null, true], "c": {"d": "é\\u00e9"}}',
    '[[{"url": "http://a.test/"}], {}, {"callbacks": null}]',
    '{"big": 123456789012345678901234567890}',           # past 64 bits: orjson would make it a float
    '[-9223372036854775809, 18446744073709551616, 18446744073709551615]',
    '{"nan": NaN, "inf": -Infinity}',                    # not JSON: orjson refuses, kombu reads
    '{"when": {"__type__": "datetime", "__value__": "2026-11-28T10:00:00"}}',
    '{"id": {"__type__": "uuid", "__value__": {"hex": "0c4f7a0e8a7c4f399d7a2a3e4a5b6c7d"}}}',
    '{"__type__": "not a marker alone", "x": 1}',
]


@pytest.mark.parametrize("text", SAMPLES)
def test_a_message_decodes_as_kombu_decodes_it_from_text_bytes_and_buffers(text):
    expected = kombu_json.loads(text)
    for data in (text, text.encode(), bytearray(text.encode()), memoryview(text.encode())):
        got = loads(data)
        assert got == expected or json.dumps(got, default=str) == json.dumps(expected, default=str)
        assert type(got) is type(expected)
    if "datetime" in text:
        assert isinstance(loads(text)["when"], datetime.datetime)
    if "uuid" in text:
        assert isinstance(loads(text)["id"], uuid.UUID)


@pytest.mark.parametrize("bad", ['{"a": ', b"\xff\xfe", "", "{'a': 1}"])
def test_what_kombu_refuses_is_refused_with_its_error(bad):
    with pytest.raises(ValueError) as kombu_error:
        kombu_json.loads(bad)
    with pytest.raises(type(kombu_error.value)):
        loads(bad)


def test_the_worker_reads_every_json_message_through_it():
    transport.register()
    message = fetch_message({"url": "http://a.test/"}, "t1", url="http://a.test/", priority=5)
    assert loads(message) == json.loads(message)
    content_type, encoding, body = kombu_dumps({"a": [1, 2]}, serializer="json")
    assert kombu_registry_loads(body, content_type, encoding) == {"a": [1, 2]}
    from kombu.serialization import registry
    assert registry._decoders["application/json"] is loads
