"""The plugin of the bench's ``-rule`` rows: one rule on every page extracting three fields,
what a typical user rule costs (``CRAWLER_PLUGINS=bench_rule``)."""

from __future__ import annotations

from typing import Any

from crawler_tasks import rule


@rule(r".")
def three_fields(page: Any) -> dict[str, Any]:
    return {
        "heading": _value(page.xpath("normalize-space(//h1)")),
        "lead": _value(page.xpath("normalize-space(//p[@class='lead'])")),
        "facts": int(float(_value(page.xpath("count(//ul[@class='facts']/li)")))),
    }


def _value(found: Any) -> Any:
    """A selector list's first value; an older checkout's ``page.xpath`` (``--before``) gave
    the value itself."""
    return found.get() if hasattr(found, "get") else found
