"""Parsing: encodings, links, robots rules, depth and domain limits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler_tasks.core.limits import Limits
from crawler_tasks.core.memory import LARGE_BODY
from crawler_tasks.core.models import CrawlRequest
from crawler_tasks.stages.parse import follow, parse_html
from crawler_tasks.stages.parse.base import Caps
from tests.fakes.hostile_site import deep_page, links_body
from tests.fakes.site import GBK_TITLE, SJIS_TITLE
from tests.helpers import by_url, token


def parse(body: bytes, ctype: str | None = "text/html", url: str = "http://a.test/dir/page"):
    return parse_html(body, url=url, content_type=ctype, caps=Caps(1000))


def test_links_resolve_against_base_href_and_drop_fragments_and_other_schemes():
    body = (b'<html><head><base href="http://a.test/base/"></head><body>'
            b'<a href="x#f">1</a><a href="/abs">2</a><a href="mailto:a@b">3</a>'
            b'<a href="javascript:go()">4</a><a href="tel:1">5</a><a href="data:,x">6</a>'
            b'<a href="#only">7</a><area href="https://b.test/y"></body></html>')
    links = parse(body).links
    assert links == ["http://a.test/base/x", "http://a.test/abs", "https://b.test/y"]


def test_fragment_only_link_is_dropped():
    assert parse(b'<a href="#top">t</a><a href="other#x">o</a>').links == ["http://a.test/dir/other"]


def test_charset_from_http_header_wins_over_meta():
    body = f'<meta charset="utf-8"><title>{SJIS_TITLE}</title>'.encode("shift_jis")
    assert parse(body, "text/html; charset=Shift_JIS").title == SJIS_TITLE


def test_charset_from_meta_when_header_has_none():
    body = f'<meta http-equiv="Content-Type" content="text/html; charset=gbk"><title>{GBK_TITLE}</title>'
    assert parse(body.encode("gbk"), "text/html").title == GBK_TITLE


def test_charset_detected_when_nothing_declares_it():
    text = "<html><head><title>{}</title></head><body><p>{}</p></body></html>".format(
        GBK_TITLE, "这是一个没有声明编码的中文网页，用于测试编码检测。" * 5)
    assert parse(text.encode("gbk"), None).title == GBK_TITLE


def test_visible_text_skips_scripts_and_styles_and_is_bounded():
    body = b"<body><script>var x=1</script><style>p{}</style><p>Hello   <b>world</b></p>" + b"<p>y</p>" * 2000
    parsed = parse(body)
    assert parsed.text.startswith("Hello world y")
    assert "var x" not in parsed.text and len(parsed.text) == 1000


def test_meta_robots_nofollow_yields_no_links():
    body = b'<meta name="robots" content="noindex, nofollow"><a href="/x">x</a>'
    assert parse(body).links == [] and parse(body).nofollow


def test_x_robots_tag_nofollow_yields_no_links():
    assert parse_html(b'<a href="/x">x</a>', url="http://a.test/", content_type="text/html",
                      caps=Caps(10), robots_header="nofollow").links == []


def test_rel_nofollow_link_is_skipped():
    body = b'<a rel="external nofollow" href="/x">x</a><a href="/y">y</a>'
    assert parse(body).links == ["http://a.test/y"]


def test_malformed_html_still_yields_links():
    body = b'<html><title>T</title><body><div><p><a href="/one">one<table><tr><td><a href=/two>two</td></div>'
    assert parse(body).links == ["http://a.test/one", "http://a.test/two"]


#: Pieces of HTML, well and badly formed, that random pages are made of.
PIECES = [
    "<html>", "</html>", "<head>", "</head>", "<body>", "</body>", "<title>", "</title>",
    "<title> a  b </title>", "<p>", "</p>", "<div>", "</div>", "<script>", "</script>", "<style>",
    "</style>", "<noscript>", "</noscript>", "<template>", "</template>", "<svg>", "</svg>",
    "<!-- c -->", "<?php x ?>", "<br>", "<table>", "<td>", "</table>", "<ul>", "<li>", "<b>", "</b>",
    "<textarea>", "</textarea>", "<iframe>", "</iframe>", "<!DOCTYPE html>", "<?xml version='1.0'?>",
    "<a href='/x'>", "<a href='y#f'>", "<a href='#top'>", "</a>", "<a rel='nofollow' href='/n'>",
    "<area href='/ar'>", "<a href='mailto:x@y'>", "<a href='http://other.example/z'>",
    "<base href='http://o.example/b/'>", "<meta name='robots' content='nofollow'>",
    "<meta name=robots content=index>", " ", "\n", "word", "w&amp;x", "é", "\xa0", "t\u3000u", "\x00",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), max_size=30), st.sampled_from([5, 1000]), st.sampled_from([0, 2]))
def test_a_page_over_1_mib_gives_the_title_text_and_links_it_gives_under_it(pieces, text_max, max_links):
    body = "".join(pieces).encode()
    padded = b" " * LARGE_BODY + body  # blanks before the document: nothing in it changes
    small, large = (parse_html(b, url="http://a.test/dir/page", content_type="text/html; charset=utf-8",
                               caps=Caps(text_max, max_links)) for b in (body, padded))
    assert (large.title, large.text, large.links, large.links_over_cap, large.nofollow) == \
        (small.title, small.text, small.links, small.links_over_cap, small.nofollow)


def test_a_page_over_1_mib_keeps_its_text_and_links_however_deep_it_nests():
    body = deep_page()  # 100,000 nested <div>: a tree stops at 255 levels
    assert len(body) > LARGE_BODY
    parsed = parse(body)
    assert parsed.title == "Deep" and parsed.text == "bottom deep end"
    assert parsed.links == ["http://a.test/deep-end"]


_PEAK = """
import re, sys
from crawler_tasks.stages.parse import parse_html
from crawler_tasks.stages.parse.base import Caps

