"""The timestamp records carry."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from crawler_tasks.core import timing


def test_now_iso_is_the_current_second_in_utc(monkeypatch):
    for at in (1_700_000_000.2, 1_700_000_000.9, 1_700_000_001.0, 1_800_000_000.5, 1_700_000_000.0):
        monkeypatch.setattr(time, "time", lambda at=at: at)
        assert timing.now_iso() == datetime.fromtimestamp(int(at), UTC).isoformat(timespec="seconds")
