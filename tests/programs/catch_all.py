"""A plugin whose rule claims every page of host ``127.0.0.2`` ... and of every host at a high
priority, to show a crawl naming other plugins does not get it."""

from __future__ import annotations

from typing import Any

from crawler_tasks import rule


@rule(r".", priority=100)
def everything(page: Any) -> dict[str, Any]:
    return {"caught_by": "catch_all", "url": page.url}
