"""A small, fast HTTP/1.1 keep-alive server for a generated site (raw asyncio streams).

Run as its own process, so it does not share a GIL with the harness::

    python bench/lib/site_server.py --root /tmp/crawler-bench-site-2000-1 [--port 0] [--latency 0.05]

Every page is read into memory at start with its response headers built; the
query string and fragment of a request are ignored (``/p/12?b=2&a=1`` serves
page 12), anything else is a 404. With ``--latency`` each response is sent
that many seconds after its request arrived. Prints ``listening <port>`` on
stdout once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
import time
from pathlib import Path

_HEADERS = ("HTTP/1.1 {status}\r\nServer: bench-site\r\nContent-Type: text/html; charset=utf-8\r\n"
            "Content-Length: {length}\r\nConnection: {connection}\r\n\r\n")
_NOT_FOUND = b"<!DOCTYPE html><html><body><h1>404 Not Found</h1></body></html>\n"


class Response:
    """A keep-alive response (headers and body in one buffer, so one write) and its close headers."""

    __slots__ = ("close_head", "full", "head_length")

    def __init__(self, body: bytes, status: str = "200 OK") -> None:
        head = _HEADERS.format(status=status, length=len(body), connection="keep-alive").encode()
        self.full, self.head_length = head + body, len(head)
        self.close_head = _HEADERS.format(status=status, length=len(body), connection="close").encode()

    def render(self, *, close: bool, head_only: bool) -> bytes:
        if close:
            return self.close_head if head_only else self.close_head + self.full[self.head_length:]
        return self.full[: self.head_length] if head_only else self.full


def load_pages(root: Path) -> dict[bytes, Response]:
    """URL path -> response for every page of the site under ``root``."""
    pages = {b"/": Response((root / "index.html").read_bytes())}
    for entry in os.scandir(root / "p"):
        if entry.name.endswith(".html"):
            with open(entry.path, "rb") as fh:
                pages[f"/p/{entry.name[:-5]}".encode()] = Response(fh.read())
    return pages


class SiteServer:
    """Serves ``pages``; each response waits ``latency`` seconds first."""

    def __init__(self, pages: dict[bytes, Response], latency: float) -> None:
        self.pages, self.latency = pages, latency
        self.not_found = Response(_NOT_FOUND, "404 Not Found")

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                arrived = time.monotonic()
                method, target, version = _request_line(head)
                close = _wants_close(head, version)
                path = target.split(b"?", 1)[0].split(b"#", 1)[0]
                response = self.pages.get(path, self.not_found)
                if self.latency:
                    await asyncio.sleep(self.latency)
                writer.write(response.render(close=close, head_only=method == b"HEAD"))
                await writer.drain()
                self.sent(arrived)
                if close:
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()


    def sent(self, arrived: float) -> None:
        """A response went out, its request having arrived at ``arrived`` (monotonic)."""


async def serve_until_stopped(server: asyncio.Server) -> None:
    """Print ``listening <port>`` for ``server`` and serve until SIGTERM or SIGINT."""
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def _request_line(head: bytes) -> tuple[bytes, bytes, bytes]:
    line = head[: head.index(b"\r\n")]
    method, target, version = line.split(b" ", 2)
    return method, target, version


def _wants_close(head: bytes, version: bytes) -> bool:
    lower = head.lower()
    if version == b"HTTP/1.0":
        return b"connection: keep-alive" not in lower
    return b"connection: close" in lower


async def serve(root: Path, port: int, latency: float) -> None:
    server = SiteServer(load_pages(root), latency)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    srv = await asyncio.start_server(server.handle, sock=sock, backlog=1024, limit=64 * 1024)
    await serve_until_stopped(srv)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    asyncio.run(serve(args.root, args.port, args.latency))
    return 0


if __name__ == "__main__":
    sys.exit(main())
