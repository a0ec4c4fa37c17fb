"""The store stage: idempotent records, and a dead backend delays pages but drops none."""

from __future__ import annotations

import json
import os

import pytest
from elasticsearch import Elasticsearch

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.dead_letters import dead_letters, replay_dead
from crawler_tasks.stages.dispatcher import flush_once
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from crawler_tasks.stages.statistics import flush_stats
from crawler_tasks.stages.store import write_batch
from tests.cli.test_cli import cli
from tests.fakes.es_server import ESServer
from tests.fakes.hbase_server import HBaseServer
from tests.fakes.kafka_mock import MockKafka, read_topic
from tests.helpers import REDIS, flush, token
from tests.state.test_store_queue import finish_pages, queue_rt
from tests.stored_bytes import AT, LARGE, LETTER_PLAIN, LETTER_ZLIB, SMALL, STORE, as_written


def test_dead_backend_means_retried_store_tasks_not_dropped_pages(rt, worker, site, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store's directory should be")
    store = str(blocker / "pages.db")
    crawl_id = f"dead{token()}"
    submit_requests(rt, build_requests(f"{site.url}/page/{token()}", crawl_id=crawl_id), store=store)

    wait_drained(lambda: rt.stats.read(crawl_id).get("store/retries", 0) >= 2, timeout=30)
    assert rt.crawls.outstanding(crawl_id) == 1  # still waiting, not dropped
    blocker.unlink()  # the backend comes back
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=60)
    [record] = open_store(store).records(crawl_id)
    assert record.status == 200


def _crawl_into(rt, worker, store: str, urls: list[str]) -> str:
    crawl_id = f"st{token()}"
    submit_requests(rt, build_requests(urls, crawl_id=crawl_id), store=store)
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=60, workers=worker)
    return crawl_id


def test_a_crawl_writes_each_page_with_its_body_to_every_store_of_the_list(rt, worker, site, tmp_path):
    with ESServer() as es, HBaseServer() as hbase:
        host = es.url.split("://", 1)[1]
        hbase_uri = f"hbase://{hbase.host}:{hbase.port}/pages"
        store = f"{tmp_path / 'pages.db'},elasticsearch://{host}/pages,{hbase_uri}"
        crawl_id = _crawl_into(rt, worker, store, [f"{site.url}/"])
        local = {r.url: r for r in open_store(str(tmp_path / "pages.db")).records(crawl_id)}
        assert set(local) == {f"{site.url}/", f"{site.url}/page/1", f"{site.url}/page/2"}
        assert "<title>Index</title>" in local[f"{site.url}/"].body
        docs = es.documents("pages")
        assert {d["url"] for d in docs.values()} == set(local)
        assert {doc_id: d["body"] for doc_id, d in docs.items()} == {f"{r.crawl_id}:{r.fingerprint}": r.body for r in local.values()}
        in_hbase = {r.url: r for r in open_store(hbase_uri).records(crawl_id)}
        assert in_hbase == local
        for uri in (f"elasticsearch://{host}/pages", hbase_uri):
            exported = cli("export", "--store", uri, "--crawl-id", crawl_id, "--no-body")
            lines = [json.loads(line) for line in exported.stdout.splitlines()]
            assert {r["url"] for r in lines} == set(local) and not any("body" in r for r in lines)
        assert rt.stats.read(crawl_id)["stored"] == 3

        # Beat's statistics flush writes one document per crawl, in place.
        assert flush_stats(rt, [crawl_id]) == 1
        assert flush_stats(rt, [crawl_id]) == 0  # nothing changed since
        [stats] = [d for d in es.documents("pages-stats").values() if d["crawl_id"] == crawl_id]
        assert stats["total_num"] == 3 and stats["status"]["200"] == 3


