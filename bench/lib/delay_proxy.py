"""A TCP proxy on loopback that adds a round trip's delay: what a network between the
workers and Redis costs, where this kernel has no netem.

    python bench/lib/delay_proxy.py --target 127.0.0.1:6379 --rtt-ms 1.0 [--stats PATH]

Each chunk the server sends is passed on ``--rtt-ms`` after it arrived (in order, per
connection); what clients send goes at once. So every request and its reply take that
much longer, as over a network of that round trip (asyncio's timers wake within about a
millisecond: the delay added is measured by the caller, not assumed). Prints
``listening <port>`` once it accepts connections; on SIGTERM writes to ``--stats`` the
chunks and bytes clients sent, the chunks being about one per round trip.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from site_server import serve_until_stopped  # noqa: E402


class Proxy:
    """Passes bytes between each client and a new connection to ``target``, replies late."""

    def __init__(self, host: str, port: int, delay: float) -> None:
        self.host, self.port, self.delay = host, port, delay
        self.sent_chunks = self.sent_bytes = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.close()
            return
        tasks = [asyncio.create_task(self._forward(reader, up_writer)),
                 asyncio.create_task(self._late(up_reader, writer))]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for w in (writer, up_writer):
            w.close()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while chunk := await reader.read(1 << 18):
            self.sent_chunks += 1
            self.sent_bytes += len(chunk)
            writer.write(chunk)
            await writer.drain()

    async def _late(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Server to client, each chunk ``delay`` after it came."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, chunk = await queue.get()
                if not chunk:
                    return
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(chunk)
                await writer.drain()

        sender = asyncio.create_task(send())
        try:
            while chunk := await reader.read(1 << 18):
                queue.put_nowait((time.monotonic() + self.delay, chunk))
            queue.put_nowait((0.0, b""))
            await sender
        finally:
            sender.cancel()


async def serve(target: str, rtt_ms: float, stats: Path | None) -> None:
    host, _, port = target.rpartition(":")
    proxy = Proxy(host, int(port), rtt_ms / 1000)
    server = await asyncio.start_server(proxy.handle, host="127.0.0.1", port=0, backlog=1024)
    await serve_until_stopped(server)
    if stats is not None:
        stats.write_text(json.dumps({"chunks": proxy.sent_chunks, "bytes": proxy.sent_bytes}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="host:port of the server")
    parser.add_argument("--rtt-ms", type=float, default=1.0)
    parser.add_argument("--stats", type=Path)
    args = parser.parse_args()
    asyncio.run(serve(args.target, args.rtt_ms, args.stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
