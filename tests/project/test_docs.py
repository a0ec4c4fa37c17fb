"""The documentation: every relative link and anchor resolves, every table renders.

README.md, docs/*.md and bench's pages (its index, its results and each benchmark's README)
are read as GitHub renders them; no network is used (links with a scheme are not followed).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
BENCH = [ROOT / "bench" / "README.md", ROOT / "bench" / "RESULTS.md", *sorted((ROOT / "bench").glob("*/README.md"))]
PAGES = [ROOT / "README.md", *DOCS, *BENCH]
#: Pages that are user documentation: no issue numbers, no lab notebook.
USER_DOCS = [ROOT / "README.md", *DOCS]

FENCE = re.compile(r"^ {0,3}(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
INLINE_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose_lines(path: Path) -> list[str]:
    """The lines outside fenced code blocks (code there is neither link nor heading)."""
    out, fence = [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        out.append(line)
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings, with GitHub's -1, -2… for repeated ones."""
    seen: dict[str, int] = {}
    out = set()
    for line in _prose_lines(path):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(path: Path) -> list[str]:
    """Every link target of a page's prose (inline and reference definitions)."""
    out = []
    for line in _prose_lines(path):
        bare = CODE_SPAN.sub("", line)
        out += INLINE_LINK.findall(bare)
        match = REFERENCE_DEF.match(bare)
        if match:
            out.append(match.group(1))
    return out


def test_the_pages_exist():
    names = {p.name for p in DOCS}
    assert {"configuration.md", "cli.md", "gate.md", "politeness.md", "reliability.md",
            "security.md", "deployment.md", "api.md", "feeds.md", "stores.md",
            "benchmarks.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for target in links(page):
        if SCHEME.match(target):
            continue  # http(s), mailto: not followed here
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_table_has_as_many_cells_in_each_row(page):
    """A row with a cell too many or too few (or a header lost) renders as no table at all."""
    bad, table = [], []
    for line in [*_prose_lines(page), ""]:
        if line.lstrip().startswith("|"):
            table.append(line)
            continue
        if table:
            cells = [len(re.findall(r"(?<!\\)\|", row.strip())) - 1 for row in table]
            delimiter = len(table) > 1 and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", table[1].strip())
            if not delimiter or len(set(cells)) != 1:
                bad.append(f"table at {table[0][:60]!r}: cells per row {cells}")
            table = []
    assert not bad, f"{page.relative_to(ROOT)}: " + "; ".join(bad)


@pytest.mark.parametrize("page", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers_in_user_documentation(page):
    found = re.findall(r"\bissues?[ -]?#?\d+", page.read_text(encoding="utf-8"), re.IGNORECASE)
    assert not found, f"{page.relative_to(ROOT)} mentions {found}"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_each_page_starts_with_a_title_and_a_one_line_summary(page):
    first = page.read_text(encoding="utf-8").splitlines()[:4]
    assert first[0].startswith("# ") and first[1] == "" and first[2] and first[3] == "", first
