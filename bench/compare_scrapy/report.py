"""Summaries of the runs and the markdown table bench/compare prints."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness import Row, RunResult
from tables import DASH, head, median, num


@dataclass
class Summary:
    """Medians over the successful runs of one row."""

    row: Row
    runs: list[RunResult]
    ok: list[RunResult] = field(init=False)

    def __post_init__(self) -> None:
        self.ok = [r for r in self.runs if r.ok]

    @property
    def failed(self) -> list[RunResult]:
        return [r for r in self.runs if not r.ok]

    @property
    def pages_per_s(self) -> float | None:
        return median([r.pages_per_s for r in self.ok])

    @property
    def cpu_ms_per_page(self) -> float | None:
        return median([r.cpu_ms_per_page for r in self.ok])

    @property
    def peak_rss_mb(self) -> float | None:
        return median([r.peak_rss_mb for r in self.ok])

    @property
    def redis_commands_per_page(self) -> float | None:
        return median([r.redis_commands_per_page for r in self.ok])

    @property
    def broker_bytes_per_page(self) -> float | None:
        return median([r.broker_bytes_per_page for r in self.ok])

    def to_dict(self) -> dict[str, object]:
        return {"row": self.row.key, "label": self.row.label, "ok_runs": len(self.ok),
                "failed_runs": len(self.failed), "pages_per_s": self.pages_per_s,
                "cpu_ms_per_page": self.cpu_ms_per_page, "peak_rss_mb": self.peak_rss_mb,
                "redis_commands_per_page": self.redis_commands_per_page,
                "broker_bytes_per_page": self.broker_bytes_per_page}


def _ratio(a: float | None, b: float | None) -> str:
    return DASH if a is None or not b else f"{a / b:.2f}×"


def _pages(s: Summary, expected: int) -> str:
    counts = sorted(r.pages for r in s.ok)
    text = f"{counts[0]:,}" if counts[0] == counts[-1] else f"{counts[0]:,}–{counts[-1]:,}"
    return text if counts[0] == counts[-1] == expected else f"{text} ⚠"


def _speed(s: Summary) -> str:
    rates = sorted(r.pages_per_s for r in s.ok)
    text = num(s.pages_per_s)
    return text if len(rates) < 2 else f"{text} ({rates[0]:,.0f}–{rates[-1]:,.0f})"


HEADER = ("| Row | Pages | Pages/s (median, min–max) | CPU ms/page | Peak RSS MB | Redis cmds/page "
          "| Broker B/page | Speed ÷ Scrapy | Speed ÷ scrapy-redis | CPU ÷ Scrapy | CPU ÷ scrapy-redis |")


def table(summaries: list[Summary], expected: int, *, split_redis: bool = True) -> tuple[str, list[str]]:
    """The markdown table and its footnotes. With one Redis for broker and state
    (``split_redis`` False), the bytes column is everything the crawler sent to it."""
    by_key = {s.row.key: s for s in summaries}
    header = HEADER if split_redis else HEADER.replace("| Broker B/page |", "| Redis in B/page |")
    lines = head(header)
    notes: list[str] = []
    for s in summaries:
        lines.append(_line(s, by_key, expected, notes))
    if any(s.ok and _pages(s, expected).endswith("⚠") for s in summaries):
        notes.append(f"⚠ not every run stored the {expected:,} distinct URLs of the site.")
    return "\n".join(lines), notes


def _line(s: Summary, by_key: dict[str, Summary], expected: int, notes: list[str]) -> str:
    label = s.row.label
    reasons = {r.error for r in s.failed}
    if s.ok or len(reasons) > 1:
        notes += [f"{s.row.key}, run {r.round}: failed: {r.error}" for r in s.failed]
    if not s.ok:
        reason = s.failed[0].error if s.failed else "not run"
        return f"| {label} | failed: {reason} |" + f" {DASH} |" * 9
    if s.failed:
        label += f" ({len(s.failed)} of {len(s.runs)} runs failed)"
    for r in s.ok:
        if r.notes.get("problems"):
            notes.append(f"{s.row.key}, run {r.round}: {', '.join(r.notes['problems'])}")
    cells = [label, _pages(s, expected), _speed(s), num(s.cpu_ms_per_page, 2), num(s.peak_rss_mb),
             num(s.redis_commands_per_page, 1), num(s.broker_bytes_per_page)]
    if s.row.is_crawler_tasks:
        scrapy = by_key.get("scrapy-1")
        sredis = by_key.get(f"scrapy-redis-{s.row.procs}")
        cells += [_ratio(s.pages_per_s, scrapy.pages_per_s if scrapy else None),
                  _ratio(s.pages_per_s, sredis.pages_per_s if sredis else None),
                  _ratio(s.cpu_ms_per_page, scrapy.cpu_ms_per_page if scrapy else None),
                  _ratio(s.cpu_ms_per_page, sredis.cpu_ms_per_page if sredis else None)]
    else:
        cells += [DASH] * 4
    return "| " + " | ".join(cells) + " |"
