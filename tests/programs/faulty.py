"""A plugin whose rule fails on /fail pages and whose pipeline fails on items marked so; its
rule on /failing pages also asks for a page whose connection is reset, with an errback."""

from __future__ import annotations

import json
import os
from typing import Any

from crawler_tasks import Failure, Request, rule


@rule(r"/rules/\w+/fail$")
def fails(page: Any) -> Any:
    yield {"partial": True}
    raise ValueError("no such field on this page")


@rule(r"/rules/\w+/odd$")
def yields_odd(page: Any) -> Any:
    yield 42


@rule(r"/rules/\w+/items$")
def items(page: Any) -> Any:
    yield {"n": 1}
    yield {"n": 2, "explode": True}
    yield Request("target", priority=3, meta={"from": "rule"})


def exploding(item: dict[str, Any], page: Any) -> dict[str, Any]:
    if item.get("explode"):
        raise RuntimeError("pipeline bug")
    return item


@rule(r"/rules/\w+/failing$", follow=True)
def failing(page: Any) -> Any:
    yield Request(page.url.replace("/rules/", "/reset/").rsplit("/", 1)[0], errback=lost)


def lost(failure: Failure) -> None:
    """The errback: the failure it hears, noted in the error handler's file as ``errback``."""
    with open(os.environ["CRAWLER_TEST_FAILURES"], "a", encoding="utf-8") as out:
        out.write(json.dumps({"kind": failure.kind, "reason": failure.reason, "url": failure.url,
                              "status": failure.status, "errback": True}) + "\n")