def peak_kib():  # VmHWM: peak RSS since exec (ru_maxrss carries the parent's over)
    return int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))

body = open(sys.argv[1], "rb").read()
before = peak_kib()
parsed = parse_html(body, url="http://a.test/", content_type="text/html",
                    caps=Caps(65536, max_links=1000))
assert len(parsed.links) == 1000 and parsed.links_over_cap > 400_000
print((peak_kib() - before) // 1024)
"""


def test_parsing_a_10_mib_page_of_links_holds_what_the_caps_keep_not_a_tree(tmp_path):
    page = tmp_path / "links.html"
    page.write_bytes(b"".join(links_body(1_000_000))[:10 * 2**20])  # 400,000 links
    out = subprocess.run([sys.executable, "-c", _PEAK, str(page)], capture_output=True, text=True,
                         cwd=Path(__file__).parents[2], check=True)
    grown_mb = int(out.stdout)
    assert grown_mb < 80  # its text, decoded, is 10 MB; a tree of it took about 290 MB


# -- through the workers -----------------------------------------------------

def test_gbk_and_shift_jis_pages_decode(crawl, site):
    t = token()
    records = by_url(crawl([f"{site.url}/gbk/{t}", f"{site.url}/sjis/{t}"]))
    assert records[f"{site.url}/gbk/{t}"].title == GBK_TITLE
    assert records[f"{site.url}/gbk/{t}"].text == "正文"
    assert records[f"{site.url}/sjis/{t}"].title == SJIS_TITLE


def test_links_differing_in_fragment_or_query_order_are_fetched_once(crawl, site, rt):
    t = token()
    records = crawl(f"{site.url}/dups/{t}")
    targets = [r for r in records if "/target/" in r.url]
    assert len(targets) == 1
    assert len(site.paths(f"/target/{t}")) == 1
    assert rt.stats.read(crawl.crawl_id)["duplicates"] == 1  # 4 hrefs, 2 strings, 1 page


def test_endless_chain_stops_at_max_depth(crawl, site):
    t = token()
    records = crawl(f"{site.url}/chain/{t}/0", max_depth=3)
    assert sorted(r.depth for r in records) == [0, 1, 2, 3]
    assert f"/chain/{t}/4" not in site.paths()


def test_max_pages_caps_what_the_gate_admits(crawl, site):
    t = token()
    records = crawl(f"{site.url}/chain/{t}/0", max_pages=5)
    assert len(records) == 5


def test_nofollow_page_is_stored_but_its_links_are_not_fetched(crawl, site):
    t = token()
    records = by_url(crawl([f"{site.url}/nofollow/{t}", f"{site.url}/relnofollow/{t}"]))
    assert records[f"{site.url}/nofollow/{t}"].title == "No follow"
    assert f"{site.url}/page/{t}-keep" in records
    assert not site.paths(f"/page/{t}-hidden") and not site.paths(f"/page/{t}-skip")
    assert len(records) == 3


def test_non_html_response_is_stored_without_parsing(crawl, site):
    t = token()
    [record] = crawl(f"{site.url}/data/{t}")
    assert record.content_type == "application/json"
    assert record.title is None and record.links == []
    assert not site.paths("/page/never")


def test_not_extract_meta_stores_page_without_link_discovery(crawl, site):
    t = token()
    [record] = crawl({"url": f"{site.url}/chain/{t}/0", "meta": {"NotExtract": True, "url_id": "42"}})
    assert record.title == "Chain 0" and record.meta == {"NotExtract": True, "url_id": "42"}
    assert not site.paths(f"/chain/{t}/1")


def test_links_outside_allowed_domains_are_not_followed(crawl, site):
    t = token()
    records = by_url(crawl(f"{site.url}/external/{t}"))
    assert set(records) == {f"{site.url}/external/{t}", f"{site.url}/page/{t}-inside"}


def test_malformed_page_links_are_followed(crawl, site):
    t = token()
    records = by_url(crawl(f"{site.url}/malformed/{t}"))
    assert f"{site.url}/page/{t}-m1" in records and f"{site.url}/page/{t}-m2" in records


def test_links_over_the_url_length_cap_are_counted_not_kept():
    long_path = "/l/" + "x" * 9000
    body = (f'<a href="{long_path}">1</a><a href="/short">2</a>'
            f'<a href="http://b.test{long_path}">3</a><a href="{long_path}">again</a>').encode()
    parsed = parse_html(body, url="http://a.test/", content_type="text/html",
                        caps=Caps(10, max_url_length=8192))
    assert parsed.links == ["http://a.test/short"]
    assert parsed.links_too_long == 3
    assert len(parse(body).links) == 3  # no cap given: all kept


def test_follow_counts_links_that_percent_encoding_takes_over_the_cap():
    req = CrawlRequest(url="http://a.test/", crawl_id="p")
    limits = Limits(domains=frozenset({"a.test"}), max_depth=0, max_pages=0, store="")
    near = "http://a.test/" + "é" * 3000  # 6,014 bytes in UTF-8, 18,014 once percent-encoded
    children, too_long = follow(req, [near, "http://a.test/ok"], limits, max_url_length=8192)
    assert [c.url for c in children] == ["http://a.test/ok"] and too_long == 1


@pytest.mark.parametrize(("html", "text"), [
    ("word<!-- c -->word", "wordword"),
    ("word<?php x ?>word", "wordword"),
    ("x<style>a</style><script>b</script>y", "xy"),
    ("a<!--1-->b<!--2-->c", "abc"),
    ("<p>a<!-- x -->b</p><p>c</p>", "ab c"),
    ("a <!-- c --> b", "a b"),
])
def test_what_a_reader_does_not_see_leaves_the_text_around_it_joined_in_both_parsers(html, text):
    small = parse(html.encode())
    large = parse(b" " * LARGE_BODY + html.encode())
    assert (small.text, large.text) == (text, text)
