"""Store URIs as Redis and output hold them (passwords masked), and back to the real ones."""

from __future__ import annotations

import pytest

from crawler_tasks.core.errors import BadInput, StoreNotConfigured
from crawler_tasks.core.store_uris import StoreResolver, hides_password, masked, sqlite_path

ES = "elasticsearch://crawler:hunter2@es.internal:9200/pages"
ES_SHOWN = "elasticsearch://crawler:***@es.internal:9200/pages"


@pytest.mark.parametrize(("uri", "shown"), [
    (ES, ES_SHOWN),
    ("elasticsearchs://u:p%2Fw@[::1]/x?ca_certs=/ca.pem", "elasticsearchs://u:***@[::1]/x?ca_certs=/ca.pem"),
    ("elasticsearch://u:hun/ter@2@h/pages", "elasticsearch://u:***@h/pages"),  # not percent-encoded
    (f"/data/pages.db,{ES},warc:///archive", f"/data/pages.db,{ES_SHOWN},warc:///archive"),
    ("/data/pages.db", "/data/pages.db"),
    ("sqlite:///data/pages.db", "sqlite:///data/pages.db"),
    ("elasticsearch://es.internal:9200/pages", "elasticsearch://es.internal:9200/pages"),
    ("hbase://h:9090/pages?transport=framed", "hbase://h:9090/pages?transport=framed"),
])
def test_masked_hides_every_password_of_a_list_and_leaves_the_rest(uri, shown):
    assert masked(uri) == shown
    assert masked(shown) == shown  # masking twice changes nothing


def test_only_a_masked_password_counts_as_hidden():
    assert hides_password(ES_SHOWN)
    assert not hides_password(ES)  # still holds its password
    assert not hides_password("elasticsearch://es.internal/pages")
    assert not hides_password("/data/a@b.db")


def test_a_masked_uri_resolves_to_the_configured_one_with_its_password():
    resolver = StoreResolver([f"/data/pages.db,{ES}", "warc:///archive"])
    assert resolver.resolve(ES_SHOWN) == ES
    assert resolver.resolve(f"/data/pages.db,{ES_SHOWN}") == f"/data/pages.db,{ES}"
    assert resolver.resolve("warc:///archive") == "warc:///archive"


def test_a_uri_without_a_password_is_its_own_and_needs_no_configuring():
    resolver = StoreResolver(["/data/pages.db"])
    assert resolver.resolve("/tmp/other.db") == "/tmp/other.db"
    assert resolver.resolve("elasticsearch://es.internal/other") == "elasticsearch://es.internal/other"
    assert resolver.resolve(ES) == ES  # an entry of an earlier release, password and all


def test_a_masked_uri_nobody_configured_is_a_clear_error_without_the_password():
    resolver = StoreResolver(["elasticsearch://crawler:other@es.internal:9200/elsewhere"])
    with pytest.raises(StoreNotConfigured) as err:
        resolver.resolve(f"/data/pages.db,{ES_SHOWN}")
    assert isinstance(err.value, BadInput)
    assert str(err.value).startswith(f"store {ES_SHOWN} is not configured here")
    assert "CRAWLER_STORE" in str(err.value) and "hunter2" not in str(err.value)


def test_the_file_of_an_embedded_sqlite_store():
    assert sqlite_path("./crawl-data/pages.db") == "./crawl-data/pages.db"
    assert sqlite_path("sqlite:///var/lib/x.db") == "/var/lib/x.db"
    assert sqlite_path("elasticsearch://h:9200/pages") is None
