"""The gate's seen filters against the real Redis: the Bloom filter's error rate as it fills
and grows, memory per URL, and recrawl windows whose memory stays flat."""

from __future__ import annotations

import hashlib
import os
import time

import pytest
import redis

from crawler_tasks.state.gate import Admission, Candidate, Gate
from crawler_tasks.state.keys import Keys
from crawler_tasks.state.seen import Bloom, SeenFilter, SeenRecent, slice_geometry
from tests.helpers import REDIS, token

SEEN_DB = 12


def make_gate(seen: type[SeenFilter], **options: object) -> Gate:
    client = redis.Redis.from_url(f"{REDIS}/{SEEN_DB}")
    keys = Keys(f"s{token()}")
    return Gate(client, keys, replay_ttl=60, seen=seen(keys, **options))


def fingerprints(start: int, stop: int, salt: str = "") -> list[str]:
    return [hashlib.sha1(f"{salt}http://site.test/{i}".encode()).hexdigest() for i in range(start, stop)]


def fill(gate: Gate, fps: list[str], batch: int = 5000) -> int:
    """Admit ``fps`` in batches; returns how many the gate refused (false positives when new)."""
    refused = 0
    for i in range(0, len(fps), batch):
        done = gate.complete("c", [Candidate(fp, "t") for fp in fps[i:i + batch]])
        refused += done.admissions.count(Admission.DUPLICATE)
        gate.client.delete(gate.keys.outstanding("c"))
    return refused


def drop(gate: Gate) -> None:
    for key in gate.client.scan_iter(f"{gate.keys.prefix}:*", count=1000):
        gate.client.delete(key)


@pytest.mark.slow
def test_bloom_error_rate_after_its_capacity_stays_under_the_configured_rate():
    gate = make_gate(Bloom, capacity=250_000, error_rate=0.001)
    try:
        refused = fill(gate, fingerprints(0, 250_000))
        false_positives = fill(gate, fingerprints(0, 100_000, salt="fresh"))
        info = gate.info("c")
        assert false_positives / 100_000 < 0.001
        assert info.items == 350_000 - refused - false_positives and info.slices == 2
        # Memory at capacity within 1.3x the optimum of -ln p / ln^2 2 bits (1.8 bytes) per URL.
        first = slice_geometry(1_000_000, 0.001, 0)
        assert first.blocks * 64 / 1_000_000 <= 1.3 * 1.797
    finally:
        drop(gate)


#: CRAWLER_TEST_FULL_SCALE=1 runs the growth test at 1,000,000 capacity and 10,000,000 URLs
#: (about 3 minutes here); by default it runs at a fortieth of that, same ratio and slices.
SCALE = 1 if os.environ.get("CRAWLER_TEST_FULL_SCALE") == "1" else 40


@pytest.mark.slow
def test_bloom_error_rate_holds_at_ten_times_its_capacity():
    capacity = 1_000_000 // SCALE
    gate = make_gate(Bloom, capacity=capacity, error_rate=0.01)
    try:
        refused = fill(gate, fingerprints(0, 10 * capacity), batch=10_000)
        false_positives = fill(gate, fingerprints(0, 100_000, salt="fresh"), batch=10_000)
        info = gate.info("c")
        assert info.slices == 4  # 1 + 2 + 4 + 8 capacities
        assert refused / (10 * capacity) < 0.01 and false_positives / 100_000 < 0.01
    finally:
        drop(gate)


def test_bloom_duplicates_are_always_refused_and_the_gate_says_which():
    gate = make_gate(Bloom, capacity=1000, error_rate=0.001)
    fps = fingerprints(0, 3000)  # three slices' worth
    assert fill(gate, fps, batch=100) < 3
    done = gate.complete("c", [Candidate(fp, "t") for fp in fps], max_pages=10**6)
    assert set(done.admissions) == {Admission.DUPLICATE} and done.task_ids == [None] * 3000
    assert gate.info("c").slices == 2 and gate.info("c").mode == "bloom"
    drop(gate)


def test_bloom_filter_split_over_several_strings():
    gate = make_gate(Bloom, capacity=10_000, error_rate=0.001, segment_bytes=4096)
    fps = fingerprints(0, 10_000)
    assert fill(gate, fps, batch=500) < 10
    strings = [k for k in gate.client.scan_iter(f"{gate.keys.bloom('c')}:*")]
    assert len(strings) == -(-slice_geometry(10_000, 0.001, 0).blocks * 64 // 4096)
    assert max(gate.client.strlen(k) for k in strings) <= 4096
    assert fill(gate, fps, batch=500) == len(fps)  # all seen
    drop(gate)


def test_a_bloom_gate_made_with_other_settings_is_refused_in_one_line():
    gate = make_gate(Bloom, capacity=1000, error_rate=0.001)
    fill(gate, fingerprints(0, 10))
    other = Gate(gate.client, gate.keys, 60, Bloom(gate.keys, 2000, 0.001))
    with pytest.raises(redis.ResponseError, match="same CRAWLER_BLOOM_CAPACITY"):
        other.complete("c", [Candidate(fingerprints(10, 11)[0], "t")])
    drop(gate)


def test_the_exact_window_readmits_after_it_and_its_memory_stays_flat():
    window = 0.4
    gate = make_gate(SeenRecent, window=window)
    sizes = []
    for round_ in range(8):
        fresh = fingerprints(round_ * 500, round_ * 500 + 500)
        assert fill(gate, fresh, batch=100) == 0
        assert fill(gate, fresh[:50], batch=100) == 50  # inside the window: duplicates
        sizes.append(gate.info("c").items)
        time.sleep(window)
    assert fill(gate, fingerprints(0, 500), batch=100) == 0  # long past the window: admitted
    assert max(sizes) <= 1000 and max(sizes[2:]) - min(sizes[2:]) <= 100
    drop(gate)


def test_bloom_generations_readmit_between_one_and_two_windows_with_flat_memory():
    window = 1.0
    gate = make_gate(Bloom, capacity=2000, error_rate=0.001, window=window)
    fps = fingerprints(0, 200)
    start = time.time()
    assert fill(gate, fps) == 0
    held = []
    while time.time() - start < window * 0.99:
        held.append(fill(gate, fps[:20]) == 20)
        time.sleep(0.1)
    assert all(held)  # within one window a URL is always seen
    time.sleep(max(0.0, start + 2 * window + 0.05 - time.time()))
    assert fill(gate, fps) == 0  # two windows on it always passes again

    strings = []
    for round_ in range(5):  # a continuous crawl: new URLs every window
        fill(gate, fingerprints(1000 * round_, 1000 * round_ + 1000, salt="more"))
        time.sleep(window)
        strings.append(len(list(gate.client.scan_iter(f"{gate.keys.bloom('c')}*"))))
    assert max(strings) <= 4 + 2  # two generations (a hash and a string each), one expiring
    assert gate.info("c").bytes <= 2 * slice_geometry(2000, 0.001, 0).blocks * 64
    drop(gate)
