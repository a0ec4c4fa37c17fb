"""The invariant every settled crawl keeps: nothing it held is still held.

No host of the crawl holds a slot in Redis (reserved by the mover or taken for a
download), and every worker process has all of its large-body permits free and no
host-slot release owed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from crawler_tasks.stages.runtime import Runtime


def slots_held(rt: Runtime, hosts: Iterable[str]) -> dict[str, list[str]]:
    """The hosts among ``hosts`` that hold a slot, with the task ids holding them."""
    return {h: ids for h, ids in rt.hosts.held_slots(list(hosts)).items() if ids}


def worker_holds(app: Any) -> dict[str, dict[str, int]]:
    """``crawler_holds`` of every worker answering on ``app``'s broker."""
    return app.control.inspect(timeout=3)._request("crawler_holds") or {}


def assert_nothing_held(rt: Runtime, hosts: Iterable[str], *, workers: bool = True,
                        settle_s: float = 3.0) -> None:
    """Assert the invariant for ``hosts`` (and, with ``workers``, every worker of ``rt``'s
    app), allowing ``settle_s`` for releases still on their way."""
    hosts = list(hosts)
    deadline = time.monotonic() + settle_s
    while (held := slots_held(rt, hosts)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not held, f"host slots still held after the crawl settled: {held}"
    if workers:
        answers = worker_holds(rt.app)
        assert answers, "no worker answered crawler_holds"
        for name, holds in answers.items():
            assert holds["permits_free"] == holds["permits"], f"{name} holds a large-body permit: {holds}"
            assert holds["owed"] == 0, f"{name} owes host-slot releases: {holds}"
