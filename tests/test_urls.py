"""URL validation, canonical form and fingerprints."""

from __future__ import annotations

import pytest

from crawler_tasks.errors import InvalidURL, UnsupportedScheme
from crawler_tasks.models import CrawlRequest
from crawler_tasks.urls import canonicalize_url, domain_allowed, fingerprint, validate_url


@pytest.mark.parametrize("a,b", [
    ("HTTP://Example.COM:80/a?b=2&a=1#x", "http://example.com/a?a=1&b=2"),
    ("https://example.com:443/%7euser", "https://example.com/~user"),
    ("http://example.com/a%2fb?q=%e2%82%ac", "http://example.com/a%2Fb?q=%E2%82%AC"),
    ("http://example.com/café", "http://example.com/caf%C3%A9"),
])
def test_equivalent_urls_have_one_canonical_form(a, b):
    assert canonicalize_url(a) == canonicalize_url(b)
    assert fingerprint(a) == fingerprint(b)


def test_fingerprint_depends_on_method_and_port():
    assert fingerprint("http://a.test/") != fingerprint("http://a.test/", "HEAD")
    assert fingerprint("http://a.test/") != fingerprint("http://a.test:8080/")


@pytest.mark.parametrize("url,error", [
    ("ftp://a.test/x", UnsupportedScheme), ("mailto:a@b.c", UnsupportedScheme),
    ("javascript:alert(1)", UnsupportedScheme), ("a.test/no-scheme", UnsupportedScheme),
    ("http://", InvalidURL), ("http://a.test:99999/", InvalidURL), ("http://a b/", InvalidURL),
    ("", InvalidURL),
])
def test_invalid_urls_are_rejected_with_a_named_error(url, error):
    with pytest.raises(error):
        validate_url(url)


def test_request_rejects_bad_method_and_keeps_the_seed_format():
    from crawler_tasks.errors import BadInput

    with pytest.raises(BadInput, match="method"):
        CrawlRequest(url="http://a.test/", method="POST")
    req = CrawlRequest.from_seed({"url": "http://a.test/#x", "method": "HEAD", "_encoding": "utf-8",
                                  "meta": {"url_id": "7", "NotExtract": True}})
    assert (req.url, req.method, req.extract_links) == ("http://a.test/", "HEAD", False)
    assert CrawlRequest.from_dict(req.to_dict()) == req


def test_subdomains_of_allowed_domains_are_allowed():
    domains = frozenset({"example.com"})
    assert domain_allowed("http://www.example.com/", domains)
    assert not domain_allowed("http://badexample.com/", domains)
