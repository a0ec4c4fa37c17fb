"""A small multi-process HTTP/1.1 keep-alive load generator: the fallback when wrk is absent.

    python bench/lib/loadgen.py http://127.0.0.1:PORT/p/1 [--procs 2] [--connections 64] [--seconds 3]

Each process keeps ``connections / procs`` connections busy with GET requests
for ``--seconds`` and counts complete responses; prints the total req/s.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import time
from urllib.parse import urlsplit


async def _connection(host: str, port: int, request: bytes, deadline: float) -> int:
    reader, writer = await asyncio.open_connection(host, port)
    done = 0
    try:
        while time.monotonic() < deadline:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            done += 1
    finally:
        writer.close()
    return done


async def _process(url: str, connections: int, seconds: float) -> int:
    parts = urlsplit(url)
    path = parts.path or "/"
    request = (f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUser-Agent: bench-loadgen\r\n"
               "Accept: */*\r\n\r\n").encode()
    deadline = time.monotonic() + seconds
    counts = await asyncio.gather(*(_connection(parts.hostname or "127.0.0.1", parts.port or 80,
                                                request, deadline) for _ in range(connections)))
    return sum(counts)


def _worker(args: tuple[str, int, float]) -> int:
    return asyncio.run(_process(*args))


def requests_per_second(url: str, *, procs: int = 2, connections: int = 64, seconds: float = 3.0) -> float:
    """Requests per second ``url`` answers with ``connections`` keep-alive connections."""
    per_proc = max(1, connections // procs)
    with multiprocessing.get_context("spawn").Pool(procs) as pool:
        total = sum(pool.map(_worker, [(url, per_proc, seconds)] * procs))
    return total / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    rate = requests_per_second(args.url, procs=args.procs, connections=args.connections,
                               seconds=args.seconds)
    print(f"Requests/sec: {rate:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
