"""The store queue on the real Redis: batches by size or age, leases, retries, no loss.

Each test has a key prefix of its own, so the suite's shared worker (prefix
``crawlertest``) never takes these entries.
"""

from __future__ import annotations

import dataclasses
import json
import random
import string
import time
from collections.abc import Iterator

import pytest
from elasticsearch import Elasticsearch

from crawler_tasks.core import codec
from crawler_tasks.core.codec import COMPRESS_OVER
from crawler_tasks.core.models import PageRecord
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages import enqueue
from crawler_tasks.stages.dead_letters import dead_letters
from crawler_tasks.stages.dispatcher import flush_once
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests
from crawler_tasks.stages.store import write_batch
from crawler_tasks.state.gate import Candidate
from crawler_tasks.state.store_queue import StoreEntry
from tests.fakes.es_server import ESServer
from tests.fakes.hbase_server import HBaseServer
from tests.helpers import REDIS, TEST_DB, token
from tests.stored_bytes import ENTRY_PLAIN, ENTRY_TAIL, ENTRY_ZLIB, LARGE, SMALL, STORE


def queue_rt(store: str, **overrides) -> Runtime:
    overrides.setdefault("key_prefix", f"sq{token()}")
    settings = Settings.from_env(broker_url=f"{REDIS}/{TEST_DB}", redis_url=f"{REDIS}/{TEST_DB}", store=store,
                                 **overrides)
    return Runtime(settings, create_app(settings))


@pytest.fixture
def sqlite_rt(tmp_path) -> Iterator[Runtime]:
    rt = queue_rt(str(tmp_path / "pages.db"), store_batch=5, store_flush_s=0.3, store_lease_s=0.5)
    yield rt
    rt.close()


def finish_pages(rt: Runtime, n: int, crawl_id: str = "c1", body: str = "hello") -> list[PageRecord]:
    """Run ``n`` fetches of ``crawl_id`` to their end as the fetch task does: each one
    leaves the crawl and its record joins the store queue, its token outstanding."""
    reqs = build_requests([f"http://site.test/{crawl_id}/{i}" for i in range(n)], crawl_id=crawl_id)
    ids = rt.gate.admit(crawl_id, [Candidate(r.fingerprint, f"t{i}") for i, r in enumerate(reqs)])
    records = []
    for req, task_id in zip(reqs, ids):
        record = PageRecord(url=req.url, fingerprint=req.fingerprint, crawl_id=crawl_id, depth=0,
                            fetched_at="2026-11-22T08:00:00+00:00", status=200, body=body)
        assert enqueue.complete(rt, req, task_id, enqueue.TaskEnd(record=record))
        records.append(record)
    return records


def test_a_batch_is_taken_when_full_when_its_oldest_waited_or_when_nothing_more_comes(sqlite_rt):
    rt, s = sqlite_rt, sqlite_rt.settings

    def take() -> list[bytes]:
        return rt.store_queue.take("w1", s.store_batch, s.store_flush_s, s.store_lease_s)

    def write(taken: list[bytes]) -> None:
        write_batch(rt, "w1", taken)

    finish_pages(rt, 3)
    assert take() == []  # records keep arriving (as far as anyone knows): wait for a batch
    finish_pages(rt, 1, crawl_id="c2")
    assert take() == []  # one more came: still filling, and young
    time.sleep(s.store_flush_s + 0.05)
    finish_pages(rt, 1, crawl_id="c3")
    write(taken := take())  # the oldest waited the flush time
    assert len(taken) == 5

    finish_pages(rt, 7, crawl_id="c4")
    write(taken := take())  # a full batch goes at once
    assert len(taken) == 5
    write(taken := take())  # the rest: nothing came since the last look
    assert len(taken) == 2

    finish_pages(rt, 2, crawl_id="c5")
    assert take() == []
    assert len(take()) == 2  # a crawl's last pages: nothing more comes, nobody waits
    assert rt.store_queue.depth().pending == 0


