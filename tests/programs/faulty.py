"""A plugin whose rule fails on /fail pages and whose pipeline fails on items marked so."""

from __future__ import annotations

from typing import Any

from crawler_tasks import Request, rule


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
