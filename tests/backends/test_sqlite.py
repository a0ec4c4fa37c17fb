"""The embedded SQLite store."""

from __future__ import annotations

import multiprocessing

from crawler_tasks.backends import open_store


def test_redelivered_record_is_stored_once(tmp_path):
    from crawler_tasks.models import PageRecord

    store = open_store(str(tmp_path / "p.db"))
    record = PageRecord(url="http://a.test/", fingerprint="f1", crawl_id="c", depth=0,
                        fetched_at="2026-01-01T00:00:00+00:00", status=200)
    store.upsert([record])
    record.title = "second delivery"
    store.upsert([record])
    assert [r.title for r in store.records()] == ["second delivery"]


def test_sqlite_store_takes_writers_in_several_processes(tmp_path):
    from crawler_tasks.models import PageRecord

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

    from crawler_tasks.errors import UnknownStore

    with pytest.raises(UnknownStore, match="did you mean sqlite://"):
        open_store("sqlit:///x.db")
