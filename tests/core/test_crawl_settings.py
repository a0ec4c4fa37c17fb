"""A plugin's ``custom_settings``: checked at load, merged over the workers' settings (no I/O)."""

from __future__ import annotations

import types

import pytest

from crawler_tasks.core.crawl_settings import CrawlSettings, parse_crawl_settings
from crawler_tasks.core.errors import PluginError
from crawler_tasks.core.limits import CrawlConfig, Limits
from crawler_tasks.core.models import CrawlRequest
from crawler_tasks.core.policy import with_headers
from crawler_tasks.core.politeness import PaceRules, delay_floor
from crawler_tasks.core.program import Program, load_program
from crawler_tasks.core.settings import Settings


def test_our_names_and_scrapys_name_the_same_settings():
    ours = parse_crawl_settings("p", {"delay": 0.5, "host_concurrency": 1, "max_depth": 3, "max_pages": 9,
                                      "allowed_domains": ["Shop.Example", ".cdn.example"],
                                      "headers": {"X-A": "1"}})
    scrapy = parse_crawl_settings("p", {"DOWNLOAD_DELAY": 0.5, "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
                                        "DEPTH_LIMIT": 3, "CLOSESPIDER_PAGECOUNT": 9,
                                        "allowed_domains": ["shop.example", "cdn.example"],
                                        "DEFAULT_REQUEST_HEADERS": {"X-A": "1"}})
    assert ours == scrapy
    assert ours.allowed_domains == frozenset({"shop.example", "cdn.example"})
    assert parse_crawl_settings("p", None) == CrawlSettings() and not CrawlSettings()


@pytest.mark.parametrize(("raw", "message"), [
    ([("delay", 1)], "p.custom_settings: a dict is needed, not list"),
    ({"DOWNLOAD_DELAY": -1}, "p.custom_settings['DOWNLOAD_DELAY']: seconds >= 0 are needed, not -1"),
    ({"delay": float("nan")}, "p.custom_settings['delay']: seconds >= 0 are needed, not nan"),
    ({"host_concurrency": 1.5}, "p.custom_settings['host_concurrency']: a whole number >= 0 is needed, not 1.5"),
    ({"max_pages": True}, "p.custom_settings['max_pages']: a whole number >= 0 is needed, not True"),
    ({"headers": {"X-A": 1}}, "p.custom_settings['headers']: a dict of header names to text values is needed"),
    ({"headers": {"X-A": "a\r\nX-B: b"}}, "p.custom_settings['headers']: header 'X-A' holds a line break"),
    ({"allowed_domains": [""]}, "p.custom_settings['allowed_domains']: a list of domain names is needed"),
    ({"CONCURRENT_REQUESTS": 4}, "p.custom_settings: unknown setting 'CONCURRENT_REQUESTS' (known: "
                                 "allowed_domains, delay, headers, host_concurrency, max_depth, max_pages, revisit)"),
])
def test_a_wrong_setting_is_one_line_naming_the_plugin_and_the_setting(raw, message):
    with pytest.raises(PluginError) as err:
        parse_crawl_settings("p", raw)
    assert str(err.value).startswith(message)


def test_a_later_plugin_wins_and_domains_and_headers_join():
    first = CrawlSettings(delay=1.0, max_pages=5, allowed_domains=frozenset({"a"}),
                          headers=(("X-A", "1"), ("X-B", "first")))
    second = CrawlSettings(delay=0.2, allowed_domains=frozenset({"b"}), headers=(("x-b", "second"),))
    program = Program(plugins=("one", "two"), custom=(("one", first), ("two", second)))
    merged = program.settings_for(())
    assert (merged.delay, merged.max_pages) == (0.2, 5)
    assert merged.allowed_domains == frozenset({"a", "b"})
    assert merged.headers == (("X-A", "1"), ("x-b", "second"))
    assert program.settings_for(("one",)) == first
    assert program.settings_for(("three",)) == CrawlSettings()


