"""``crawler-tasks top``: its figures after a real crawl are what ``stats`` says, one plain
line at a time off a terminal, one line and exit 2 for a crawl Redis does not know; the
view itself (a page budget's bar and time left) rendered to a recorded console; and
``crawl`` drawing the same view on a real pseudo-terminal."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time

from rich.console import Console

from crawler_tasks.cli.local import free_port
from crawler_tasks.cli.top_view import Rates, plain_line, render, time_left
from crawler_tasks.service.snapshot import CrawlFigures, Snapshot
from crawler_tasks.state.host_views import HostState
from crawler_tasks.state.store_queue import QueueDepth
from tests.helpers import token

WIDTH = 120


def top(settings, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crawler_tasks.cli.main", "top", *args],
                          env={**os.environ, **settings.to_env(), "COLUMNS": str(WIDTH), **(env or {})},
                          capture_output=True, text=True, timeout=60)


def stored_by_stats(settings, crawl_id: str) -> int:
    done = subprocess.run([sys.executable, "-m", "crawler_tasks.cli.main", "stats", "--json", "--crawl-id", crawl_id],
                          env={**os.environ, **settings.to_env()}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["crawls"][crawl_id]["stored"]


def test_once_shows_the_crawl_s_pages_as_stats_counts_them(crawl, site, settings):
    records = crawl(f"{site.url}/tree/{token()}/0?size=9", max_pages=6)
    crawl_id = crawl.crawl_id  # type: ignore[attr-defined]
    result = top(settings, crawl_id, "--once")
    assert result.returncode == 0, result.stderr
    header = result.stdout.splitlines()[0]
    assert header.startswith(f"crawl {crawl_id}  finished · stored ")
    shown = int(re.search(r"· stored ([\d,]+) ·", header).group(1).replace(",", ""))
    assert shown == stored_by_stats(settings, crawl_id) == len(records) == 6
    assert "6 of 6 pages (100%) · finished" in result.stdout


def test_off_a_terminal_a_plain_line_each_interval_until_interrupted(crawl, site, settings):
    crawl(f"{site.url}/tree/{token()}/0?size=3")
    crawl_id = crawl.crawl_id  # type: ignore[attr-defined]
    proc = subprocess.Popen([sys.executable, "-m", "crawler_tasks.cli.main", "top", crawl_id, "--interval", "0.2"],
                            env={**os.environ, **settings.to_env()}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(3)]
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == "", err
    for line in lines:
        assert re.match(rf"\d\d:\d\d:\d\d crawl {crawl_id} finished · stored 3 · ", line), line
        assert "2xx 3 3xx 0 4xx 0 5xx 0 · failed 0 · outstanding 0" in line
    assert "\x1b[" not in "".join(lines)  # no terminal codes in a pipe


def test_an_unknown_crawl_is_one_line_and_exit_2(rt, settings):
    result = top(settings, f"no-such-{token()}")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [f"crawler-tasks: error: no crawl {result.args[-1]} in Redis"]


def test_redis_unreachable_is_one_line_and_exit_3(settings):
    dead = f"redis://127.0.0.1:{free_port()}/0"
    result = top(settings, "--once", env={"CRAWLER_BROKER_URL": dead, "CRAWLER_REDIS_URL": dead})
    assert result.returncode == 3 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("crawler-tasks: error: broker at redis://127.0.0.1:") and "does not answer" in line


# -- the view, rendered without a terminal ------------------------------------------------

def figures(stored: int, *, max_pages: int = 0, state: str = "running", crawl_id: str = "c1") -> CrawlFigures:
    return CrawlFigures(crawl_id=crawl_id, state=state, outstanding=40, max_pages=max_pages,
                        counters={"stored": stored, "status/200": stored - 2, "status/404": 2, "failures": 1,
                                  "retry/max_reached/timeout": 1, "store/refused": 3})


def snapshot(at: float, *crawls: CrawlFigures, one: bool = True) -> Snapshot:
    hosts = (HostState("slow.example", 2.0, 1, 25, 80, 0, 0, 0, False, 4.0, 0),
             HostState("fast.example", 0.0, 8, 0, 900, 0, 0, 0, False, 0.0, 0))
    return Snapshot(at=at, crawl_id=crawls[0].crawl_id if one else None, crawls=crawls,
                    queues={"crawl.fetch": {"band 5": 30, "band 4": 7, "total": 37}},
                    store_queue=QueueDepth(11, 2, 5, 1), hosts=hosts, dead_letters=4)


def text_of(renderable: object, width: int = WIDTH) -> str:
    console = Console(record=True, width=width, file=open(os.devnull, "w"))
    console.print(renderable)
    return console.export_text()


def test_a_page_budget_renders_a_bar_and_the_time_left_at_the_recent_pace():
    rates = Rates(window=5)
    rates.update(snapshot(100.0, figures(30, max_pages=200)))
    now = snapshot(104.0, figures(50, max_pages=200))
    shown = rates.update(now)
    assert shown == {"c1": 5.0}  # 20 pages in 4 s
    text = text_of(render(now, shown))
    [bar] = [line for line in text.splitlines() if "of 200 pages" in line]
    assert bar.startswith("━") and bar.rstrip().endswith("50 of 200 pages (25%) · about 30s left")
    assert "crawl c1  running · stored 50 · 5.0 pages/s · outstanding 40" in text
    assert "of 200 pages" in plain_line(now, shown)


def test_no_budget_no_bar_and_a_finished_crawl_says_so():
    assert "pages (" not in text_of(render(snapshot(1.0, figures(50)), {"c1": None}))
    done = snapshot(1.0, figures(200, max_pages=200, state="finished"))
    assert "200 of 200 pages (100%) · finished" in text_of(render(done, {"c1": None}))


def test_the_view_shows_the_status_mix_errors_queues_and_hosts():
    text = text_of(render(snapshot(1.0, figures(50)), {"c1": None}))
    rows = [line.split() for line in text.splitlines()]
    assert any(row[:3] == ["│", "2xx", "48"] for row in rows)
    assert any(row[:3] == ["│", "4xx", "2"] for row in rows)
    for expected in ("failed: timeout 1", "store errors 3", "dead letters, all crawls 4", "crawl.fetch 37 5:30 4:7",
                     "pending 11", "slow.example 25 2 s 4 s", "fast.example 8 900 0 s"):
        assert expected in " ".join(text.split()), expected


def test_every_running_crawl_has_a_row_and_the_header_sums_them():
    rates = {"a": 2.0, "b": 3.5}
    now = snapshot(1.0, figures(50, crawl_id="a", max_pages=100), figures(20, crawl_id="b"), one=False)
    text = text_of(render(now, rates))
    assert text.splitlines()[0].startswith("2 crawl(s) running · stored 70 · 5.5 pages/s · outstanding 80")
    [a] = [line.split() for line in text.splitlines() if line.startswith("a ")]
    assert a[:10] == ["a", "running", "50", "2.0", "48", "0", "2", "0", "1", "40"] and a[-2:] == ["50%", "25s"]
    assert plain_line(now, rates).startswith("2 crawl(s) running · stored 70 · 5.5 pages/s")
    narrow = text_of(render(now, rates), width=80).splitlines()  # 3xx to 5xx and the bar left out
    assert narrow[1].split() == ["crawl", "state", "stored", "pages/s", "2xx", "failed", "outstanding", "budget"]
    assert narrow[2].split() == ["a", "running", "50", "2.0", "48", "1", "40", "50%", "25s"]


def test_a_rate_covers_the_last_window_only():
    rates = Rates(window=5)
    for at, stored in ((0, 0), (2, 100), (4, 200), (6, 210), (8, 220), (10, 230)):
        shown = rates.update(snapshot(at, figures(stored)))
    assert shown["c1"] == (230 - 210) / (10 - 6)  # the newest sample at least 5 s old is at 6 s
    assert time_left(figures(230, max_pages=250), shown["c1"]) == 4.0
    assert time_left(figures(230, max_pages=250), None) is None
    assert time_left(figures(250, max_pages=250), None) == 0.0


# -- crawl on a terminal ------------------------------------------------------------------

def test_crawl_on_a_terminal_draws_the_live_view_of_its_crawl(tmp_path):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, WIDTH, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "crawler_tasks.cli.main", "demo", "--pages", "30",
                             "--max-pages", "20", "--workers", "1", "--store", str(tmp_path / "demo.db"),
                             "--embedded-redis"],  # nothing shared is touched
                            env={**os.environ, "CRAWLER_BROKER_URL": "", "CRAWLER_REDIS_URL": "",
                                 "TERM": "xterm-256color"},
                            stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    screen: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(master, screen))
    reader.start()
    out, _ = proc.communicate(timeout=120)
    reader.join(10)
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(screen).decode(errors="replace"))
    assert proc.returncode == 0, shown
    assert "20 of 20 pages (100%) · finished" in shown and "╭─ responses" in shown
    assert "pages stored        20" in out


def _drain(fd: int, into: list[bytes]) -> None:
    """Everything written to the terminal, until its last writer has closed it."""
    try:
        while chunk := os.read(fd, 65536):
            into.append(chunk)
    except OSError:  # EIO: the other side is closed
        pass
    finally:
        os.close(fd)


def test_the_backlog_shows_what_waits_and_goes_when_nothing_does():
    busy = dataclasses.replace(snapshot(1.0, figures(50)), waiting={"c1": 120}, held={"c1": 0},
                               queues={"crawl.fetch": {"band 5": 0, "total": 0}, "crawl.store": {"total": 0}})
    text = " ".join(text_of(render(busy, {"c1": None})).split())
    assert "backlog" in text and "waiting for hosts 120" in text
    assert "crawl.fetch" not in text and "held" not in text  # lines with nothing in them are left out
    idle = dataclasses.replace(busy, waiting={"c1": 0})
    assert "backlog" not in text_of(render(idle, {"c1": None}))  # no box of zeros
    assert "waiting 120 · queued 0" in plain_line(busy, {"c1": None})


def test_panels_with_nothing_to_show_are_left_out():
    quiet = CrawlFigures(crawl_id="c1", state="running", outstanding=1, max_pages=0, counters={"stored": 3,
                                                                                              "status/200": 3})
    start = Snapshot(at=1.0, crawl_id="c1", crawls=(quiet,), queues={"crawl.fetch": {"total": 0}},
                     store_queue=QueueDepth(0, 0, 0, 0), hosts=(HostState("a.example", 0.0, 0, 0, 0, 0, 0, 0, False,
                                                                          0.0, 0),), dead_letters=0)
    text = text_of(render(start, {"c1": None}))
    assert "responses" in text and "2xx" in text  # the status mix is always there
    for empty in ("store queue", "errors", "backlog", "busiest hosts", "waiting hosts", "dead letters"):
        assert empty not in text, empty
    narrow = text_of(render(start, {"c1": None}), width=60)
    assert "responses" in narrow and "store queue" not in narrow
    failing = dataclasses.replace(start, crawls=(dataclasses.replace(quiet, counters={**quiet.counters, "errors": 2}),))
    shown = " ".join(text_of(render(failing, {"c1": None})).split())
    assert "errors" in shown and "task errors 2" in shown and "store errors" not in shown


def test_one_crawl_shows_its_own_requests_to_each_host_and_the_time_of_day():
    wall = time.mktime((2026, 11, 27, 10, 5, 3, 0, 0, -1))
    mine = dataclasses.replace(snapshot(1.0, figures(50)), wall=wall,
                               crawl_requests={"slow.example": 7, "fast.example": 30})
    text = text_of(render(mine, {"c1": None}))
    assert "busiest hosts (this crawl's requests)" in text
    assert "fast.example 8 30 0 s" in " ".join(text.split())  # not the 900 of every crawl
    assert text.splitlines()[0].rstrip().endswith("· 10:05:03")
    assert plain_line(mine, {"c1": None}).startswith("10:05:03 crawl c1 running")
    every = snapshot(1.0, figures(50, crawl_id="a"), one=False)
    assert "busiest hosts (every crawl's requests)" in text_of(render(every, {"a": None}))


def test_with_no_budget_the_time_left_comes_from_the_frontier_s_pace():
    rates = Rates(window=5)
    rates.update(snapshot(100.0, dataclasses.replace(figures(30), outstanding=100)))
    now = snapshot(104.0, dataclasses.replace(figures(50), outstanding=80))
    shown = rates.update(now)
    assert rates.shrinking == {"c1": 5.0}  # 20 tasks fewer in 4 s
    assert time_left(now.crawls[0], shown["c1"], rates.shrinking["c1"]) == 16.0
    assert "about 16s left (frontier)" in text_of(render(now, shown, shrinking=rates.shrinking))
    rates.update(snapshot(108.0, dataclasses.replace(figures(60), outstanding=120)))
    assert rates.shrinking["c1"] < 0 and time_left(figures(60), 2.5, rates.shrinking["c1"]) is None
