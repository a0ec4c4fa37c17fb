"""Shards of shared state: stable shard numbers and hash tags spread over the slots."""

from __future__ import annotations

from collections import Counter

import pytest

from crawler_tasks.core.shards import SLOTS, crc16, shard_of, spread_order, spread_tags, tag_slot


def test_crc16_is_the_checksum_redis_cluster_hashes_keys_with():
    assert crc16(b"123456789") == 0x31C3  # the XMODEM check value Redis's cluster spec gives
    assert tag_slot("123456789") == 12739  # CLUSTER KEYSLOT 123456789
    assert tag_slot("hosts") == 7676  # CLUSTER KEYSLOT {hosts}


def test_a_name_always_falls_in_the_same_shard_and_names_spread_over_them():
    assert shard_of("example.com:443", 1) == 0
    first = [shard_of(f"h{i}.test:80", 16) for i in range(1600)]
    assert first == [shard_of(f"h{i}.test:80", 16) for i in range(1600)]
    assert shard_of("example.com:443", 16) == 0 and shard_of("example.com:80", 16) == 3  # CRC32
    counts = Counter(first)
    assert set(counts) == set(range(16)) and max(counts.values()) < 1.35 * min(counts.values())


def test_one_shard_keeps_the_plain_tag():
    assert spread_tags("hosts", 1) == ("hosts",)


@pytest.mark.parametrize("shards", [2, 16, 64])
def test_each_shard_s_tag_falls_in_its_own_run_of_slots(shards):
    tags = spread_tags("hosts", shards)
    assert len(set(tags)) == shards
    for k, tag in enumerate(tags):
        assert k * SLOTS // shards <= tag_slot(tag) < (k + 1) * SLOTS // shards


@pytest.mark.parametrize("masters", [3, 6, 16])
def test_sixteen_shards_share_out_over_masters_holding_equal_runs_within_a_shard(masters):
    """``redis-cli --cluster create`` gives each master one run of about SLOTS / masters slots."""
    owner = Counter(tag_slot(t) * masters // SLOTS for t in spread_tags("hosts", 16))
    assert len(owner) == masters and max(owner.values()) - min(owner.values()) <= 1


def test_shard_counts_out_of_range_are_refused():
    for bad in (0, SLOTS + 1):
        with pytest.raises(ValueError, match="shards must be 1 to 16384"):
            spread_tags("hosts", bad)


def test_answers_given_group_by_group_come_back_in_the_items_order():
    from crawler_tasks.core.shards import group_indexes, scatter

    items = ["a1", "b1", "a2", "c1", "b2"]
    groups = group_indexes(items, lambda s: s[0])
    assert groups == {"a": [0, 2], "b": [1, 4], "c": [3]}
    answers = [[f"{items[n]}!" for n in ns] for ns in groups.values()]
    assert scatter(groups, answers, len(items), "") == [f"{i}!" for i in items]
    assert scatter(groups, [["x"]], len(items), "") == ["x", "", "", "", ""]  # a group left unanswered


@pytest.mark.parametrize("shards", [1, 2, 3, 6, 16, 17, 100])
def test_the_spread_order_names_every_shard_once(shards):
    assert sorted(spread_order(shards)) == list(range(shards))


@pytest.mark.parametrize("masters", [2, 3, 6])
def test_the_first_processes_to_take_shards_in_spread_order_share_out_over_the_masters(masters):
    """16 shards over masters holding equal runs of them (as spread_tags places them): the
    first two processes land on two masters, and as many processes as masters put at most
    two on one."""
    master_of = [k * masters // 16 for k in range(16)]
    assert len({master_of[k] for k in spread_order(16)[:2]}) == 2
    assert max(Counter(master_of[k] for k in spread_order(16)[:masters]).values()) <= 2