def test_a_store_task_is_sent_once_a_batch_is_due_and_more_only_for_more_full_batches(sqlite_rt):
    rt, s = sqlite_rt, sqlite_rt.settings  # batches of 5, flush 0.3 s, lease 0.5 s

    def dispatch(writer: str, most: int = 2) -> bool:
        return bool(rt.store_queue.dispatch([writer], s.store_batch, s.store_flush_s, s.store_lease_s, most))

    assert not dispatch("w0")  # nothing waits
    finish_pages(rt, 3)
    assert not dispatch("w1")  # records are arriving: wait for a batch
    assert dispatch("w1")  # nothing came since the last look: the batch is due
    assert not dispatch("w2")  # a writer is on it
    assert rt.store_queue.depth().writers == 1
    finish_pages(rt, 12, crawl_id="c2")  # 15 wait: three full batches
    assert dispatch("w2")  # more full batches than writers
    assert not dispatch("w3")  # at most two writers at once
    assert dispatch("w3", most=3) and not dispatch("w4", most=5)  # three writers for three batches
    time.sleep(s.store_lease_s + 0.1)  # their tasks never ran (lost): others replace them
    assert dispatch("w5") and dispatch("w6") and not dispatch("w7")
    # A writer sent because a batch was due takes whatever waits, however little.
    assert flush_once(rt, "w5") == 5 and flush_once(rt, "w6") == 5 and flush_once(rt, "w7") == 5
    assert not dispatch("w8") and rt.store_queue.depth().to_dict() == {
        "pending": 0, "delayed": 0, "taken": 0, "writers": 0}
    assert rt.stats.read("c1")["stored"] == 3 and rt.stats.read("c2")["stored"] == 12


def test_records_leave_the_crawl_only_once_written_and_are_counted_once(sqlite_rt):
    rt = sqlite_rt
    records = finish_pages(rt, 4)
    assert rt.crawls.outstanding("c1") == 4  # the fetches ended; their records wait
    assert flush_once(rt, "w1") == 4
    assert rt.crawls.outstanding("c1") == 0
    assert rt.stats.read("c1")["stored"] == 4
    assert [r.url for r in rt.store(rt.settings.store).records("c1")] == [r.url for r in records]
    assert rt.store_queue.depth().to_dict() == {"pending": 0, "delayed": 0, "taken": 0, "writers": 0}


def test_an_entry_delivered_twice_leaves_one_record_counted_once(sqlite_rt):
    rt = sqlite_rt
    finish_pages(rt, 2)
    twice = rt.redis.lrange(rt.keys.store_pending(), 0, -1)
    rt.redis.rpush(rt.keys.store_pending(), *twice)  # as a replayed completion pushes again
    flush_once(rt, "w1")
    assert rt.stats.read("c1")["stored"] == 2
    assert len(list(rt.store(rt.settings.store).records("c1"))) == 2


def test_a_dead_workers_batch_comes_back_in_order_after_its_lease(sqlite_rt):
    rt, s = sqlite_rt, sqlite_rt.settings
    records = finish_pages(rt, 5)
    assert len(rt.store_queue.take("dead", 5, s.store_flush_s, s.store_lease_s)) == 5  # then killed
    assert flush_once(rt, "w2") == 0  # its lease still runs
    time.sleep(s.store_lease_s + 0.1)
    assert flush_once(rt, "w2") == 5
    assert [r.url for r in rt.store(s.store).records("c1")] == [r.url for r in records]
    assert rt.crawls.outstanding("c1") == 0 and rt.stats.read("c1")["stored"] == 5
    assert not rt.redis.exists(rt.keys.store_taken("dead"))


def test_a_batch_that_did_not_settle_is_taken_again_before_new_records(sqlite_rt):
    rt, s = sqlite_rt, sqlite_rt.settings
    finish_pages(rt, 2)
    first = rt.store_queue.take("w1", 5, s.store_flush_s, s.store_lease_s, now=True)
    finish_pages(rt, 3, crawl_id="c2")
    # Redis failed before the batch settled: the same worker gets the same batch first.
    assert rt.store_queue.take("w1", 5, s.store_flush_s, s.store_lease_s, now=True) == first
    write_batch(rt, "w1", first)
    assert len(rt.store_queue.take("w1", 5, s.store_flush_s, s.store_lease_s, now=True)) == 3


