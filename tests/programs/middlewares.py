"""Middlewares for the tests: each leaves its mark on the request it sends and on the
response it reads, so their order shows in the stored record."""

from __future__ import annotations

from typing import Any

from crawler_tasks import DropRequest, Request, RetryRequest


class First:
    """Priority 100: first on the way out, last on the way back."""

    def process_request(self, request: Any) -> Any:
        request.headers["X-Order"] = "first"
        request.meta["marked_by"] = "first"
        if request.url.endswith("/drop"):
            raise DropRequest("Not wanted")
        if request.url.endswith("/swap"):
            return Request("plain?swapped=1", priority=4)
        if request.url.endswith("/offsite"):
            return Request("http://elsewhere.test/")
        return None

    def process_response(self, request: Any, response: Any) -> Any:
        response.headers["x-order"] = response.headers.get("x-order", "") + ",first"
        return response


class Second:
    """Priority 200: last on the way out, first on the way back; retries ban pages."""

    def process_request(self, request: Any) -> None:
        request.headers["X-Order"] = request.headers.get("X-Order", "") + ",second"

    def process_response(self, request: Any, response: Any) -> None:
        response.headers["x-order"] = "second"
        if b"banned" in response.body:
            raise RetryRequest("ban page")
        if request.url.endswith("/broken"):
            raise KeyError("no such header")


def module_level_request(request: Any) -> None:
    """Not a middleware: a module function named in CRAWLER_MIDDLEWARES is refused."""
