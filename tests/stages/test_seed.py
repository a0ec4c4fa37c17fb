"""Building seeds: the line format the feeds and ``crawler-tasks submit --file`` share.

The start-URL key, seed-file and sitemap feeds are tested in test_feeds.py.
"""

from __future__ import annotations

import pytest

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import wait_drained
from crawler_tasks.core.addresses import AddressPolicy
from crawler_tasks.core.errors import BadInput, BlockedSeed
from crawler_tasks.stages.seed import build_requests, parse_seed_line, refuse_blocked
from tests.helpers import token


def test_a_seed_line_is_a_url_or_a_json_seed_object():
    assert parse_seed_line("https://a.test/x") == "https://a.test/x"
    assert parse_seed_line('{"url": "https://a.test/", "meta": {"url_id": "1"}}') == {
        "url": "https://a.test/", "meta": {"url_id": "1"}}
    for bad in ('{"url": ', "{1, 2}", '{"a": 1} trailing'):
        with pytest.raises(BadInput, match="not a JSON seed object"):
            parse_seed_line(bad)


def test_an_upstream_seed_keeps_its_meta_and_may_name_its_own_crawl():
    upstream = {"url": "https://a.test/p", "method": "head", "_encoding": "gbk",
                "meta": {"url_id": "42", "NotExtract": True, "site": "a"}}
    own = {"url": "https://a.test/q", "crawl_id": "news"}
    first, second, third = build_requests([upstream, own, "https://a.test/r"], crawl_id="feeds")
    assert (first.method, first.meta, first.crawl_id) == ("HEAD", upstream["meta"], "feeds")
    assert not first.extract_links
    assert second.crawl_id == "news" and third.crawl_id == "feeds"


def test_a_seed_naming_a_refused_address_refuses_the_whole_submission():
    requests = build_requests(["https://a.test/", {"url": "http://169.254.169.254/latest/meta-data/",
                                                   "headers": {"Metadata-Flavor": "Google"}}])
    with pytest.raises(BlockedSeed) as info:
        refuse_blocked(requests, AddressPolicy())
    assert str(info.value) == ("seed http://169.254.169.254/latest/meta-data/ refused: 169.254.169.254 is a "
                               "cloud-metadata address (only CRAWLER_PRIVATE_ALLOWLIST naming it exactly "
                               "allows it)")
    # A host name is left to the worker, which judges what it resolves to.
    refuse_blocked(build_requests(["http://metadata.google.internal/"]), AddressPolicy())
    refuse_blocked(build_requests(["http://10.0.0.1/"]), AddressPolicy(allowlist=("10.0.0.0/8",)))


def test_seeds_of_a_call_killed_between_the_gate_and_the_broker_are_published_again(rt, worker, site, monkeypatch):
    from crawler_tasks.core.timing import now_iso
    from crawler_tasks.stages import enqueue
    from crawler_tasks.state import unpublished
    from crawler_tasks.state.gate import Candidate, new_task_ids

    crawl_id = f"died-{token()}"
    urls = [f"{site.url}/page/{token()}-{i}" for i in range(3)]
    reqs = build_requests(urls, crawl_id=crawl_id)
    rt.crawls.register(crawl_id, domains={"127.0.0.1"})
    # What a seed call does up to the broker; then its process dies.
    candidates = [Candidate(r.fingerprint, tid) for r, tid in zip(reqs, new_task_ids(len(reqs)))]
    rt.seed_calls.begin(crawl_id, [(c.task_id, r) for c, r in zip(candidates, reqs)])
    assert rt.gate.admit(crawl_id, candidates) == [c.task_id for c in candidates]
    rt.crawls.running(crawl_id, now_iso())
    assert enqueue.recover_seed_calls(rt) == 0  # not yet: the call may still be running
    monkeypatch.setattr(unpublished, "STALE_S", 0.0)
    assert enqueue.recover_seed_calls(rt) == 3
    assert enqueue.recover_seed_calls(rt) == 0  # taken once
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=30, workers=worker)
    assert sorted(r.url for r in open_store(rt.settings.store).records(crawl_id)) == sorted(urls)


def test_a_misspelt_option_is_refused_as_a_misspelt_keyword_is():
    with pytest.raises(TypeError, match="unexpected keyword argument 'prioirty'"):
        build_requests(["http://a.test/"], prioirty=1)  # type: ignore[call-arg]
    from crawler_tasks.stages.seed import check_options

    check_options({"priority": 1, "on_done": "app.done", "plugins": ["shop"]})
    with pytest.raises(TypeError, match="'store'"):
        check_options({"store": "./x.db"})
