"""Pipelines' and middlewares' open and close, per crawl and process (pure: no worker)."""

from __future__ import annotations

from typing import Any

from crawler_tasks.core.limits import Limits
from crawler_tasks.core.program import Hooks, Middleware, Pipeline, Program
from crawler_tasks.stages.lifecycle import Lifecycle

LIMITS = Limits(domains=frozenset({"s.test"}), max_depth=3, max_pages=0, store="x.db")


class Noting:
    def __init__(self, name: str, events: list) -> None:
        self.name, self.events = name, events

    def open(self, crawl: Any) -> None:
        self.events.append((self.name, "open", crawl.crawl_id))

    def close(self, crawl: Any) -> None:
        self.events.append((self.name, "close", crawl.crawl_id))


def program(events: list) -> Program:
    pipe, mw = Noting("p", events), Noting("m", events)
    return Program(pipelines=(Pipeline("a.p", 0, lambda item, page: item, Hooks.of("a.p", pipe)),),
                   middlewares=(Middleware("a.m", 0, lambda r: None, None, Hooks.of("a.m", mw)),))


def test_a_crawl_opens_once_and_closes_once_it_drains():
    events: list = []
    life = Lifecycle(program(events))
    life.opening("c", LIMITS)
    life.opening("c", LIMITS)  # a second page of the crawl in this process
    assert events == [("p", "open", "c"), ("m", "open", "c")]
    assert life.close_drained(lambda ids: {i: 3 for i in ids}) == []  # still outstanding work
    assert life.close_drained(lambda ids: {i: 0 for i in ids}) == ["c"]
    assert events[2:] == [("p", "close", "c"), ("m", "close", "c")]
    life.opening("c", LIMITS)  # work again after it drained: opened again
    life.close()  # the worker stops
    assert [e[1] for e in events[4:]] == ["open", "open", "close", "close"]


def test_a_failing_hook_is_logged_and_the_others_run(caplog):
    events: list = []

    class Broken:
        def open(self, crawl: Any) -> None:
            raise RuntimeError("no")

    p = Program(pipelines=(Pipeline("a.b", 0, lambda i, pg: i, Hooks.of("a.b", Broken())),
                           Pipeline("a.n", 1, lambda i, pg: i, Hooks.of("a.n", Noting("n", events)))))
    Lifecycle(p).opening("c", LIMITS)
    assert events == [("n", "open", "c")] and "open of a.b failed for crawl c: RuntimeError: no" in caplog.text


def test_no_hooks_no_work():
    life = Lifecycle(Program())
    life.opening("c", LIMITS)
    assert life.close_drained(lambda ids: 1 / 0) == []  # nothing open: nothing asked
