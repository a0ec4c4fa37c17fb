"""Rules, their choice per page, pipeline order and the loading of plugins (no I/O)."""

from __future__ import annotations

import pytest

from crawler_tasks.core.errors import BadInput, PluginError
from crawler_tasks.core.program import (
    RULES,
    Rule,
    Rules,
    idle_warning,
    load_program,
    parse_ordered,
    parse_plugins,
    within,
)


def make(name: str, pattern: str = ".", *, host: str | None = None, priority: int = 0) -> Rule:
    import re

    return Rule(re.compile(pattern), host, True, priority, lambda page: None, name)


def test_the_highest_priority_of_the_matching_rules_wins_and_the_first_among_equals():
    rules = Rules()
    for r in (make("a.listing", r"/list"), make("a.product", r"/product/\d+", priority=5),
              make("a.any", r".", priority=1), make("a.any2", r".", priority=1)):
        rules.add(r)
    assert rules.pick("http://s.test/product/7", "s.test").name == "a.product"
    assert rules.pick("http://s.test/list/2", "s.test").name == "a.any"
    assert rules.pick("http://s.test/other", "s.test").name == "a.any"


def test_a_rule_for_a_host_matches_that_host_only():
    rules = Rules()
    rules.add(make("a.shop", host="shop.test"))
    assert rules.pick("http://shop.test/x", "shop.test") is not None
    assert rules.pick("http://blog.test/x", "blog.test") is None


def test_a_crawl_naming_plugins_gets_only_their_rules():
    rules = Rules()
    rules.add(make("shop.rules.product", priority=1))
    rules.add(make("other.everything", priority=9))
    assert rules.pick("http://s.test/", "s.test").name == "other.everything"
    assert rules.pick("http://s.test/", "s.test", ("shop",)).name == "shop.rules.product"
    assert rules.pick("http://s.test/", "s.test", ("sho",)) is None  # a prefix of a name is not its package
    assert within("shop.rules.product", ["shop.rules"]) and not within("shopping.x", ["shop"])


def test_pipelines_are_ordered_by_priority_and_checked():
    assert parse_ordered("a.b:300, c.d:100,e.f:100", "X") == (("c.d", 100), ("e.f", 100), ("a.b", 300))
    assert parse_ordered("a.b", "X") == (("a.b", 0),)
    for bad in ("a b:1", "a.b:x", ":1", "a..b:1"):
        with pytest.raises(BadInput, match="^X: "):
            parse_ordered(bad, "X")
    with pytest.raises(BadInput, match="not a dotted module name"):
        parse_plugins("ok, not-ok")


def test_a_plugin_that_fails_to_import_is_one_line_naming_it():
    with pytest.raises(PluginError) as err:
        load_program(("tests.programs.broken",))
    assert str(err.value) == ("CRAWLER_PLUGINS: cannot import 'tests.programs.broken': "
                              "ImportError: this plugin is broken on purpose")
    with pytest.raises(PluginError, match="cannot import 'no_such_plugin_module': ModuleNotFoundError"):
        load_program(("no_such_plugin_module",))
    with pytest.raises(PluginError, match="'tests.programs.faulty.nothing' names nothing"):
        load_program((), ("tests.programs.faulty.nothing:1",))


def test_the_program_holds_the_rules_of_its_plugins_only():
    program = load_program(("tests.programs.faulty",), ("tests.programs.faulty.exploding:10",))
    assert {r.name for r in program.rules} == {"tests.programs.faulty.fails", "tests.programs.faulty.yields_odd",
                                               "tests.programs.faulty.items", "tests.programs.faulty.failing"}
    assert [p.name for p in program.pipelines] == ["tests.programs.faulty.exploding"]
    assert program.missing(("tests.programs.faulty", "tests.programs.shop")) == ["tests.programs.shop"]
    assert program.pipelines_for(("elsewhere",)) == ()
    assert len(load_program(()).rules) == 0 and len(RULES) >= 3  # registered, but not in that program


def test_a_rule_pattern_that_is_no_regular_expression_fails_its_plugin():
    from crawler_tasks import rule

    with pytest.raises(PluginError, match=r"rule pattern '\(' is not a valid regular expression"):
        rule("(")


def test_a_middleware_needs_process_request_or_process_response():
    with pytest.raises(PluginError, match="'tests.programs.middlewares.module_level_request' has neither "
                                          "process_request nor process_response"):
        load_program((), (), ("tests.programs.middlewares.module_level_request:1",))
    program = load_program((), (), ("tests.programs.middlewares.First:5",))
    [mw] = program.middlewares
    assert (mw.priority, mw.process_request is not None, mw.process_response is not None) == (5, True, True)
    assert program.middlewares_for(("tests.programs",)) == (mw,) and program.middlewares_for(("other",)) == ()


def test_a_plugin_that_registers_nothing_is_named_at_start():
    quiet = load_program(("tests.programs.quiet_pkg",))  # its rule is in a submodule it never imports
    assert quiet.idle() == ["tests.programs.quiet_pkg"]
    assert "'from . import rules' in its __init__.py" in idle_warning("tests.programs.quiet_pkg")
    assert load_program(("tests.programs.faulty",)).idle() == []
    assert load_program(("tests.programs.quiet_pkg.rules",)).idle() == []
