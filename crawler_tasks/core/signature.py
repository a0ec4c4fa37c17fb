"""A page's text signature: what says whether a revisited page changed.

In the spirit of Nutch's ``TextProfileSignature``: the signature is a digest of the
page's *profile*, its words and how often each occurs, taken from its visible text (no
markup, scripts or styles, so a CSRF token in a form field or a rotating script never
counts). Words with a digit are left out, so a view count, a date, a time or "3 minutes
ago" does not make a page new; frequencies are rounded to a step of 1 % of the most
frequent word's, so a page's long text does not move with one more "the". Unlike Nutch's,
words seen once are kept: an edited sentence in a forum post is a change.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

#: A token: a run of letters, digits and underscores; one with a digit is no word here.
_TOKEN = re.compile(r"\w+")
#: The step frequencies are rounded to, as a share of the most frequent word's.
QUANT_RATE = 0.01


def _words(text: str) -> Counter[str]:
    return Counter(t for t in _TOKEN.findall(text.lower())
                   if len(t) > 1 and not any(c.isdigit() for c in t))


def text_signature(text: str | None) -> str | None:
    """The 16-hex-digit signature of ``text``'s word profile; None for a page with no words."""
    counts = _words(text or "")
    if not counts:
        return None
    quant = max(1, round(max(counts.values()) * QUANT_RATE))
    profile = sorted((word, n // quant) for word, n in counts.items() if n >= quant)
    data = "\n".join(f"{word} {n}" for word, n in profile).encode()
    return hashlib.blake2b(data, digest_size=8).hexdigest()
