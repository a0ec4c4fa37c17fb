"""The plugin of the bench's ``-rule`` rows: one rule on every page extracting three fields,
what a typical user rule costs (``CRAWLER_PLUGINS=bench_rule``)."""

from __future__ import annotations

from typing import Any

from crawler_tasks import rule


@rule(r".")
def three_fields(page: Any) -> dict[str, Any]:
    return {
        "heading": page.xpath("normalize-space(//h1)"),
        "lead": page.xpath("normalize-space(//p[@class='lead'])"),
        "facts": int(page.xpath("count(//ul[@class='facts']/li)")),
    }
