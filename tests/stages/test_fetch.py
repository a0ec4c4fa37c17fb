"""Fetching through real workers: redirects, retries, failures, size and time limits."""

from __future__ import annotations

from tests.helpers import by_url, token


def test_redirect_chain_is_followed_and_each_hop_stored(crawl, site, rt):
    t = token()
    records = by_url(crawl(f"{site.url}/redirect/{t}/3"))
    hops = [f"{site.url}/redirect/{t}/{n}" for n in (3, 2, 1, 0)]
    assert set(records) == set(hops)
    for here, there in zip(hops, hops[1:]):
        assert records[here].status in (301, 302, 307, 308)
        assert records[here].redirect_to == there
    assert records[hops[-1]].status == 200
    assert records[hops[-1]].title == "Redirect target"
    assert rt.stats.read(crawl.crawl_id)["redirects"] == 3


def test_redirect_loop_terminates(crawl, site):
    t = token()
    records = by_url(crawl(f"{site.url}/loop/{t}/a"))
    assert set(records) == {f"{site.url}/loop/{t}/a", f"{site.url}/loop/{t}/b"}
    assert site.counts[f"/loop/{t}/a"] == 1


def test_page_failing_twice_with_503_is_retried_then_stored(crawl, site, rt):
    t = token()
    [record] = crawl(f"{site.url}/flaky/{t}")
    assert record.status == 200 and record.title == "Recovered" and record.description is None
    assert site.counts[f"/flaky/{t}"] == 3
    assert rt.stats.read(crawl.crawl_id)["retries"] == 2


def test_permanent_500_becomes_a_failure_record_after_three_attempts(crawl, site, rt):
    t = token()
    [record] = crawl(f"{site.url}/broken/{t}")
    assert record.status == 500
    assert record.description == "HTTP 500 after 3 attempts"
    assert site.counts[f"/broken/{t}"] == 3
    assert rt.stats.read(crawl.crawl_id)["failures"] == 1


def test_404_is_stored_once_without_retry(crawl, site):
    t = token()
    [record] = crawl(f"{site.url}/nowhere/{t}")
    assert record.status == 404 and record.description is None
    assert site.counts[f"/nowhere/{t}"] == 1


def test_page_slower_than_timeout_fails_with_reason(crawl, site):
    t = token()
    [record] = crawl(f"{site.url}/slow/{t}")
    assert record.status is None
    assert record.description == "timeout after 1.0s (3 attempts)"


def test_connection_refused_is_described(crawl):
    from crawler_tasks.cli.local import free_port

    [record] = crawl(f"http://127.0.0.1:{free_port()}/x")
    assert record.status is None
    assert record.description == "connection refused (3 attempts)"


def test_retry_after_is_honoured(crawl, site):
    t = token()
    [record] = crawl(f"{site.url}/throttled/{t}")
    assert record.status == 200
    first, second = site.times(f"/throttled/{t}")
    assert second - first >= 1.0


def test_huge_page_is_truncated_at_maxsize(crawl, site, settings):
    t = token()
    [record] = crawl(f"{site.url}/huge/{t}")
    assert record.status == 200
    assert record.truncated is True
    assert record.size == settings.download_maxsize


def test_head_seed_is_fetched_with_head(crawl, site):
    t = token()
    [record] = crawl({"url": f"{site.url}/page/{t}", "method": "HEAD"})
    assert record.method == "HEAD" and record.status == 200 and record.title is None


def test_redirect_hops_are_capped(crawl, site, settings):
    t = token()
    records = crawl(f"{site.url}/redirect/{t}/25")
    assert len(records) == settings.redirect_max_times + 1
    [last] = [r for r in records if r.description]
    assert last.description == f"redirect not followed: redirect hops exceeded ({settings.redirect_max_times})"
    assert not site.paths(f"/redirect/{t}/4")


def test_split_pipeline_parses_on_its_own_prefork_node(site, tmp_path):
    """The split layout of docs/deployment.md: fetch and store on a threads node, parse on a prefork node."""
    from crawler_tasks.backends import open_store
    from crawler_tasks.cli.local import Workers, wait_drained
    from crawler_tasks.core.routing import FETCH_QUEUE, PARSE_QUEUE, SEED_QUEUE, STORE_QUEUE
    from crawler_tasks.core.settings import Settings
    from crawler_tasks.service.celery_app import create_app
    from crawler_tasks.stages.runtime import Runtime
    from crawler_tasks.stages.seed import build_requests, submit_requests
    from tests.helpers import REDIS, flush

    flush(6)
    settings = Settings.from_env(broker_url=f"{REDIS}/6", redis_url=f"{REDIS}/6", pipeline="split",
                                 key_prefix=f"split{token()}", store=str(tmp_path / "pages.db"))
    rt = Runtime(settings, create_app(settings))
    t, pages = token(), 20
    submit_requests(rt, build_requests(f"{site.url}/tree/{t}/0?size={pages}", crawl_id="split"))
    fetchers = Workers(settings, name=f"fetch{t}@%h", pool="threads", concurrency=8,
                       queues=(STORE_QUEUE, SEED_QUEUE, FETCH_QUEUE),
                       log_path=str(tmp_path / "fetch.log")).start()
    parsers = Workers(settings, name=f"parse{t}@%h", pool="prefork", concurrency=2,
                      queues=(PARSE_QUEUE,), log_path=str(tmp_path / "parse.log")).start()
    try:
        wait_drained(lambda: rt.crawls.outstanding("split") == 0, timeout=60, workers=fetchers)
    finally:
        fetchers.stop()
        parsers.stop()
    records = list(open_store(settings.store).records("split"))
    assert len(records) == len({r.url for r in records}) == pages
    assert all(r.title and r.title.startswith("Tree ") for r in records)
    assert rt.stats.read("split")["stored"] == pages
    assert not rt.redis.keys(f"{settings.key_prefix}:*page:*")  # claim checks dropped


def test_a_deferred_fetch_comes_back_under_its_id_without_using_a_retry(rt, worker, site, tmp_path):
    from crawler_tasks.backends import open_store
    from crawler_tasks.cli.local import wait_drained
    from crawler_tasks.core.models import CrawlRequest
    from crawler_tasks.core.policy import Defer
    from crawler_tasks.stages import fetch
    from crawler_tasks.stages.visit import visiting

    crawl_id, t = f"defer{token()}", token()
    store = str(tmp_path / "pages.db")
    rt.crawls.register(crawl_id, domains=["127.0.0.1"], store=store)
    req = CrawlRequest(url=f"{site.url}/page/{t}", crawl_id=crawl_id)
    rt.redis.sadd(rt.keys.outstanding(crawl_id), "deferred-id")
    with visiting(rt, req, "deferred-id") as visit:
        assert fetch.apply(visit, Defer(req, 0.5)) is None
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=30, workers=worker)
    [record] = open_store(store).records(crawl_id)
    assert record.status == 200 and site.paths(f"/page/{t}") == [f"/page/{t}"]
    assert "retries" not in rt.stats.read(crawl_id)
