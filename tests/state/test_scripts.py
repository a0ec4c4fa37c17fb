"""The Lua scripts as files: each documented, each compiling on the real Redis, fragments
written once, and key names built in Lua the same as Python's key functions give."""

from __future__ import annotations

import json
import re
import time
from functools import partial
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot

from crawler_tasks.core.models import CrawlRequest
from crawler_tasks.core.settings import Settings
from crawler_tasks.state import hosts, scripts
from crawler_tasks.state.gate import Candidate, Gate
from crawler_tasks.state.keys import Keys, template
from crawler_tasks.state.seen import Bloom
from tests.helpers import REDIS, token

SCRIPTS_DB = 12
PACKAGE = Path(scripts.__file__).resolve().parents[1]
FILTERS = ("seen_set.lua", "seen_recent.lua", "seen_bloom.lua")


@pytest.fixture
def client() -> redis.Redis:
    return redis.Redis.from_url(f"{REDIS}/{SCRIPTS_DB}")


def is_fragment(name: str) -> bool:
    return scripts.header(name).startswith("-- Fragment")


def runnable() -> list[tuple[str, dict[str, str]]]:
    """Every script as Redis gets it: the gate's once per seen filter."""
    out: list[tuple[str, dict[str, str]]] = []
    for name in scripts.names():
        if name in ("gate_complete.lua", "gate_part.lua"):
            out += [(name, {"seen": f}) for f in FILTERS]
        elif not is_fragment(name):
            out.append((name, {}))
    return out


