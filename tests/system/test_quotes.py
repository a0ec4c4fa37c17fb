"""The Scrapy tutorial's spider and its port, side by side on the quotes example: Scrapy
(``scrapy runspider``) and crawler_tasks (``crawler-tasks crawl``, defaults on, only the delay
shortened) crawl the same local site and yield the same items."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.system.test_programs import ROOT, example_copy, example_site, records, run

QUOTES = ROOT / "examples" / "quotes"
sys.path.insert(0, str(QUOTES))
import quotes_site  # noqa: E402


@pytest.fixture(scope="module")
def quotes_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return example_copy(tmp_path_factory, QUOTES)


@pytest.fixture(scope="module")
def site(quotes_dir: Path) -> Iterator[str]:
    with example_site(quotes_dir, "quotes_site.py", "quotes at ") as base:
        yield base


def canonical(items: list[dict]) -> list[str]:
    return sorted(json.dumps(item, sort_keys=True, ensure_ascii=False) for item in items)


def test_scrapy_and_crawler_tasks_yield_the_same_items(site: str, quotes_dir: Path):
    scrapy = subprocess.run([sys.executable, "-m", "scrapy", "runspider", "quotes_scrapy.py", "-a", f"base={site}",
                             "-O", "scrapy-items.jsonl", "-s", "LOG_LEVEL=WARNING"], cwd=quotes_dir,
                            capture_output=True, text=True, timeout=180)
    assert scrapy.returncode == 0, scrapy.stderr[-3000:]
    theirs = [json.loads(line) for line in (quotes_dir / "scrapy-items.jsonl").read_text().splitlines()]

    done = run("crawl", "--plugins", "quotes_plugin", "--delay", "0.05", "--quiet", "--store", "quotes.db",
               f"{site}/", f"{site}/api/quotes?page=1", cwd=quotes_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    got = records("quotes.db", cwd=quotes_dir)
    ours = [item for record in got.values() for item in record["items"]]

    assert canonical(ours) == canonical(theirs)
    kinds = [item["kind"] for item in ours]
    assert (kinds.count("quote"), kinds.count("api_quote"), kinds.count("author")) == (
        len(quotes_site.QUOTES), len(quotes_site.QUOTES), len(quotes_site.AUTHORS))
    assert f"{site}/login" not in got  # linked from every page, followed by neither spider
