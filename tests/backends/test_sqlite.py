"""The embedded SQLite store."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import tracemalloc

from crawler_tasks.backends import open_store
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
