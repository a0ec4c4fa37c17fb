"""Rendering's pure rules: wait conditions, which pages render, what a page may request."""

from __future__ import annotations

import pytest

from crawler_tasks.core.errors import BadInput
from crawler_tasks.core.render import (
    BLOCK,
    FULFIL,
    REFUSE,
    RenderReport,
    is_selector,
    page_wait,
    stuck,
    unsettled,
    verdict,
    wait_of,
    wants_render,
)


@pytest.mark.parametrize(("raw", "wait"), [("load", "load"), (" NetworkIdle ", "networkidle"),
                                           ("domcontentloaded", "domcontentloaded"), ("#items li", "#items li")])
def test_a_wait_condition_is_a_page_event_or_a_selector(raw, wait):
    assert wait_of(raw) == wait
    assert is_selector(wait) == wait.startswith("#")


@pytest.mark.parametrize("raw", ["", "  ", "x" * 501, "a\nb"])
def test_an_empty_or_unprintable_wait_condition_is_refused(raw):
    with pytest.raises(BadInput):
        wait_of(raw)


def test_a_page_waits_for_its_own_condition_when_its_request_names_a_valid_one():
    assert page_wait({"render_wait": "networkidle"}, "load") == "networkidle"
    assert page_wait({"render_wait": ""}, "load") == "load"
    assert page_wait({"render_wait": 3}, "#x") == "#x"
    assert page_wait({}, "load") == "load"


@pytest.mark.parametrize(("url", "asked", "rule", "hosts", "rendered"), [
    ("http://a.example/", True, False, (), True),
    ("http://a.example/", False, True, (), True),
    ("http://a.example/", False, False, (), False),
    ("http://shop.a.example/p", False, False, ("a.example",), True),
    ("http://ba.example/p", False, False, ("a.example",), False),
    ("http://A.Example:8080/p", False, False, ("a.example",), True),
    ("http://anything.test/", False, False, ("*",), True),
])
def test_which_pages_render(url, asked, rule, hosts, rendered):
    assert wants_render(url, asked=asked, rule_renders=rule, hosts=hosts) is rendered


BLOCKED = ("image", "font", "media")


@pytest.mark.parametrize(("method", "url", "kind", "made", "expected"), [
    ("GET", "http://a.example/app.js", "script", 2, (FULFIL, "")),
    ("GET", "http://a.example/x.png", "image", 2, (BLOCK, "image")),
    ("GET", "http://a.example/f.woff2", "font", 2, (BLOCK, "font")),
    ("POST", "http://a.example/api", "fetch", 2, (REFUSE, "method")),
    ("GET", "ftp://a.example/f", "fetch", 2, (REFUSE, "scheme")),
    ("GET", "http://a.example/api", "xhr", 11, (REFUSE, "over_cap")),
    ("HEAD", "https://a.example/api", "fetch", 10, (FULFIL, "")),
])
def test_what_a_rendered_page_may_request(method, url, kind, made, expected):
    assert verdict(method=method, url=url, resource_type=kind, made=made, block=BLOCKED, max_requests=10) == expected


def test_the_descriptions_of_a_page_that_did_not_settle():
    assert unsettled(RenderReport(wait="networkidle"), 15) == \
        "render: network idle not reached within 15s; the DOM as it stood"
    assert unsettled(RenderReport(wait="#items"), 2.5) == \
        "render: the selector '#items' not reached within 2.5s; the DOM as it stood"
    assert unsettled(RenderReport(wait="load", navigated="http://a.example/next"), 15) == \
        "render: the page's scripts navigated to http://a.example/next (not followed); the DOM as it stood"
    assert stuck("load", 15) == \
        "render: the page's scripts did not let it reach the load event within 15s, nor give its DOM"