def test_a_store_that_is_down_gets_its_batch_back_with_backoff_then_dead_letters(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store's directory should be")
    rt = queue_rt(str(blocker / "pages.db"), store_max_retries=2, retry_backoff=0.2)
    try:
        finish_pages(rt, 3)
        assert flush_once(rt, "w1") == 3
        depth = rt.store_queue.depth()
        assert (depth.pending, depth.delayed, depth.taken) == (0, 3, 0)
        assert flush_once(rt, "w1") == 0  # not due yet
        time.sleep(0.25)
        assert flush_once(rt, "w1") == 3  # retry 2
        time.sleep(0.45)
        assert flush_once(rt, "w1") == 3  # past the retries: dead letters
        stats = rt.stats.read("c1")
        assert (stats["store/retries"], stats["store/failed"], stats["store/dead_letters"]) == (6, 3, 3)
        assert rt.crawls.outstanding("c1") == 0
        letters = dead_letters(rt, "c1")
        assert len(letters) == 3 and all(e["record"]["body"] == "hello" for e in letters)
    finally:
        rt.close()


def test_entries_over_4_kib_are_compressed_and_read_back():
    record = PageRecord(url="http://a.test/", fingerprint="f", crawl_id="c", depth=0,
                        fetched_at="2026-11-22T08:00:00+00:00", body="é" * 10_000)
    small = StoreEntry("t.write", "c", "sqlite:///x.db", PageRecord(**{**record.to_dict(), "body": "x"}))
    big = StoreEntry("t.write", "c", "sqlite:///x.db", record, attempts=3)
    assert small.encode()[:1] == b"{" and big.encode(compress=False)[:1] == b"{"
    assert len(big.encode()) < COMPRESS_OVER
    assert StoreEntry.decode(big.encode()) == big == StoreEntry.decode(big.encode(compress=False))
    assert StoreEntry.decode(small.encode()) == small


def test_entries_earlier_code_queued_read_back():
    """Plain, compressed while waiting on a retry, and with a large body's text tail."""
    assert StoreEntry.decode(ENTRY_PLAIN) == StoreEntry("t1.write", "c1", STORE, SMALL, 2)
    assert StoreEntry.decode(ENTRY_ZLIB) == StoreEntry("t2.write", "c1", STORE, LARGE, 1)
    assert StoreEntry.decode(ENTRY_TAIL) == StoreEntry("t1.write", "c1", STORE, SMALL, 2)
    written = StoreEntry("t1.write", "c1", STORE, SMALL, 2).encode()
    head, record = written.split(b"\n", 1)  # the entry's fields, then its record's JSON
    earlier = json.loads(ENTRY_PLAIN)  # the same fields, the ones records gained since added
    assert json.loads(record) | earlier["r"] == json.loads(record)
    assert json.loads(head) == {k: v for k, v in earlier.items() if k != "r"} | {"j": 1}
    assert StoreEntry.decode(written) == StoreEntry("t1.write", "c1", STORE, SMALL, 2)


def test_a_read_entry_hands_its_records_json_on_as_it_was_written():
    written = StoreEntry("t1.write", "c1", STORE, SMALL, 2).encode()
    record = StoreEntry.decode(written).record
    assert record.kept_json() == written.split(b"\n", 1)[1] == codec.dumps(SMALL.to_dict())
    assert record.to_dict() == SMALL.to_dict() and "_kept_json" not in record.to_dict()
    assert StoreEntry.decode(StoreEntry("t1.write", "c1", STORE, record, 3).encode()).record.kept_json() == \
        record.kept_json()  # written again (a retry) as it came
    assert dataclasses.replace(record, title="changed").kept_json() is None  # a changed record is encoded anew


def test_an_entry_with_a_large_body_waits_compressed_and_reads_back_exactly():
    body = ("\x00" * 1_500_000) + "é ☃ 😀 \n\"\\ end"  # NULs are 6 bytes each as JSON
    record = PageRecord(url="http://a.test/", fingerprint="f", crawl_id="c", depth=0,
                        fetched_at="2026-11-22T08:00:00+00:00", body=body, text="t", links=["http://a.test/x"])
    entry = StoreEntry("t.write", "c", "sqlite:///x.db", record)
    raw = entry.encode()
    assert len(raw) < 20_000  # not 9 MB of JSON
    again, size = StoreEntry.decode_sized(raw)
    assert again == entry and size < 1.6e6
    binary = PageRecord(**{**record.to_dict(), "body": None, "body_base64": "QUJD" * 300_000})
    assert StoreEntry.decode(StoreEntry("t.write", "c", "s", binary).encode(compress=True)).record == binary


def test_a_batch_takes_at_most_store_batch_bytes_and_writes_large_records_a_part_at_a_time():
    """The cap holds twice: on what a batch takes, as kept in Redis (compressed), and on
    each request it writes, as decoded."""
    noise = "".join(random.Random(7).choices(string.ascii_letters + string.digits + "+/", k=300_000))
    with ESServer() as es:
        rt = queue_rt(f"elasticsearch://{es.url.split('://', 1)[1]}/pages", store_batch=200,
                      store_batch_bytes=1_000_000)
        try:
            finish_pages(rt, 7, body=noise)  # 300 KB entries, about 230 KB compressed
            finish_pages(rt, 3, crawl_id="c2", body="y" * 1_200_000)  # compressed: 1.2 MB each read
            kept = rt.store_queue.client.lrange(rt.keys.store_pending(), 0, -1)
            assert 200_000 < len(kept[0]) < 250_000 and all(len(k) < 10_000 for k in kept[7:])
            es.clear_requests()
            assert [flush_once(rt, "w1") for _ in range(4)] == [4, 6, 0, 0]  # 4 × 230 KB; 3 + 3 large
            bulks = [r for r in es.received if r.path.endswith("/_bulk")]
            assert [len(r.body.splitlines()) // 2 for r in bulks] == [3, 1, 3, 1, 1, 1]
            assert all(len(r.body) < 1_100_000 for r in bulks if len(r.body.splitlines()) > 2)
            assert len(es.documents("pages")) == 10
            assert rt.stats.read("c1")["stored"] == 7 and rt.stats.read("c2")["stored"] == 3
        finally:
            rt.close()


def test_one_elasticsearch_bulk_request_per_batch():
    with ESServer() as es:
        rt = queue_rt(f"elasticsearch://{es.url.split('://', 1)[1]}/pages", store_batch=200)
        try:
            finish_pages(rt, 250)
            es.clear_requests()
            assert flush_once(rt, "w1") == 200 and flush_once(rt, "w1") == 50
            bulks = [r for r in es.received if r.path.endswith("/_bulk")]
            assert [len(r.body.splitlines()) // 2 for r in bulks] == [200, 50]  # action + source
            assert len(es.documents("pages")) == 250
            assert rt.stats.read("c1")["stored"] == 250 and rt.crawls.outstanding("c1") == 0
        finally:
            rt.close()


def test_one_hbase_thrift_batch_per_batch():
    with HBaseServer() as hbase:
        rt = queue_rt(f"hbase://{hbase.host}:{hbase.port}/pages", store_batch=200)
        try:
            finish_pages(rt, 250)
            flush_once(rt, "w1")  # creates the table, writes 200
            hbase.clear_calls()
            flush_once(rt, "w1")
            assert hbase.calls.count("mutateRows") == 1
            [call] = [c for c in hbase.requests if c.method == "mutateRows"]
            assert len(call.args["rowBatches"]) == 150  # the last 50 pages and their two index rows each
            assert rt.stats.read("c1")["stored"] == 250
        finally:
            rt.close()


def test_an_entry_delivered_twice_to_a_dead_store_leaves_one_dead_letter(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store's directory should be")
    rt = queue_rt(str(blocker / "pages.db"), store_max_retries=0)
    try:
        finish_pages(rt, 2, body="page text " * 2000)
        twice = rt.redis.lrange(rt.keys.store_pending(), 0, -1)
        rt.redis.rpush(rt.keys.store_pending(), *twice)
        assert flush_once(rt, "w1") == 4
        letters = dead_letters(rt, "c1")
        assert sorted(e["record"]["url"] for e in letters) == \
            ["http://site.test/c1/0", "http://site.test/c1/1"]
        assert all(e["record"]["body"] == "page text " * 2000 for e in letters)
        kept = rt.redis.lrange(rt.keys.dead_letters(), 0, -1)
        assert all(raw[:1] != b"{" and len(raw) < 4096 for raw in kept)  # 20 KB letters, compressed
        assert rt.stats.read("c1")["store/dead_letters"] == 2 and rt.crawls.outstanding("c1") == 0
    finally:
        rt.close()


def kept_in_redis(rt: Runtime) -> bytes:
    """Every key of ``rt``'s prefix with its values, whatever their type, as one blob."""
    read = {b"string": lambda k: [rt.redis.get(k)], b"hash": lambda k: sum(rt.redis.hgetall(k).items(), ()),
            b"list": lambda k: rt.redis.lrange(k, 0, -1), b"set": rt.redis.smembers,
            b"zset": lambda k: rt.redis.zrange(k, 0, -1)}
    blob = []
    for key in rt.redis.scan_iter(f"{rt.settings.key_prefix}:*", count=1000):
        blob += [key, *read.get(rt.redis.type(key), lambda k: [])(key)]
    return b"\n".join(_plain(v) for v in blob if isinstance(v, bytes))


def _plain(value: bytes) -> bytes:
    """``value`` decompressed when it is a compressed entry or letter."""
    try:
        return codec.unpack(value)
    except codec.DAMAGED:
        return value


def test_redis_holds_the_store_masked_and_the_worker_writes_with_its_password():
    secret = f"pw{token()}"
    with ESServer(username="crawler", password=secret) as es:
        uri = f"elasticsearch://crawler:{secret}@{es.url.split('://', 1)[1]}/pages"
        shown = f"elasticsearch://crawler:***@{es.url.split('://', 1)[1]}/pages"
        rt = queue_rt(uri)  # this worker is configured with the store, password included
        try:
            rt.crawls.register("c1", store=uri)
            finish_pages(rt, 3)
            assert rt.redis.hget(rt.keys.crawl("c1"), "store") == shown.encode()
            assert {StoreEntry.decode(raw).store for raw in rt.redis.lrange(rt.keys.store_pending(), 0, -1)} \
                == {shown}
            assert secret.encode() not in kept_in_redis(rt)
            assert flush_once(rt, "w1") == 3
            assert len(es.documents("pages")) == rt.stats.read("c1")["stored"] == 3
        finally:
            rt.close()


def test_a_masked_store_this_worker_was_not_configured_with_keeps_its_records_as_dead_letters(tmp_path):
    secret = f"pw{token()}"
    rt = queue_rt(str(tmp_path / "pages.db"))  # configured with another store only
    try:
        rt.crawls.register("c1", store=f"elasticsearch://crawler:{secret}@127.0.0.1:9/pages")
        finish_pages(rt, 2)
        assert flush_once(rt, "w1") == 2
        letters = dead_letters(rt, "c1")
        assert len(letters) == 2 and {e["kind"] for e in letters} == {"failed"}
        assert {e["error"] for e in letters} == {
            "store elasticsearch://crawler:***@127.0.0.1:9/pages is not configured here: its "
            "password is masked in Redis, so CRAWLER_STORE must name it"}
        stats = rt.stats.read("c1")
        assert stats["store/dead_letters"] == 2 and stats["errors/StoreNotConfigured"] == 2
        assert rt.crawls.outstanding("c1") == 0
        assert secret.encode() not in kept_in_redis(rt)
    finally:
        rt.close()


def test_a_record_the_backend_refuses_is_one_dead_letter_with_the_reason_even_when_written_twice():
    with ESServer() as es:
        Elasticsearch(es.url).indices.create(index="strict", mappings={
            "properties": {"url": {"type": "integer"}}})  # every page's URL is refused
        rt = queue_rt(f"elasticsearch://{es.url.split('://', 1)[1]}/strict")
        try:
            finish_pages(rt, 2)
            twice = rt.redis.lrange(rt.keys.store_pending(), 0, -1)
            rt.redis.rpush(rt.keys.store_pending(), *twice)  # the same entries delivered again
            taken = rt.store_queue.take("w1", 10, 0, 30, now=True)
            assert len(taken) == 4
            write_batch(rt, "w1", taken)
            write_batch(rt, "w2", taken)  # the batch of a worker thought dead, written again
            letters = dead_letters(rt, "c1")
            assert sorted(e["record"]["url"] for e in letters) == ["http://site.test/c1/0",
                                                                   "http://site.test/c1/1"]
            assert {e["kind"] for e in letters} == {"refused"}
            assert all(e["error"].startswith("document_parsing_exception: ")
                       and "failed to parse field [url] of type [integer]" in e["error"] for e in letters)
            stats = rt.stats.read("c1")
            assert (stats["store/refused"], stats["store/dead_letters"]) == (2, 2)
            assert "stored" not in stats and "store/retries" not in stats
            assert rt.crawls.outstanding("c1") == 0
            assert rt.crawls.errors("c1", 1)[0].startswith("store refused: document_parsing_exception")
        finally:
            rt.close()
