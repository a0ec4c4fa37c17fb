"""A plugin's ``custom_settings`` in a real crawl with the defaults on (robots.txt obeyed,
the private-network guard): its budget, its concurrency per host (1 where the default is 2),
its delay and its headers, shown by ``crawler-tasks crawls`` with no header value anywhere."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import redis

from tests.fakes.polite_site import PoliteSite
from tests.helpers import REDIS
from tests.system.test_programs import PROGRAM_DB, crawl_id_of, records, run

SECRET = "paced-secret"


def test_a_plugins_own_settings_pace_limit_and_dress_its_crawl(tmp_path: Path):
    site = PoliteSite(pages=40, latency=0.15)
    site.robots = [(200, "User-agent: *\nDisallow: /p/3\n", 0.0)]
    store = str(tmp_path / "paced.db")
    try:
        done = run("crawl", "--workers", "1", "--quiet", "--store", store, "--plugins", "tests.programs.paced",
                   f"{site.url}/p/0")
        assert done.returncode == 0, done.stderr
        hits = site.page_hits()
    finally:
        site.stop()
    got = records(store)
    assert len(got) == 7  # the plugin's budget, the page robots.txt disallows among them
    assert got.pop(f"{site.url}/p/3")["description"] == "disallowed by robots.txt"
    assert all(r["items"] == [{"url": u, "title": f"p{u.rsplit('/', 1)[1]}"}] for u, r in got.items())
    assert len(hits) == 6 and site.max_in_flight == 1  # one at a time: the default would be two
    starts = [h.start for h in hits]
    assert min(b - a for a, b in zip(starts, starts[1:])) >= 0.15  # one after the other, not 1 s apart
    assert sum(b - a for a, b in zip(starts, starts[1:])) < 5 * 1.0  # the plugin's delay, not the default 1 s
    assert all(h.sent.get("X-Paced-Client") == "paced-plugin" and h.sent.get("Authorization") == f"Bearer {SECRET}"
               for h in hits)

    crawl_id = crawl_id_of(done)
    listed = {c["crawl_id"]: c for c in json.loads(run("crawls", "--json").stdout)}[crawl_id]
    assert listed["settings"] == {"delay": 0.05, "host_concurrency": 1, "max_pages": 7,
                                  "headers": ["X-Paced-Client", "Authorization"]}
    assert listed["max_pages"] == 7 and listed["counters"]["stored"] == 7
    [row] = [line for line in run("crawls").stdout.splitlines() if line.startswith(crawl_id)]
    assert row.endswith("delay=0.05 headers=X-Paced-Client,Authorization host_concurrency=1 max_pages=7")

    # The header's value reached the site and nothing else: not Redis, the store or the log.
    client = redis.Redis.from_url(f"{REDIS}/{PROGRAM_DB}")
    for key in client.scan_iter(f"*{crawl_id}*"):
        kind = client.type(key).decode()
        dumped = {"hash": client.hgetall, "list": lambda k: client.lrange(k, 0, -1),
                  "set": client.smembers, "zset": lambda k: client.zrange(k, 0, -1),
                  "string": client.get}.get(kind, lambda k: b"")(key)
        assert SECRET not in repr(dumped)
    with sqlite3.connect(store) as db:
        assert not [row for row in db.execute("SELECT * FROM pages") if SECRET in repr(row)]
    assert SECRET not in Path(store).read_bytes().decode("latin-1")
    [log] = [line[20:] for line in done.stdout.splitlines() if line.startswith("worker log")]
    assert SECRET not in Path(log).read_text() and SECRET not in done.stdout + done.stderr
    # What a person reads: a worker line per response, and why the crawl ended.
    assert re.search(rf"INFO/\w+\] fetched 200 GET {re.escape(site.url)}/p/0 \d+ ms [\d.]+ [KM]?B\n",
                     Path(log).read_text())
    assert "page budget reached" in done.stdout
    assert f"crawler-tasks export --store {store} --crawl-id {crawl_id}" in done.stdout