def test_a_record_a_backend_refuses_is_kept_as_a_dead_letter_with_the_reason_and_replayed_elsewhere(
        rt, worker, site, tmp_path):
    with ESServer() as es:
        host = es.url.split("://", 1)[1]
        # An index made by someone else, where `title` must be a number: the page is refused.
        Elasticsearch(es.url).indices.create(index="strict", mappings={
            "properties": {"title": {"type": "integer"}}})
        url = f"{site.url}/page/{token()}"
        crawl_id = _crawl_into(rt, worker, f"elasticsearch://{host}/strict", [url])
        stats = rt.stats.read(crawl_id)
        assert stats.get("store/refused") == stats.get("store/dead_letters") == 1
        assert "stored" not in stats and "store/retries" not in stats  # not retried, not lost

        listed = cli("dead-letters", "--crawl-id", crawl_id)
        assert f"{crawl_id}  {url}  -> elasticsearch://{host}/strict  refused: " \
            "document_parsing_exception: " in listed.stdout
        assert "failed to parse field [title] of type [integer]" in listed.stdout

        again = cli("replay-dead", "--crawl-id", crawl_id)  # the same store refuses it again: kept
        assert again.returncode == 3 and "0 dead letter(s); 1 still failing" in again.stdout
        assert f"still failing: {url}  -> elasticsearch://{host}/strict: document_parsing_exception" \
            in again.stderr
        db = str(tmp_path / "rescued.db")
        done = cli("replay-dead", "--crawl-id", crawl_id, "--to", db)
        assert done.returncode == 0, done.stderr
        assert "replayed 1 dead letter(s); 0 still failing" in done.stdout
        [record] = open_store(db).records(crawl_id)
        assert record.url == url and "<title>Page" in record.body
        assert cli("dead-letters", "--json", "--crawl-id", crawl_id).stdout == ""
        assert rt.stats.read(crawl_id)["store/replayed"] == 1


def test_dead_letters_earlier_code_kept_read_back(tmp_path):
    rt = queue_rt(str(tmp_path / "pages.db"))
    try:
        rt.redis.lpush(rt.keys.dead_letters(), LETTER_PLAIN, LETTER_ZLIB)  # newest first
        assert dead_letters(rt) == [
            {"record": as_written(LARGE), "store": STORE, "kind": "refused", "error": "mapping", "at": AT},
            {"record": as_written(SMALL), "store": STORE, "kind": "failed", "error": "down", "at": AT}]
        done = replay_dead(rt, to=str(tmp_path / "elsewhere.db"))
        assert done.written == 2 and dead_letters(rt) == []
        assert sorted(r.url for r in open_store(str(tmp_path / "elsewhere.db")).records()) == [
            SMALL.url, LARGE.url]
    finally:
        rt.close()


