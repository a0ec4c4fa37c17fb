"""The store stage: idempotent records, and a dead backend delays pages but drops none."""

from __future__ import annotations

from elasticsearch import Elasticsearch

from crawler_tasks.backends import open_store
from crawler_tasks.local import wait_drained
from crawler_tasks.seed import build_requests, submit_requests
from crawler_tasks.store import flush_stats

from .conftest import token
from .es_server import ESServer
from .hbase_server import HBaseServer


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
        assert {fp: d["body"] for fp, d in docs.items()} == {r.fingerprint: r.body for r in local.values()}
        in_hbase = {r.url: r for r in open_store(hbase_uri).records(crawl_id)}
        assert in_hbase == local
        assert rt.stats.read(crawl_id)["stored"] == 3

        # Beat's statistics flush writes one document per crawl, in place.
        assert flush_stats(rt, [crawl_id]) == 1
        assert flush_stats(rt, [crawl_id]) == 0  # nothing changed since
        [stats] = [d for d in es.documents("pages-stats").values() if d["crawl_id"] == crawl_id]
        assert stats["total_num"] == 3 and stats["status"]["200"] == 3


def test_a_record_a_backend_refuses_for_good_is_counted_not_retried(rt, worker, site):
    with ESServer() as es:
        host = es.url.split("://", 1)[1]
        # An index made by someone else, where `title` must be a number: the page is refused.
        Elasticsearch(es.url).indices.create(index="strict", mappings={
            "properties": {"title": {"type": "integer"}}})
        crawl_id = _crawl_into(rt, worker, f"elasticsearch://{host}/strict", [f"{site.url}/page/{token()}"])
        stats = rt.stats.read(crawl_id)
        assert stats.get("store/refused") == 1 and "stored" not in stats and "store/retries" not in stats


def test_store_body_off_keeps_metadata_only(rt, site, tmp_path):
    from crawler_tasks.crawls import Limits
    from crawler_tasks.download import Download
    from crawler_tasks.models import CrawlRequest
    from crawler_tasks.policy import decide

    req = CrawlRequest(url=f"{site.url}/data.json")
    dl = Download(url=req.url, status=200, headers={"content-type": "application/json; charset=utf-8"},
                  body='{"a": "é"}'.encode(), truncated=False, request_size=1, response_size=1)
    limits = Limits(domains=frozenset(), max_depth=0, max_pages=0, store="x")
    assert decide(req, dl, rt.settings, limits).record.body == '{"a": "é"}'
    assert decide(req, dl, rt.settings.replace(store_body=False), limits).record.body is None
