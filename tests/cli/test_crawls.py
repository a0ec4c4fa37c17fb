"""``crawler-tasks crawls`` and ``list_crawls()``: each crawl's state, times and counters,
with the session's real worker crawling the local site."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from crawler_tasks.cli.local import wait_drained
from crawler_tasks.service.control import list_crawls
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.helpers import token


def run_crawls(settings, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crawler_tasks.cli.main", "crawls", *args],
                          env={**os.environ, **settings.to_env()}, capture_output=True, text=True, timeout=60)


def test_a_running_crawl_then_finished_with_its_times_and_counters(rt, worker, site, settings, tmp_path):
    crawl_id = f"list-{token()}"
    submit_requests(rt, build_requests(f"{site.url}/tree/{token()}/0?size=6&delay=0.3", crawl_id=crawl_id),
                    store=str(tmp_path / "pages.db"))
    [running] = [c for c in list_crawls(rt) if c["crawl_id"] == crawl_id]
    assert running["state"] == "running" and running["outstanding"] >= 1
    assert running["started"] and running["finished"] is None
    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=60, workers=worker)
    deadline = time.monotonic() + 10  # a worker notes the finish within a second or so
    while not (done := next(c for c in list_crawls(rt) if c["crawl_id"] == crawl_id))["finished"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert done["state"] == "finished" and done["finished"] >= done["started"]
    assert done["counters"]["stored"] == 6
    listed = {c["crawl_id"]: c for c in json.loads(run_crawls(settings, "--json").stdout)}
    assert listed[crawl_id] == done
    table = run_crawls(settings).stdout.splitlines()
    assert table[0].split() == ["crawl", "state", "started", "finished", "stored", "failed", "outstanding",
                                "due", "next", "due", "settings"]
    [row] = [line for line in table if line.startswith(crawl_id)]
    assert row.split()[1] == "finished" and row.split()[-6:] == ["6", "0", "0", "-", "-", "-"]
