"""What a worker process sets up beside its tasks: the malloc arena cap."""

from __future__ import annotations

import subprocess
import sys

#: Threads that malloc at the same time (zlib releases the GIL), then glibc's per-arena report.
ARENAS = """
import ctypes, sys, threading, zlib
from crawler_tasks.service.worker import cap_malloc_arenas
if sys.argv[1] != "0":
    assert cap_malloc_arenas(int(sys.argv[1]))
blob = zlib.compress(bytes(200_000))
def work():
    for _ in range(200):
        zlib.decompress(blob)
threads = [threading.Thread(target=work) for _ in range(16)]
[t.start() for t in threads]
[t.join() for t in threads]
ctypes.CDLL("libc.so.6").malloc_stats()
"""


def arenas(cap: int) -> int:
    done = subprocess.run([sys.executable, "-c", ARENAS, str(cap)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


def test_the_cap_holds_threads_that_malloc_at_once_to_that_many_arenas():
    assert arenas(0) > 4  # glibc's own: an arena per thread that found the others busy
    assert arenas(2) <= 2


def test_a_worker_refuses_a_negative_arena_count_in_one_line():
    done = subprocess.run([sys.executable, "-m", "celery", "-A", "crawler_tasks", "worker"],
                          env={"CRAWLER_MALLOC_ARENAS": "-1", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "crawler_tasks: malloc_arenas: must be 0 or more"
