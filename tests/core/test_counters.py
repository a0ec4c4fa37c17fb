"""The counter registry: one entry per name, families that build and match their names,
names that never change, and the docs' tables generated from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from crawler_tasks.core import counters
from crawler_tasks.core.counters import CRAWL, FEED, HOST, REGISTRY, Counter

ROOT = Path(__file__).resolve().parents[2]
STORES = ROOT / "docs" / "stores.md"
GENERATOR = ROOT / "docs" / "gen_counters.py"

#: The names users' dashboards read. A registry change that drops or renames one fails here:
#: add new counters freely, never change these.
DASHBOARD_NAMES = {
    CRAWL: {
        "total_num", "total_request_size", "total_response_size", "status/<code>", "truncated",
        "not_modified", "retries", "retry/reason_count/<reason>", "retry/max_reached/<reason>",
        "failures", "redirects", "redirect/offsite", "robots/disallowed", "robots/unreachable",
        "duplicates", "gate/admitted", "gate/over_budget", "gate/released", "fetch/direct",
        "seeds/invalid", "links/over_cap", "links/too_long", "claim/missing", "stored",
        "store/retries", "store/failed", "store/refused", "store/dead_letters", "store/replayed",
        "errors", "errors/<Exception>", "worker_lost"},
    HOST: {"requests", "deferred", "throttled", "blocked"},
    FEED: {"ticks", "failed", "admitted", "duplicates", "refused", "stopped_early", "sitemaps/failed",
           "skipped", "skipped/<why>"},
}


def test_the_names_dashboards_read_are_all_there_unchanged():
    for where, names in DASHBOARD_NAMES.items():
        assert names <= {c.name for c in counters.of(where)}, where


def test_each_name_is_registered_once_per_hash_and_every_entry_says_what_it_counts():
    for where in (CRAWL, HOST, FEED):
        names = [c.name for c in counters.of(where)]
        assert len(names) == len(set(names)), where
    assert {c.where for c in REGISTRY} == {CRAWL, HOST, FEED}
    assert {c.kind for c in REGISTRY} <= {counters.COUNTER, counters.GAUGE}
    for c in REGISTRY:
        assert c.meaning and "\n" not in c.meaning and not c.meaning.endswith("."), c.name
        assert "|" not in c.meaning, c.name  # a cell of the docs' table


def test_every_constant_of_the_module_is_a_registered_name():
    fixed = {name: value for name, value in vars(counters).items()
             if name.isupper() and isinstance(value, str) and name not in
             ("CRAWL", "HOST", "FEED", "COUNTER", "GAUGE")}
    families = {name: value for name, value in vars(counters).items() if isinstance(value, Counter)}
    entries = {(c.name, c.where) for c in REGISTRY}
    for name, value in fixed.items():
        expected = HOST if name.startswith("HOST_") else FEED if name.startswith("FEED_") else CRAWL
        assert (value, expected) in entries, name
    assert set(families.values()) == {c for c in REGISTRY if c.family}
    # and every fixed name of the registry has its constant
    assert {c.name for c in REGISTRY if not c.family} == set(fixed.values())


@pytest.mark.parametrize(("build", "part", "name"), [
    (counters.status, 404, "status/404"),
    (counters.retry_reason, "http_503", "retry/reason_count/http_503"),
    (counters.retry_max_reached, "timeout", "retry/max_reached/timeout"),
    (counters.error, "ValueError", "errors/ValueError"),
    (counters.feed_skipped, "already_fed", "skipped/already_fed"),
])
def test_a_family_builds_the_names_it_matches(build, part, name):
    assert build(part) == name
    found = counters.find(name, FEED if name.startswith("skipped/") else CRAWL)
    assert found is not None and found.family and found.matches(name)


def test_names_are_matched_exactly_and_families_only_by_their_part():
    assert counters.registered("stored") and counters.registered("status/200")
    assert not counters.registered("status/")           # a family's part is not empty
    assert not counters.registered("status/ok")         # nor of another shape
    assert not counters.registered("errors/")
    assert not counters.registered("stored/more")
    assert not counters.registered("requests")           # a host counter, not a crawl's
    assert counters.registered("requests", HOST)
    assert counters.registered("duplicates") and counters.registered("duplicates", FEED)
    with pytest.raises(TypeError):
        counters.REGISTRY[0].build("x")
    with pytest.raises(ValueError):
        Counter("status/<code>", "a family without its part")
    # no name belongs to two entries of one hash
    parts = {"<code>": 200, "<reason>": "timeout", "<Exception>": "ValueError", "<why>": "busy", "<kind>": "rule"}
    for where in (CRAWL, HOST, FEED):
        for c in counters.of(where):
            sample = c.build(parts[c.name[len(c.prefix):]]) if c.family else c.name
            assert [o.name for o in counters.of(where) if o.matches(sample)] == [c.name]


def test_only_gate_admitted_can_fall():
    """Gate.forget gives seeds the broker did not take back to the page budget."""
    assert [c.name for c in REGISTRY if c.kind == counters.GAUGE] == [counters.GATE_ADMITTED]


def test_the_docs_tables_are_exactly_what_the_generator_prints():
    printed = subprocess.run([sys.executable, str(GENERATOR), "--print"], cwd=ROOT, capture_output=True,
                             check=True, timeout=60).stdout.decode("utf-8")
    page = STORES.read_text(encoding="utf-8")
    assert printed.rstrip("\n") in page, (
        "docs/stores.md's counters are out of step with crawler_tasks/core/counters.py: "
        "run `python docs/gen_counters.py`")
    for c in REGISTRY:
        assert f"| `{c.name}` |" in page, c.name