def test_replay_goes_on_past_letters_whose_store_cannot_be_opened_and_sends_them_elsewhere(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store's directory should be")
    down = str(blocker / "pages.db")
    rt = queue_rt(down, store_max_retries=0)
    env = rt.settings.to_env()
    try:
        # Oldest first, as a replay meets them: a store that was down (it comes back), then
        # two that cannot be opened here.
        for crawl_id, store in (("back", down), ("unknown", "mongo://db.internal/pages"),
                                ("masked", f"elasticsearch://crawler:pw{token()}@127.0.0.1:9/pages")):
            rt.crawls.register(crawl_id, store=store)
            finish_pages(rt, 1, crawl_id=crawl_id)
            flush_once(rt, "w1")
        assert len(dead_letters(rt)) == 3
        blocker.unlink()

        first = cli("replay-dead", env=env)
        assert first.returncode == 3 and "replayed 1 dead letter(s); 2 still failing" in first.stdout
        failing = first.stderr.splitlines()
        assert failing == [
            "still failing: http://site.test/unknown/0  -> mongo://db.internal/pages: unknown store "
            "'mongo://db.internal/pages': scheme 'mongo'; known: elasticsearch, elasticsearchs, "
            "hbase, kafka, kafkas, sqlite, warc",
            "still failing: http://site.test/masked/0  -> elasticsearch://crawler:***@127.0.0.1:9/pages: "
            "store elasticsearch://crawler:***@127.0.0.1:9/pages is not configured here: its password "
            "is masked in Redis, so CRAWLER_STORE must name it"], first.stderr
        assert [r.url for r in open_store(down).records("back")] == ["http://site.test/back/0"]

        elsewhere = str(tmp_path / "elsewhere.db")
        done = cli("replay-dead", "--to", elsewhere, env=env)
        assert done.returncode == 0 and "replayed 2 dead letter(s); 0 still failing" in done.stdout
        assert sorted(r.url for r in open_store(elsewhere).records()) == [
            "http://site.test/masked/0", "http://site.test/unknown/0"]
        assert dead_letters(rt) == []
        assert rt.stats.read("masked")["store/replayed"] == rt.stats.read("unknown")["store/replayed"] == 1
    finally:
        rt.close()


DEAD_DB = int(os.environ.get("CRAWLER_STORE_TEST_DB", "12"))  # of its own: test files run side by side


@pytest.fixture
def impatient(settings, tmp_path):
    """A worker that gives a store up after one retry (its own broker and state, DB 14)."""
    flush(DEAD_DB)
    s = settings.replace(broker_url=f"{REDIS}/{DEAD_DB}", redis_url=f"{REDIS}/{DEAD_DB}",
                         key_prefix=f"dead{token()}", store_max_retries=1)
    workers = Workers(s, concurrency=2, name="impatient@%h", log_path=str(tmp_path / "w.log")).start()
    rt = Runtime(s, create_app(s))
    yield rt, workers
    workers.stop()
    rt.close()
    flush(DEAD_DB)


def test_a_store_down_past_its_retries_keeps_the_page_as_a_dead_letter_until_replayed(impatient, site):
    rt, workers = impatient
    env = rt.settings.to_env()
    with ESServer() as es:
        uri = f"elasticsearch://{es.url.split('://', 1)[1]}/dead"
        es.down()
        crawl_id = _crawl_into(rt, workers, uri, [f"{site.url}/page/{token()}"])
        stats = rt.stats.read(crawl_id)
        assert stats["store/dead_letters"] == 1 and stats["store/failed"] == 1 and "stored" not in stats

        listed = cli("dead-letters", "--json", env=env)
        [entry] = [json.loads(line) for line in listed.stdout.splitlines()]
        assert entry["record"]["crawl_id"] == crawl_id and "<title>Page" in entry["record"]["body"]
        assert entry["store"] == uri and entry["error"]

        failed = cli("replay-dead", env=env)  # still down: kept
        assert failed.returncode == 3 and "1 still failing" in failed.stdout
        es.up()
        done = cli("replay-dead", env=env)
        assert done.returncode == 0 and "replayed 1 dead letter(s)" in done.stdout, done.stderr
        assert [d["url"] for d in es.documents("dead").values()] == [entry["record"]["url"]]
        assert cli("dead-letters", "--json", env=env).stdout == ""
        assert rt.stats.read(crawl_id)["store/replayed"] == 1


def test_a_kafka_store_down_past_its_retries_keeps_the_page_as_a_dead_letter_until_replayed(impatient, site):
    rt, workers = impatient
    env = rt.settings.to_env()
    kafka = MockKafka()
    try:
        uri = f"kafka://{kafka.bootstrap}/dead-{token()}?timeout=1"
        kafka.down()
        url = f"{site.url}/page/{token()}"
        crawl_id = _crawl_into(rt, workers, uri, [url])
        stats = rt.stats.read(crawl_id)
        assert stats["store/retries"] == 1 and stats["store/dead_letters"] == stats["store/failed"] == 1
        assert "stored" not in stats
        failed = cli("replay-dead", env=env)  # still down: kept
        assert failed.returncode == 3 and "1 still failing" in failed.stdout
        kafka.up()
        done = cli("replay-dead", env=env)
        assert done.returncode == 0 and "replayed 1 dead letter(s)" in done.stdout, done.stderr
        [message] = read_topic(kafka.bootstrap, uri.split("/")[-1].split("?")[0], expect=1)
        assert json.loads(message.value())["url"] == url and "<title>Page" in json.loads(message.value())["body"]
        assert cli("dead-letters", "--json", env=env).stdout == ""
    finally:
        kafka.close()


BATCH_DB = DEAD_DB


@pytest.fixture
def batch_cluster(settings, tmp_path):
    """(settings factory, workers started) on a broker and state of their own (DB 14)."""
    flush(BATCH_DB)
    started: list[Workers] = []
    prefix = f"batch{token()}"

    def make(**overrides):
        return settings.replace(broker_url=f"{REDIS}/{BATCH_DB}", redis_url=f"{REDIS}/{BATCH_DB}",
                                key_prefix=prefix, **overrides)

    def start(s, name: str) -> Workers:
        workers = Workers(s, concurrency=4, name=f"{name}{token()}@%h",
                          log_path=str(tmp_path / f"{name}.log")).start()
        started.append(workers)
        return workers

    yield make, start
    for workers in started:
        workers.stop()
    flush(BATCH_DB)


def only_records_outstanding(rt: Runtime, crawl_id: str, pages: int) -> bool:
    """Every page fetched: what the crawl still waits for is its ``pages`` records."""
    return rt.crawls.outstanding(crawl_id) == pages and \
        all(m.endswith(".write") for m in rt.crawls.outstanding_sample(crawl_id, pages))


def test_a_worker_killed_while_writing_a_half_full_batch_loses_no_record(batch_cluster, site):
    make, start = batch_cluster
    pages = 20
    with ESServer() as es:
        s = make(store=f"elasticsearch://{es.url.split('://', 1)[1]}/pages", store_batch=200,
                 store_lease_s=2.0)
        rt = Runtime(s, create_app(s))
        crawl_id = f"kill{token()}"
        es.hold()  # the first bulk request waits, unanswered and unapplied
        submit_requests(rt, build_requests(f"{site.url}/tree/{token()}/0?size={pages}", crawl_id=crawl_id))
        first = start(s, "first")
        assert es.held.wait(30), "no batch reached Elasticsearch"
        # Every page fetched (no fetch message left with the worker), then SIGKILL: what it
        # holds is a batch taken but not written.
        wait_drained(lambda: only_records_outstanding(rt, crawl_id, pages), timeout=30, workers=first)
        first.kill()
        es.release(drop=True)
        assert "pages" not in es.index_names() or not es.documents("pages")  # nothing applied
        second = start(s, "second")
        wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=60, workers=second)
        stats = rt.stats.read(crawl_id)
        assert len(es.documents("pages")) == stats["stored"] == pages  # each once, none lost
        assert "store/retries" not in stats and "store/failed" not in stats
        rt.close()


