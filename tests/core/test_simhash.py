"""The simhash of a page's text: a small edit moves it a few bits, another page is far."""

from __future__ import annotations

import random

from crawler_tasks.core.simhash import BANDS, MIN_FEATURES, bands, distance, simhash

RND = random.Random(5)
VOCAB = [f"{a}{b}{c}" for a in ("ka", "lo", "mi", "ne", "ru", "ta") for b in ("vo", "pe", "si", "da", "gu")
         for c in ("ber", "fen", "tor", "lis", "quo", "zan", "wel", "ox")]


def article(words: int = 1200) -> list[str]:
    return RND.choices(VOCAB, k=words)


def test_the_same_words_give_the_same_simhash_and_numbers_do_not_count():
    words = article()
    text = " ".join(words)
    assert simhash(text) == simhash(text.upper() + " 2026-11-28 12:00 1,204 3rd") is not None


def test_a_few_words_edited_stay_within_three_bits_and_other_pages_are_far():
    words = article()
    edited = list(words)
    for i in RND.sample(range(len(words)), 3):
        edited[i] = RND.choice(VOCAB)
    base = simhash(" ".join(words))
    assert distance(base, simhash(" ".join(edited))) <= 3
    others = [simhash(" ".join(article())) for _ in range(20)]
    assert min(distance(base, o) for o in others) > 3


def test_a_short_text_has_none():
    assert simhash(" ".join(VOCAB[:MIN_FEATURES - 1])) is None
    assert simhash(" ".join(VOCAB[:MIN_FEATURES])) is not None
    assert simhash(None) is None


def test_two_simhashes_within_three_bits_share_a_band():
    value = RND.getrandbits(64)
    for _ in range(200):
        other = value
        for bit in RND.sample(range(64), 3):
            other ^= 1 << bit
        assert any(a == b for a, b in zip(bands(value), bands(other)))
    assert len(bands(value)) == BANDS and all(0 <= b < 1 << 16 for b in bands(value))