@pytest.mark.parametrize(("name", "slots"), runnable(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_script_s_header_names_every_key_and_argument_it_reads_and_what_it_returns(name, slots):
    head = scripts.header(name)
    text = scripts.source(name, **slots)
    assert head.count("\n") >= 2 and "-- Returns" in head
    for kind, index in set(re.findall(r"\b(KEYS|ARGV)\[(\d+)\]", text)):
        assert f"{kind}[{index}]" in head, f"{name}: {kind}[{index}] is not in its header"


@pytest.mark.parametrize(("name", "slots"), runnable(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_script_compiles_on_redis(client, name, slots):
    text = scripts.source(name, **slots)
    assert client.script_load(text) == scripts.register(client, name, **slots).sha
    assert "-- include" not in text and not re.search(r"^\s*--", text, re.M)


def test_fragments_are_written_once_and_each_is_included_somewhere():
    fragments = [n for n in scripts.names() if is_fragment(n)]
    assert {"now.lua", "recent.lua", "limits.lua", "keys.lua", *FILTERS} <= set(fragments)
    raw = {n: (PACKAGE / "state" / "lua" / n).read_text() for n in scripts.names()}
    for fragment in fragments:
        includes = [n for n, text in raw.items() if f"-- include: {fragment}" in text]
        assert includes or fragment in FILTERS, f"{fragment} is included nowhere"
    clock = "local t = redis.call('TIME'); local now = t[1] + t[2] / 1e6"
    assert [n for n, text in raw.items() if clock in text] == ["now.lua"]


def test_no_lua_is_left_in_the_python_modules():
    for path in PACKAGE.rglob("*.py"):
        assert "redis.call(" not in path.read_text(), f"{path} still holds Lua"


def test_every_script_is_used_by_the_package():
    python = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    for name in scripts.names():
        if not is_fragment(name):
            assert f'"{name}"' in python, f"{name} is not run by any module"


# -- keys named in Lua -----------------------------------------------------------------------

_KEY_OF = """
local values = {}
for i = 2, #ARGV do values[#values + 1] = tonumber(ARGV[i]) or ARGV[i] end
return key_of(cjson.decode(ARGV[1]), unpack(values))
"""

KEYS = Keys("kt")


@pytest.mark.parametrize(("key", "values"), [
    (KEYS.host, ["example.com:443"]),
    (KEYS.host_slots, ["[2001:db8::1]:8080"]),
    (KEYS.host_wait, ["xn--bcher-kva.example:80"]),
    (KEYS.host_wait, ["odd{tag}:80"]),
    (KEYS.store_taken, ["node-1:4242:9f8e7d6c"]),
    (partial(Keys("kt", store_shards=4).store_taken_in, 2), ["9f8e7d6c.2"]),
    (KEYS.bloom_generation, [KEYS.bloom("news"), 1_767_225_599]),
    (KEYS.bloom_generation, [KEYS.bloom("news"), -1]),
    (KEYS.bloom_segment, [KEYS.bloom_generation(KEYS.bloom("news"), 88), 3, 0]),
])
def test_key_of_in_lua_names_the_key_python_names(client, key, values):
    script = scripts.source("keys.lua") + _KEY_OF
    lua = client.eval(script, 0, json.dumps(template(key, len(values))), *values)
    assert lua.decode() == key(*values)


def test_a_key_function_that_changes_its_value_has_no_template():
    with pytest.raises(ValueError):
        template(lambda host: f"h:{host.lower()}")
    with pytest.raises(ValueError):
        template(lambda host: f"h:{host.upper()}")
    with pytest.raises(ValueError):
        template(lambda a, b: f"{b}:{a}", 2)
    with pytest.raises(ValueError):
        template(lambda host: f"{host}:{host}")
    assert template(KEYS.store_taken) == ["kt:{store}:taken:", ""]


def test_the_bloom_gate_names_its_generations_and_strings_as_python_does(client):
    keys = Keys(f"kb{token()}")
    window = 1000.0
    gate = Gate(client, keys, 60, Bloom(keys, 1000, 0.01, window=window, segment_bytes=4096))
    try:
        assert gate.complete("c", [Candidate(f"{i:040x}", f"t{i}") for i in range(50)]).task_ids[0]
        stem = keys.bloom("c")
        gen = int(time.time() // window)  # no generation changes in the next second
        current = keys.bloom_generation(stem, gen)
        segments = -(-gate.seen.geometry[0].blocks * 64 // 4096)
        expected = {current, *(keys.bloom_segment(current, 0, s) for s in range(segments))}
        made = {k.decode() for k in client.scan_iter(f"{stem}*")}
        assert made <= expected and current in made and len(made) >= 2
        assert gate.seen.stems("c") == [current, keys.bloom_generation(stem, gen - 1)]
        assert {key_slot(k.encode()) for k in made} == {key_slot(stem.encode())}
        assert gate.info("c").items == 50
    finally:
        for key in client.scan_iter(f"{keys.prefix}:*"):
            client.delete(key)


def test_the_mover_names_the_host_keys_as_python_does(client, monkeypatch):
    monkeypatch.setattr(hosts, "MOVE_LEASE_S", 0.2)
    keys = Keys(f"km{token()}")
    settings = Settings.from_env(download_delay=0, host_concurrency=1)
    limiter = hosts.HostLimiter(client, keys, settings)
    host = "xn--bcher-kva.example:8443"
    try:
        limiter.park(host, "t-a", CrawlRequest("http://xn--bcher-kva.example:8443/a"), 0)
        taken, _ = limiter.take_due()
        assert [m.task_id for m in taken] == ["t-a"]
        assert client.zscore(keys.host_slots(host), "t-a")  # reserved under Python's name
        assert not client.exists(keys.host_wait(host))
        time.sleep(0.3)  # the mover died: its lease runs out, the fetch waits again
        client.delete(keys.host_slots(host))
        again, _ = limiter.take_due()
        assert [m.task_id for m in again] == ["t-a"]
        made = {k.decode() for k in client.scan_iter(f"{keys.prefix}:*")}
        assert keys.host_slots(host) in made and keys.host(host) in made
        assert made <= {keys.host(host), keys.host_slots(host), keys.host_wait(host), keys.hosts_due(0),
                        keys.hosts_moving(0), keys.hosts_recent(0), keys.hosts_arrivals(0), keys.hosts_waiting_crawls(0)}
    finally:
        for key in client.scan_iter(f"{keys.prefix}:*"):
            client.delete(key)
