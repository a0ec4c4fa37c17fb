"""A rule the package never imports: under CRAWLER_PLUGINS=tests.programs.quiet_pkg it does not run."""

from __future__ import annotations

from typing import Any

from crawler_tasks import rule


@rule(r"/never$")
def never(page: Any) -> Any:
    yield {"never": True}
