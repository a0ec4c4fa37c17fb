#!/usr/bin/env python3
"""bench/store_batch: records/s into each backend, in batches against one request per record.

For SQLite, Elasticsearch (the HTTP test server of tests/fakes/es_server.py, spoken
to by elasticsearch-py), HBase (the Thrift test server of
tests/fakes/hbase_server.py, spoken to by happybase) and Kafka (librdkafka's mock
cluster of tests/fakes/kafka_mock.py, spoken to by confluent-kafka: a transaction per
batch), N records of a crawled-page size (a 15 KB body) go through:

* ``upsert``: the backend alone, ``store.upsert`` of --batch records at a time,
  against ``store.upsert`` of one record at a time;
* ``queue``: the whole store stage, as a crawl runs it: each record joins the
  store queue in Redis as a finished task does (``enqueue.complete``), then a
  flusher takes, writes and settles batches until the queue is empty; with
  ``CRAWLER_STORE_BATCH=--batch`` against ``CRAWLER_STORE_BATCH=1``.

Redis is a private redis-server on a free port. The test servers run in this
process (threads), so absolute figures are the test servers' as much as the
client's: the ratio between the two columns is the figure to read.

    bench/store_batch                    # 2,000 records, batches of 200
    bench/store_batch --records 5000 --backends es,hbase,kafka
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ROOT, ensure_project_python  # noqa: E402

ensure_project_python("bench/store_batch", "redis")
sys.path.insert(0, str(ROOT))  # tests.fakes, and crawler_tasks from this checkout first

from servers import private_redis  # noqa: E402

from crawler_tasks.backends import open_store  # noqa: E402
from crawler_tasks.core.models import PageRecord  # noqa: E402
from crawler_tasks.core.settings import Settings  # noqa: E402
from crawler_tasks.service.celery_app import create_app  # noqa: E402
from crawler_tasks.stages import enqueue  # noqa: E402
from crawler_tasks.stages.dispatcher import flush_once  # noqa: E402
from crawler_tasks.stages.runtime import Runtime  # noqa: E402
from crawler_tasks.stages.seed import build_requests  # noqa: E402
from crawler_tasks.state.gate import Candidate  # noqa: E402
from tests.fakes.es_server import ESServer  # noqa: E402
from tests.fakes.hbase_server import HBaseServer  # noqa: E402
from tests.fakes.kafka_mock import MockKafka  # noqa: E402

BODY = ("<p>" + "crawled text " * 40 + "</p>\n") * 28  # about 15 KB


#: Items per record (``--items``): what a rule yielded on each page, typed as a class's.
ITEMS = 0


def records(n: int, crawl_id: str) -> list[PageRecord]:
    out = [PageRecord(url=f"http://site.test/{crawl_id}/p/{i}", fingerprint=f"{crawl_id}-{i:08d}",
                      crawl_id=crawl_id, depth=1, fetched_at="2026-11-22T08:00:00+00:00", status=200,
                      headers={"content-type": "text/html"}, content_type="text/html",
                      title=f"Page {i}", text="crawled text " * 40, body=BODY,
                      links=[f"http://site.test/p/{i + k}" for k in range(20)], size=len(BODY))
           for i in range(n)]
    for r in out if ITEMS else ():
        r.items = [{"heading": f"Page {r.url}", "lead": "crawled text " * 8, "facts": k} for k in range(ITEMS)]
        r.item_types = ["Fact"] * ITEMS
    return out


def time_upserts(uri: str, settings: Settings, n: int, batch: int, tag: str) -> float:
    """Records/s of ``store.upsert`` in slices of ``batch``."""
    store = open_store(uri, settings)
    recs = records(n, tag)
    store.upsert(recs[:1])  # creates the index / table outside the timing
    start = time.perf_counter()
    for i in range(0, n, batch):
        store.upsert(recs[i:i + batch])
    elapsed = time.perf_counter() - start
    store.close()
    return n / elapsed


def time_queue(uri: str, redis_url: str, n: int, batch: int, tag: str) -> float:
    """Records/s through the store stage: queued as tasks finish, flushed in batches."""
    settings = Settings.from_env(broker_url=redis_url, redis_url=redis_url, store=uri,
                                 key_prefix=f"b{tag}", store_batch=batch)
    rt = Runtime(settings, create_app(settings))
    rt.store(uri).upsert(records(1, f"warm{tag}"))
    crawl_id = f"q{tag}"
    reqs = build_requests([r.url for r in records(n, crawl_id)], crawl_id=crawl_id)
    ids = rt.gate.admit(crawl_id, [Candidate(r.fingerprint, f"t{i}") for i, r in enumerate(reqs)])
    recs = records(n, crawl_id)
    start = time.perf_counter()
    for req, task_id, record in zip(reqs, ids, recs):
        enqueue.complete(rt, req, task_id, enqueue.TaskEnd(record=record))
    while flush_once(rt, "bench"):
        pass
    elapsed = time.perf_counter() - start
    stored = int(rt.stats.read(crawl_id).get("stored", 0))
    rt.close()
    if stored != n:
        raise SystemExit(f"bench/store_batch: {stored} of {n} records stored through {uri}")
    return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--backends", default="sqlite,es,hbase,kafka")
    parser.add_argument("--items", type=int, default=0, help="items per record (default 0)")
    args = parser.parse_args()
    global ITEMS
    ITEMS = args.items
    with private_redis("store", binary="redis-server") as server:
        write_through_each(args, server.url)


def write_through_each(args: argparse.Namespace, redis_url: str) -> None:
    tmp = tempfile.mkdtemp(prefix="bench-store-db-")
    es, hbase, kafka = ESServer().start(), HBaseServer(record_args=False).start(), MockKafka()
    uris = {"sqlite": f"sqlite:///{tmp}/pages.db",
            "es": f"elasticsearch://127.0.0.1:{es.port}/pages",
            "hbase": f"hbase://{hbase.host}:{hbase.port}/pages",
            "kafka": f"kafka://{kafka.bootstrap}/pages"}
    names = {"sqlite": "SQLite (embedded)", "es": "Elasticsearch (HTTP test server)",
             "hbase": "HBase (Thrift test server)", "kafka": "Kafka (librdkafka mock cluster)"}
    n, b = args.records, args.batch
    items = f", {args.items} items each" if args.items else ""
    print(f"### Store writes: {n:,} records of ~{len(BODY) // 1000} KB body{items}, batches of {b}\n")
    print(f"| Backend | upsert ×{b} (rec/s) | upsert ×1 (rec/s) | ratio | "
          f"store queue, batch {b} (rec/s) | store queue, batch 1 (rec/s) | ratio |")
    print("|---|---|---|---|---|---|---|")
    try:
        for key in args.backends.split(","):
            uri = uris[key]
            settings = Settings.from_env(store=uri, broker_url=redis_url, redis_url=redis_url)
            up_b = time_upserts(uri, settings, n, b, f"{key}u{b}")
            up_1 = time_upserts(uri, settings, n, 1, f"{key}u1")
            q_b = time_queue(uri, redis_url, n, b, f"{key}{b}")
            q_1 = time_queue(uri, redis_url, n, 1, f"{key}1")
            print(f"| {names[key]} | {up_b:,.0f} | {up_1:,.0f} | {up_b / up_1:.1f}× | "
                  f"{q_b:,.0f} | {q_1:,.0f} | {q_b / q_1:.1f}× |", flush=True)
    finally:
        es.stop()
        hbase.stop()
        kafka.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
