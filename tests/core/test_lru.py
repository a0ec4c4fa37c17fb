"""Per-process caches bounded by bytes: eviction order, the byte budget, oversized entries."""

from __future__ import annotations

import threading
import tracemalloc

import pytest

from crawler_tasks.core.lru import ENTRY_OVERHEAD, ByteLRU, memoize, text_weight


def test_least_recently_used_entries_go_first_once_the_budget_is_full():
    cache: ByteLRU[str, int] = ByteLRU(300, max_entry=100)
    for key in "abc":
        assert cache.put(key, 1, 100)
    assert cache.get("a") == 1  # a is now the most recent: b is the oldest
    cache.put("d", 1, 100)
    assert cache.get("b") is None
    assert [k for k in "acd" if cache.get(k) is not None] == ["a", "c", "d"]
    assert cache.bytes == 300 and len(cache) == 3


def test_an_entry_heavier_than_its_share_is_not_kept_and_evicts_nothing():
    cache: ByteLRU[str, str] = ByteLRU(1000, max_entry=100)
    cache.put("small", "x", 50)
    assert not cache.put("huge", "y", 101)
    assert cache.get("huge") is None and cache.get("small") == "x"


def test_replacing_a_key_reweighs_it():
    cache: ByteLRU[str, str] = ByteLRU(1000)
    cache.put("k", "v", 1)
    cache.put("k", "w", 1)
    cache.pop("missing")
    assert cache.get("k") == "w" and cache.bytes == 1 and len(cache) == 1
    cache.pop("k")
    assert cache.bytes == 0 and len(cache) == 0


def test_memoize_caches_results_not_exceptions():
    calls: list[str] = []

    @memoize(1 << 20)
    def upper(text: str) -> str | None:
        calls.append(text)
        if text == "bad":
            raise ValueError(text)
        return None if text == "none" else text.upper()

    assert upper("a") == upper("a") == "A"
    assert upper("none") is None and upper("none") is None
    for _ in range(2):
        with pytest.raises(ValueError):
            upper("bad")
    assert calls == ["a", "none", "bad", "bad"]
    upper.cache_clear()
    upper("a")
    assert calls[-1] == "a"


def test_memoized_long_strings_stay_within_the_byte_budget():
    """20,000 distinct 1 KiB URLs (40 MB of keys and values) leave about the budget in memory."""
    budget = 4 << 20

    @memoize(budget)
    def same(url: str) -> str:
        return url + "#"

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(20_000):
            same(f"http://a.test/{i:08d}/" + "x" * 1000)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 0.9 * budget < same.cache.bytes <= budget
    assert held < 1.25 * budget, held


def test_the_weight_counts_characters_and_the_entry_overhead():
    assert text_weight("abc", None, "de") == ENTRY_OVERHEAD + 5


def test_threads_share_one_cache_safely():
    cache: ByteLRU[int, int] = ByteLRU(50 * 64, max_entry=64)

    errors: list[BaseException] = []

    def churn(offset: int) -> None:
        try:
            for i in range(5000):
                cache.put(offset + i % 200, i, 64)
                got = cache.get(offset + (i * 7) % 200)  # often evicted by another thread meanwhile
                assert got is None or isinstance(got, int)
                cache.get(((offset + 1000) % 8000) + i % 200)  # another thread's keys, as they go
        except BaseException as exc:  # noqa: BLE001 - a thread's error fails the test
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(n * 1000,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cache.bytes == 64 * len(cache) <= 50 * 64