def test_warm_shutdown_writes_the_records_of_the_pages_it_finished(batch_cluster, site, tmp_path):
    make, start = batch_cluster
    db = str(tmp_path / "pages.db")
    s = make(store=db, store_batch=200, store_flush_s=600)  # no batch fills, none ages out
    rt = Runtime(s, create_app(s))
    crawl_id = f"warm{token()}"
    submit_requests(rt, build_requests(f"{site.url}/tree/{token()}/0?size=30&delay=0.5", crawl_id=crawl_id))
    workers = start(s, "warm")
    wait_drained(lambda: rt.store_queue.depth().pending >= 3, timeout=30, workers=workers)
    workers.stop()  # SIGTERM while pages are in flight: they finish, then their records are written
    stats = rt.stats.read(crawl_id)
    assert len(list(open_store(db).records(crawl_id))) == stats["stored"] == stats["status/200"] > 3
    depth = rt.store_queue.depth()  # (a store task sent before the stop may wait in the broker)
    assert (depth.pending, depth.delayed, depth.taken) == (0, 0, 0)
    rt.close()


def test_elasticsearch_going_away_mid_crawl_delays_records_but_stores_each_once(batch_cluster, site):
    make, start = batch_cluster
    pages = 40
    with ESServer() as es:
        s = make(store=f"elasticsearch://{es.url.split('://', 1)[1]}/pages", retry_backoff=0.2,
                 retry_backoff_max=1.0)
        rt = Runtime(s, create_app(s))
        crawl_id = f"away{token()}"
        submit_requests(rt, build_requests(f"{site.url}/tree/{token()}/0?size={pages}&delay=0.05",
                                           crawl_id=crawl_id))
        workers = start(s, "away")
        wait_drained(lambda: rt.stats.read(crawl_id).get("stored", 0) >= 5, timeout=30, workers=workers)
        es.down()
        wait_drained(lambda: rt.stats.read(crawl_id).get("store/retries", 0) >= 1, timeout=30,
                     workers=workers)
        es.up()
        wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=60, workers=workers)
        stats = rt.stats.read(crawl_id)
        assert len(es.documents("pages")) == stats["stored"] == pages
        assert "store/failed" not in stats and stats["status/200"] == pages
        rt.close()


