"""Kills a benchmark's child processes if the benchmark itself dies without cleaning up (SIGKILL, crash).

The benchmark (``servers.Children``, on its first child) starts it once with a pipe on
stdin and writes ``+PID`` for each process it starts, ``-PID`` once that process is
stopped and reaped, and ``dir PATH`` for its temporary directory. When the pipe closes
(the benchmark exited, however it ended) every PID still listed is killed with SIGKILL,
with its process group and its descendants, and the directories are removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys

import psutil


def _kill(pid: int) -> None:
    try:
        family = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        family = []
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    for proc in family:
        with contextlib.suppress(psutil.Error):
            proc.kill()


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the benchmark's to handle
    pids: set[int] = set()
    dirs: list[str] = []
    for line in sys.stdin:
        line = line.strip()
        if line.startswith("dir "):
            dirs.append(line[4:])
        elif line[1:].isdigit():
            (pids.add if line[0] == "+" else pids.discard)(int(line[1:]))
    for pid in pids:
        _kill(pid)
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