def test_the_crawls_own_limits_come_first_then_its_plugins_then_the_workers():
    settings = Settings(max_depth=4, download_delay=1.0, host_concurrency=2)
    custom = CrawlSettings(delay=0.25, host_concurrency=1, max_depth=2, max_pages=7,
                           allowed_domains=frozenset({"cdn.example"}))
    plain = Limits.of(CrawlConfig("c", frozenset({"shop.example"})), settings, custom)
    assert (plain.max_depth, plain.max_pages, plain.delay, plain.host_concurrency) == (2, 7, 0.25, 1)
    assert plain.domains == frozenset({"shop.example", "cdn.example"})
    own = Limits.of(CrawlConfig("c", frozenset({"shop.example"}), max_depth=0, max_pages=3), settings, custom)
    assert (own.max_depth, own.max_pages) == (0, 3)
    none = Limits.of(CrawlConfig("c", frozenset({"shop.example"})), settings)
    assert (none.max_depth, none.max_pages, none.delay, none.host_concurrency) == (4, 0, None, None)
    fixed = Limits.of(CrawlConfig("c", frozenset()), settings.replace(allowed_domains=("x.example",)), custom)
    assert fixed.domains == frozenset({"x.example"})


def test_the_crawls_delay_replaces_the_setting_and_robots_txt_may_raise_it():
    assert delay_floor(1.0, None) == 1.0
    assert delay_floor(1.0, None, 0.25) == 0.25
    assert delay_floor(1.0, 2.0, 0.25) == 2.0
    assert delay_floor(0.0, 0.5, 0.0) == 0.5
    rules = PaceRules.of(Settings(download_delay=1.0, host_concurrency=2), 0.5, delay=0.1, concurrency=1)
    assert (rules.floor, rules.concurrency) == (0.5, 1)


def test_a_requests_own_header_wins_over_its_crawls():
    req = CrawlRequest(url="http://shop.example/", crawl_id="c", headers={"x-client": "mine"})
    sent = with_headers(req, (("X-Client", "crawl"), ("Accept-Language", "fr")))
    assert sent.headers == {"Accept-Language": "fr", "x-client": "mine"}
    assert with_headers(req, ()) is req
    assert with_headers(req, (("X-CLIENT", "crawl"),)) is req


def test_shown_settings_name_headers_but_never_their_values():
    custom = parse_crawl_settings("p", {"max_pages": 7, "headers": {"Authorization": "Bearer s3cret"}})
    assert custom.shown() == {"max_pages": 7, "headers": ["Authorization"]}


def test_a_plugin_with_settings_alone_is_not_idle_and_its_settings_are_loaded():
    program = load_program(("tests.programs.paced",))
    assert program.idle() == []
    assert program.settings_for(()).host_concurrency == 1
    module = types.ModuleType("tests_programs_settings_only")
    module.custom_settings = {"max_pages": 3}  # type: ignore[attr-defined]
    import sys
    sys.modules[module.__name__] = module
    try:
        only = load_program((module.__name__,))
        assert only.idle() == [] and only.settings_for(()).max_pages == 3
    finally:
        del sys.modules[module.__name__]


def test_a_plugin_can_give_its_crawls_a_revisit_schedule():
    assert parse_crawl_settings("p", {"revisit": 3600}).revisit == 3600.0
    with pytest.raises(PluginError, match=r"p.custom_settings\['revisit'\]: seconds > 0"):
        parse_crawl_settings("p", {"revisit": 0})
    config = CrawlConfig(crawl_id="c", domains=frozenset())
    assert Limits.of(config, Settings(), CrawlSettings(revisit=600.0)).revisit == 600.0
    started = CrawlConfig(crawl_id="c", domains=frozenset(), revisit=60.0)
    assert Limits.of(started, Settings(), CrawlSettings(revisit=600.0)).revisit == 60.0  # the start's first