def test_a_crawl_whose_statistics_cannot_be_written_does_not_stop_the_others(rt):
    with ESServer() as es:
        host = es.url.split("://", 1)[1]
        bad, good = f"st{token()}", f"st{token()}"
        # A crawl whose store no backend knows (registered by an older configuration) comes
        # first; the next crawl's statistics are written all the same.
        rt.crawls.register(bad, store="mongo://nowhere/db")
        rt.crawls.register(good, store=f"elasticsearch://{host}/pages")
        rt.gate.add_counts(bad, {"stored": 1})
        rt.gate.add_counts(good, {"stored": 2, "total_num": 2})
        assert flush_stats(rt, [bad, good]) == 1
        [stats] = [d for d in es.documents("pages-stats").values() if d["crawl_id"] == good]
        assert stats["total_num"] == 2


def test_unreadable_dead_letters_are_set_aside_and_the_others_listed_and_replayed(tmp_path):
    rt = queue_rt(str(tmp_path / "pages.db"))
    rt.dead_letters.max_letters = 100
    try:
        bad = [b"\x78\x9c not zlib at all", b'{"no": "record"}', b"\xff\xfe garbage"]
        rt.redis.lpush(rt.keys.dead_letters(), LETTER_PLAIN, bad[0], LETTER_ZLIB, bad[1], bad[2])
        assert [e["record"]["url"] for e in dead_letters(rt)] == [LARGE.url, SMALL.url]  # newest first
        assert rt.dead_letters.unreadable_count() == 3 and rt.dead_letters.count() == 2
        assert sorted(rt.redis.lrange(rt.keys.dead_letters_unreadable(), 0, -1)) == sorted(bad)
        listed = cli("dead-letters", env=rt.settings.to_env())
        assert listed.returncode == 0 and "2 dead letter(s)" in listed.stderr
        assert "3 unreadable dead letter(s) or store entries set aside" in listed.stderr
        assert "Traceback" not in listed.stderr
        done = replay_dead(rt, to=str(tmp_path / "elsewhere.db"))
        assert done.written == 2 and rt.dead_letters.count() == 0
    finally:
        rt.close()


def test_a_replay_walks_a_long_list_a_page_at_a_time_and_misses_none(tmp_path, monkeypatch):
    from crawler_tasks.state import dead_letters as state_letters

    monkeypatch.setattr(state_letters, "PAGE", 3)
    rt = queue_rt(str(tmp_path / "pages.db"))
    try:
        letters = [LETTER_PLAIN, LETTER_ZLIB] * 5  # ten letters, pages of three
        rt.redis.lpush(rt.keys.dead_letters(), *letters)
        done = replay_dead(rt, to=str(tmp_path / "elsewhere.db"))
        assert done.written == 10 and rt.dead_letters.count() == 0
    finally:
        rt.close()


def test_dead_letters_past_the_cap_are_counted_not_kept(tmp_path):
    rt = queue_rt(str(tmp_path / "pages.db"), dead_letters_max=2, store_max_retries=0)
    try:
        rt.crawls.register("c1", store="mongo://db.internal/pages")  # a store no worker can open
        finish_pages(rt, 3)
        assert flush_once(rt, "w1") == 3
        stats = rt.stats.read("c1")
        assert rt.dead_letters.count() == 2 and stats["store/dead_letters_dropped"] == 1
        assert rt.crawls.outstanding("c1") == 0
    finally:
        rt.close()


def test_an_unreadable_store_entry_is_set_aside_and_its_page_leaves_the_crawl(tmp_path):
    rt = queue_rt(str(tmp_path / "pages.db"))
    try:
        [record] = finish_pages(rt, 1)
        assert rt.crawls.outstanding("c1") == 1  # the record's token
        [raw] = rt.store_queue.take("w1", 10, 0.0, 5.0, now=True)
        damaged = raw.replace(b'\n{"url":', b'\n{"nourl":', 1)  # a record with no URL
        write_batch(rt, "w1", [damaged])
        assert rt.crawls.outstanding("c1") == 0  # the crawl drains
        assert rt.stats.read("c1")["store/unreadable"] == 1
        assert rt.redis.lrange(rt.keys.dead_letters_unreadable(), 0, -1) == [damaged]
        assert list(open_store(rt.settings.store).records("c1")) == []
        assert record.url.endswith("/c1/0")
    finally:
        rt.close()
