"""A request for a followed link, built on its parent's checked fields (no I/O)."""

from __future__ import annotations

import pytest

from crawler_tasks.core.errors import InvalidURL
from crawler_tasks.core.models import CrawlRequest

LINKS = ["http://a.test/x", "http://A.test:80/p?q=1#frag", "https://a.test/ü?x=ä", "http://a.test/" + "y" * 3000,
         "http://[::1]:8080/p", "http://a.test/\x00"]


@pytest.mark.parametrize("link", LINKS)
def test_a_followed_link_is_the_request_the_constructor_builds(link):
    parent = CrawlRequest("http://a.test/", depth=2, crawl_id="c-1", meta={"seed": "s", "max_retry_times": 1},
                          notify={"on_page": "app.page", "follow": True}, priority=3, headers={"X": "y"})
    meta, notify = {"seed": "s", "max_retry_times": 1}, parent.notify
    fast = parent.followed(link, meta=meta, notify=notify)
    slow = CrawlRequest(url=link, depth=3, crawl_id="c-1", meta=meta, notify=notify)
    assert fast == slow and fast.to_dict() == slow.to_dict() and fast.fingerprint == slow.fingerprint
    assert fast.headers == {} and fast.headers is not parent.headers and fast.priority == 0
    assert fast.replace(priority=2).priority == 2  # a real request: replace() checks it as usual


@pytest.mark.parametrize("link", ["javascript:void(0)", "http://", "ftp://a.test/f", "http://a.test/a b"])
def test_a_link_that_is_no_url_is_refused_as_by_the_constructor(link):
    parent = CrawlRequest("http://a.test/")
    with pytest.raises(InvalidURL):
        CrawlRequest(url=link)
    with pytest.raises(InvalidURL):
        parent.followed(link, meta={}, notify=None)
