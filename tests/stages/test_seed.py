"""Building seeds: the line format the feeds and ``crawler-tasks submit --file`` share.

The start-URL key, seed-file and sitemap feeds are tested in test_feeds.py.
"""

from __future__ import annotations

import pytest

from crawler_tasks.core.addresses import AddressPolicy
from crawler_tasks.core.errors import BadInput, BlockedSeed
from crawler_tasks.stages.seed import build_requests, parse_seed_line, refuse_blocked


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
