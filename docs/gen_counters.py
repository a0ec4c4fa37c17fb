"""Write the counter tables of docs/stores.md, built from the counter registry of the code.

    python docs/gen_counters.py           # rewrites the generated part of docs/stores.md
    python docs/gen_counters.py --print   # prints it

Every counter's row comes from ``REGISTRY`` in crawler_tasks/core/counters.py: its
name and meaning are written once, in the code. Only the lines between the
``BEGIN`` and ``END`` markers of docs/stores.md are generated; the rest of the
page is written by hand. ``tests/core/test_counters.py`` checks that they are
exactly this script's output.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the checkout's package, wherever this is run from

from crawler_tasks.core import counters  # noqa: E402

PAGE = ROOT / "docs" / "stores.md"
BEGIN = ("<!-- Generated from REGISTRY in crawler_tasks/core/counters.py by docs/gen_counters.py: edit the\n"
         "     counters there, then run `python docs/gen_counters.py`. -->")
END = "<!-- End of the generated counters. -->"

#: (what leads the table in, the hash) for each table.
TABLES = (
    ("Per crawl (`<prefix>:{<crawl id>}:stats`; `crawler-tasks stats` shows each crawl and their sum):",
     counters.CRAWL),
    ("Per host (`<prefix>:{hosts}:host:<host>`; the busiest hosts of `crawler-tasks stats`):",
     counters.HOST),
    ("Per seed feed (`<prefix>:feed:<name>`; `crawler-tasks seeds`, see [seed feeds](feeds.md#status)):",
     counters.FEED),
)

#: What a row says of its counter's kind.
KINDS = {counters.COUNTER: "", counters.GAUGE: " (can fall as well as rise)"}


def render() -> str:
    """The generated part of docs/stores.md, markers included."""
    out = [BEGIN]
    for lead, where in TABLES:
        out += ["", lead, "", "| Counter | Counts |", "|---|---|"]
        out += [f"| `{c.name}` | {c.meaning}{KINDS[c.kind]} |" for c in counters.of(where)]
    out += ["", END]
    return "\n".join(out)


def replaced(page: str) -> str:
    """``page`` with its generated part replaced by :func:`render`."""
    head, begin, rest = page.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise SystemExit(f"gen_counters.py: {PAGE.name} lacks the markers of its generated part")
    return head + render() + tail


if __name__ == "__main__":
    if sys.argv[1:] == ["--print"]:
        sys.stdout.buffer.write((render() + "\n").encode("utf-8"))
    else:
        PAGE.write_bytes(replaced(PAGE.read_text(encoding="utf-8")).encode("utf-8"))
