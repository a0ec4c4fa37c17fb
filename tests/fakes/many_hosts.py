"""One small keep-alive site answering on many loopback addresses: a broad crawl of many hosts.

``ManyHosts(n).start()`` listens on one port of ``127.0.1.1``, ``127.0.1.2``, ... (n
addresses, 254 per ``127.0.x``), each a host of its own for the crawler. Every GET is
answered with a small page with no links, ``Connection: keep-alive``; a connection stays
open until the client closes it. One asyncio loop on a daemon thread serves them all.
"""

from __future__ import annotations

import asyncio
import socket
import threading

PAGE = b"<html><head><title>host</title></head><body><p>A page.</p></body></html>"
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: "
            + str(len(PAGE)).encode() + b"\r\nConnection: keep-alive\r\n\r\n" + PAGE)


def addresses(n: int) -> list[str]:
    """``127.0.1.1`` onwards: n loopback addresses, skipping .0 and .255."""
    return [f"127.0.{1 + i // 254}.{1 + i % 254}" for i in range(n)]


class ManyHosts:
    """The site on ``n`` loopback addresses (see the module doc)."""

    def __init__(self, n: int) -> None:
        self.hosts = addresses(n)
        self.port = 0
        self.requests = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="many-hosts", daemon=True)

    def urls(self) -> list[str]:
        return [f"http://{host}:{self.port}/" for host in self.hosts]

    def start(self) -> ManyHosts:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the many-hosts site did not start")
        return self

    def stop(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        sockets = self._listen()
        servers = [await asyncio.start_server(self._handle, sock=s, backlog=64) for s in sockets]
        self._ready.set()
        await self._stop.wait()
        for server in servers:
            server.close()

    def _listen(self) -> list[socket.socket]:
        """A socket on the same free port of every address (tried again on a clash)."""
        for _ in range(20):
            first = socket.create_server((self.hosts[0], 0))
            port, sockets = first.getsockname()[1], [first]
            try:
                sockets += [socket.create_server((host, port)) for host in self.hosts[1:]]
            except OSError:
                for s in sockets:
                    s.close()
                continue
            self.port = port
            return sockets
        raise RuntimeError("no port free on every address")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests += 1
                writer.write(RESPONSE if head.startswith(b"GET") else RESPONSE[:-len(PAGE)])
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
