"""Claim checks: bodies wait in Redis; an expired one means a refetch, not a lost page."""

from __future__ import annotations

import threading
import time

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import wait_drained
from crawler_tasks.core import routing
from crawler_tasks.core.memory import LARGE_BODY, LargeBodies
from crawler_tasks.core.models import CrawlRequest, PageRecord
from crawler_tasks.stages import enqueue
from tests.helpers import token
from tests.stored_bytes import CLAIM_PLAIN, CLAIM_ZLIB, LARGE, SMALL


def test_claim_round_trip_compresses_the_body(rt):
    claim_id = f"c{token()}"
    record = PageRecord(url="http://a.test/", fingerprint="f", crawl_id="c", depth=0, fetched_at="x")
    body = b"<p>" + b"hello " * 10000 + b"</p>"
    with rt.redis.pipeline(transaction=False) as pipe:
        rt.claims.put(pipe, "c", claim_id, record, body)
        pipe.execute()
    assert rt.redis.memory_usage(rt.keys.page("c", claim_id)) < len(body) / 10
    assert rt.claims.load("c", claim_id, with_body=True) == (record, body)
    assert 0 < rt.redis.ttl(rt.keys.page("c", claim_id)) <= rt.settings.claim_ttl
    rt.claims.delete("c", claim_id)


def test_claims_earlier_code_wrote_read_back(rt):
    """A record kept as plain JSON and one kept compressed, as earlier releases wrote them."""
    for record, raw in ((SMALL, CLAIM_PLAIN), (LARGE, CLAIM_ZLIB)):
        claim_id = f"c{token()}"
        rt.redis.hset(rt.keys.page("c1", claim_id), mapping={"record": raw})
        assert rt.claims.load("c1", claim_id, with_body=True) == (record, None)
        rt.claims.delete("c1", claim_id)
    claim_id = f"c{token()}"
    rt.claims.write("c1", claim_id, SMALL)
    written = rt.redis.hget(rt.keys.page("c1", claim_id), "record")
    assert written.startswith(CLAIM_PLAIN[:-1])  # the same JSON, the fields records gained since at the end
    assert rt.claims.load("c1", claim_id, with_body=True) == (SMALL, None)
    rt.claims.delete("c1", claim_id)


def test_a_large_claimed_body_is_decompressed_only_once_it_has_a_large_body_slot(rt):
    claim_id = f"c{token()}"
    body = b"<p>" + b"x" * LARGE_BODY + b"</p>"
    record = PageRecord(url="http://a.test/", fingerprint="f", crawl_id="c", depth=0, fetched_at="x",
                        size=len(body))
    rt.claims.write("c", claim_id, record, body)
    bodies = LargeBodies(1)
    holder, permit = bodies.permit(), bodies.permit()
    holder.take()  # the process's only slot is held elsewhere
    got: list = []
    loading = threading.Thread(target=lambda: got.append(
        rt.claims.load("c", claim_id, with_body=True, permit=permit)), daemon=True)
    loading.start()
    time.sleep(0.3)
    assert loading.is_alive() and not got
    holder.release()
    loading.join(timeout=5)
    assert got == [(record, body)] and permit.held
    small = bodies.permit()  # a small body needs no slot
    rt.claims.write("c", claim_id, PageRecord(**{**record.to_dict(), "size": 3}), b"<p>")
    assert rt.claims.load("c", claim_id, with_body=True, permit=small)[1] == b"<p>" and not small.held
    rt.claims.delete("c", claim_id)


def send_parse_without_claim(rt, req: CrawlRequest, *, tracked: bool) -> None:
    claim_id = f"gone{token()}"
    if tracked:
        rt.redis.sadd(rt.keys.outstanding(req.crawl_id),
                      enqueue.stage_task_id(claim_id, routing.PARSE_TASK))
    enqueue.publish_stage(rt, routing.PARSE_TASK, claim_id, req)


def test_expired_claim_is_fetched_again(rt, worker, site, tmp_path):
    store = str(tmp_path / "pages.db")
    crawl_id, t = f"claim{token()}", token()
    rt.crawls.register(crawl_id, domains=["127.0.0.1"], store=store)
    req = CrawlRequest(url=f"{site.url}/page/{t}", crawl_id=crawl_id)
    send_parse_without_claim(rt, req, tracked=True)
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=30)
    [record] = open_store(store).records(crawl_id)
    assert record.url == req.url and record.title == f"Page {t}"
    assert rt.stats.read(crawl_id)["claim/missing"] == 1


def test_late_redelivery_of_a_finished_step_does_nothing(rt, worker, site):
    crawl_id, t = f"claim{token()}", token()
    rt.crawls.register(crawl_id, domains=["127.0.0.1"])
    send_parse_without_claim(rt, CrawlRequest(url=f"{site.url}/page/{t}", crawl_id=crawl_id),
                             tracked=False)
    marker = f"{site.url}/page/{t}-marker"
    send_parse_without_claim(rt, CrawlRequest(url=marker, crawl_id=crawl_id), tracked=True)
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=30)
    assert site.paths(f"/page/{t}") == [f"/page/{t}-marker"]
