"""Near-duplicate pages: a 64-bit simhash of a page's text, and the bands it is indexed by.

Charikar's simhash: every feature of the text (its distinct words, each weighted by
``1 + 2·log2(count)``, so that a page's most frequent words do not make every page of a
site look alike) is hashed to 64 bits, and bit ``i`` of the page's simhash says whether
the features with bit ``i`` set outweigh those without. Two texts that share most of
their features get simhashes a few bits apart (their Hamming distance). A text of fewer
than :data:`MIN_FEATURES` distinct words gets none: on a short page a few words are
most of it, and unrelated short pages of one site come out close.

The sums are kept bit-sliced (``_add``): 64 counters held as the bit planes of a few
integers, so a feature costs a couple of integer operations, not 64.

Split into :data:`BANDS` bands of 16 bits, two simhashes within distance 3 share at
least one band exactly (pigeonhole): an index by band finds every candidate in one
look per band, and the distance decides.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter

#: A feature: a run of letters, digits and underscores, lowercased; words with a digit
#: (counts, dates, times) are left out, as in the text signature.
_TOKEN = re.compile(r"\w+")
BANDS, BAND_BITS = 4, 16
_MASK = (1 << 64) - 1
#: The text a simhash reads at most (characters), so a huge page costs what a large one does.
MAX_TEXT = 200_000


#: Distinct words a text needs for a simhash.
MIN_FEATURES = 50


def _features(text: str) -> dict[str, int]:
    """Each distinct word of ``text`` and its weight."""
    counts = Counter(t for t in _TOKEN.findall(text[:MAX_TEXT].lower())
                     if len(t) > 1 and not any(c.isdigit() for c in t))
    return {word: 1 + int(2 * math.log2(n)) for word, n in counts.items()}


def _hash(feature: str) -> int:
    return int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")


def _add(planes: list[int], value: int, times: int) -> None:
    """Add ``times`` to each of the 64 bit-sliced counters whose bit is set in ``value``:
    ``value`` added once at the plane of each bit of ``times``, carries rippling up."""
    start = 0
    while times:
        if times & 1:
            carry, j = value, start
            while carry:
                if j >= len(planes):
                    planes.extend([0] * (j + 1 - len(planes)))
                planes[j], carry = planes[j] ^ carry, planes[j] & carry
                j += 1
        times >>= 1
        start += 1


def simhash(text: str | None) -> int | None:
    """The 64-bit simhash of ``text``'s words; None for fewer than :data:`MIN_FEATURES` of them."""
    counts = _features(text or "")
    if len(counts) < MIN_FEATURES:
        return None
    planes: list[int] = []
    for feature, n in counts.items():
        _add(planes, _hash(feature), n)
    half = sum(counts.values()) / 2
    out = 0
    for bit in range(64):
        total = sum(((plane >> bit) & 1) << j for j, plane in enumerate(planes))
        if total > half:
            out |= 1 << bit
    return out


def distance(a: int, b: int) -> int:
    """Bits in which ``a`` and ``b`` differ (Hamming distance)."""
    return ((a ^ b) & _MASK).bit_count()


def bands(value: int) -> list[int]:
    """The :data:`BANDS` 16-bit slices of ``value``, lowest first."""
    return [(value >> (BAND_BITS * i)) & 0xFFFF for i in range(BANDS)]
