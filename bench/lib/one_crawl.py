"""One ``crawler-tasks crawl`` timed from the outside, and the helper processes around it
(bench/slots, bench/distance).

``helper`` starts a script of bench/lib that prints ``listening <port>`` (timed_site.py,
delay_proxy.py) and SIGTERMs it on leaving; ``crawl_once`` runs the crawl as a user does
and gives its wall time from start to exit and the CPU of it and the workers it reaped.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

#: What a local one-host benchmark turns off, as bench/compare does: robots.txt (the site
#: has none), the delay and the cap per host (unless the benchmark measures one), and the
#: guard for the site's loopback address.
ONE_HOST = {"CRAWLER_ROBOTSTXT_OBEY": "0", "CRAWLER_DOWNLOAD_DELAY": "0", "CRAWLER_HOST_CONCURRENCY": "0",
            "CRAWLER_PRIVATE_ALLOWLIST": "127.0.0.0/8"}


@contextmanager
def helper(*cmd: str | os.PathLike[str]) -> Iterator[int]:
    """A Python helper that prints ``listening <port>``: its port, SIGTERMed on leaving."""
    proc = subprocess.Popen([sys.executable, *map(str, cmd)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline().split()[1])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()


def crawl_once(crawler: str, url: str, redis_url: str, work: Path, env: Mapping[str, str],
               name: str) -> tuple[float, float]:
    """``crawler-tasks crawl URL --workers 1`` with Redis ``redis_url`` as broker and state, a
    store in ``work`` and ``env`` over :data:`ONE_HOST`: wall seconds from start to exit, and
    CPU seconds of it and the workers it reaped. A crawl that fails stops benchmark ``name``."""
    full = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    full.update(ONE_HOST, CRAWLER_BROKER_URL=redis_url, CRAWLER_REDIS_URL=redis_url,
                CRAWLER_STORE=str(work / "pages.db"), **env)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    code = subprocess.call([crawler, "crawl", url, "--workers", "1", "--quiet", "--store", str(work / "pages.db")],
                           env=full, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        raise SystemExit(f"{name}: crawler-tasks exited with code {code}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
