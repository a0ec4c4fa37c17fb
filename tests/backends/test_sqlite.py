"""The embedded SQLite store."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import tracemalloc

import pytest

from crawler_tasks.backends import open_store
from crawler_tasks.core.errors import StoreUnavailable
from crawler_tasks.core.models import PageRecord


def test_redelivered_record_is_stored_once(tmp_path):
    from crawler_tasks.core.models import PageRecord

    store = open_store(str(tmp_path / "p.db"))
    record = PageRecord(url="http://a.test/", fingerprint="f1", crawl_id="c", depth=0,
                        fetched_at="2026-01-01T00:00:00+00:00", status=200)
    store.upsert([record])
    record.title = "second delivery"
    store.upsert([record])
    assert [r.title for r in store.records()] == ["second delivery"]


def test_a_record_with_a_large_body_is_written_as_json_text_without_its_json_whole_in_memory(tmp_path):
    store = open_store(str(tmp_path / "p.db"))
    record = PageRecord(url="http://a.test/", fingerprint="f1", crawl_id="c", depth=0,
                        fetched_at="2026-01-01T00:00:00+00:00", status=200,
                        body="\x00" * 5_000_000, text="\ufffd" * 1000)  # 30 MB of JSON
    tracemalloc.start()
    try:
        store.upsert([record])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40e6  # the JSON once, as UTF-8 (as a string with "\ufffd" in it: 60 MB, twice)
    assert list(store.records()) == [record]
    with sqlite3.connect(tmp_path / "p.db") as conn:
        kind, text = conn.execute("SELECT typeof(record), record FROM pages").fetchone()
    assert kind == "text" and json.loads(text)["body"] == record.body


def test_sqlite_store_takes_writers_in_several_processes(tmp_path):
    from crawler_tasks.core.models import PageRecord

    path = str(tmp_path / "p.db")
    open_store(path).count()

    def write(n: int) -> None:
        store = open_store(path)
        for i in range(100):
            store.upsert([PageRecord(url=f"http://a.test/{n}/{i}", fingerprint=f"{n}-{i}",
                                     crawl_id="c", depth=0, fetched_at="x")])
        store.close()

    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=write, args=(n,)) for n in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    assert open_store(path).count("c") == 400


def test_unknown_store_scheme_suggests_the_known_one():
    import pytest

    from crawler_tasks.core.errors import UnknownStore

    with pytest.raises(UnknownStore, match="did you mean sqlite://"):
        open_store("sqlit:///x.db")


def _with_items(url: str, crawl_id: str, items: list[dict], types: list[str] | None = None) -> PageRecord:
    r = PageRecord(url=url, fingerprint=f"fp-{url}", crawl_id=crawl_id, depth=0, fetched_at="2026-01-01T00:00:00")
    r.items, r.item_types = items, types or []
    return r


def test_the_items_feed_holds_a_row_per_item_written_once_per_page(tmp_path):
    store = open_store(str(tmp_path / "items.db"))
    books = _with_items("http://s.test/1", "c1", [{"title": "A"}, {"title": "B"}], ["Book", "Book"])
    store.upsert([books, _with_items("http://s.test/2", "c1", [{"q": 1}])])
    store.upsert([books])  # redelivered: written again, not twice
    rows = list(store.item_rows("c1"))
    assert [(r.type, r.position, r.item) for r in rows] == [
        ("Book", 0, {"title": "A"}), ("Book", 1, {"title": "B"}), ("item", 0, {"q": 1})]
    assert rows[0].url == "http://s.test/1" and rows[0].fingerprint == "fp-http://s.test/1"
    assert store.item_counts() == {("c1", "Book"): 2, ("c1", "item"): 1}

    store.upsert([_with_items("http://s.test/1", "c1", [{"title": "A2"}], ["Book"]),  # fewer items now
                  _with_items("http://s.test/2", "c1", [])])  # none now
    assert [(r.type, r.item) for r in store.item_rows("c1")] == [("Book", {"title": "A2"})]
    # Another crawl's items of the same page are its own.
    store.upsert([_with_items("http://s.test/1", "c2", [{"title": "X"}], ["Book"])])
    assert store.item_counts() == {("c1", "Book"): 1, ("c2", "Book"): 1}
    assert [r.item for r in store.item_rows(kind="Book", crawl_id="c2")] == [{"title": "X"}]


def test_a_batch_is_one_transaction(tmp_path):
    path = tmp_path / "tx.db"
    store = open_store(str(path))
    bad = _with_items("http://s.test/2", "c", [])
    bad.fetched_at = None  # NOT NULL: the second record of the batch fails it
    with pytest.raises(StoreUnavailable, match="NOT NULL"):
        store.upsert([_with_items("http://s.test/1", "c", [{"a": 1}]), bad])
    assert store.count() == 0 and list(store.item_rows()) == []  # nothing of the batch is half-written


def test_a_crawls_records_are_its_own(tmp_path):
    store = open_store(str(tmp_path / "crawls.db"))
    first = _with_items("http://s.test/1", "a", [])
    first.title = "in a"
    later = _with_items("http://s.test/1", "b", [])
    later.title, later.fetched_at = "in b", "2026-01-02T00:00:00"
    store.upsert([first])
    store.upsert([later])  # the same URL in a later crawl: beside the first, not over it
    assert [r.title for r in store.records("a")] == ["in a"] and store.count("a") == 1
    assert [r.title for r in store.records("b")] == ["in b"] and store.count() == 2
    fp = first.fingerprint
    assert store.get(fp, "a").title == "in a" and store.get(fp, "b").title == "in b"
    assert store.get(fp).title == "in b" and store.get(fp, "c") is None  # without a crawl: the latest


def test_a_file_an_earlier_version_wrote_is_moved_to_the_per_crawl_key(tmp_path):
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE pages (fingerprint TEXT PRIMARY KEY, url TEXT NOT NULL, crawl_id TEXT NOT NULL,
            status INTEGER, fetched_at TEXT NOT NULL, description TEXT, record TEXT NOT NULL);
        CREATE INDEX pages_crawl ON pages (crawl_id);""")
    for n, crawl in ((2, "a"), (1, "a"), (3, "b")):
        r = _with_items(f"http://s.test/{n}", crawl, [])
        old.execute("INSERT INTO pages VALUES (?, ?, ?, 200, ?, NULL, ?)",
                    (r.fingerprint, r.url, crawl, r.fetched_at, json.dumps(r.to_dict())))
    old.commit()
    old.close()
    store = open_store(str(path))
    assert [r.url for r in store.records()] == ["http://s.test/2", "http://s.test/1", "http://s.test/3"]
    store.upsert([_with_items("http://s.test/2", "b", [])])  # now beside crawl a's record
    assert store.count("a") == 2 and store.count("b") == 2
    keys = [row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(pages)") if row[5]]
    assert keys == ["crawl_id", "fingerprint"]
