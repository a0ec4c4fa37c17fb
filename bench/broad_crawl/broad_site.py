"""bench/broad's site: M hosts on loopback addresses, K pages each, every request logged.

Run as its own process (it must not share a GIL with the harness)::

    python bench/broad_crawl/broad_site.py --hosts 200 --pages-per-host 30 --log requests.log [--skew 20] [--latency 0.02]

Host n is ``127.0.1.1``, ``127.0.1.2``, ... (254 per ``127.0.x``, as in
tests/fakes/many_hosts.py); the server listens on one port of every address, so each
address is a host of its own for a crawler. Host 0 holds ``--skew`` × K pages
when ``--skew`` is over 1. Page 0 of a host is ``/``, page i is ``/p/i``. Each
page is a few KB of HTML with five links within its host (the next page, so
that every page is reachable from the root, and four random ones) and one or
two links to random pages of other hosts. Anything else is a 404.

Every request is logged to ``--log``, one line each::

    <arrival> <answered> <host address> <status> <path>

with ``time.monotonic()`` seconds (the same clock in every process of the
machine): arrival when the request head was read, answered when the response
was written (after ``--latency``). The log is flushed every half second and
when the server stops (SIGTERM, SIGINT). Prints ``listening <port> <pages> <bytes of
the bodies>`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import socket
import sys
import time
from pathlib import Path
from typing import TextIO

from broad_realweb import extra_links, extra_responses

SAME_HOST_LINKS = 5
WORDS = ("polite crawl host page link delay queue fetch server request answer robots frontier "
         "scheduler worker broker redis store record politeness latency keep alive socket").split()
_HEAD = ("HTTP/1.1 {status}\r\nServer: bench-broad\r\nContent-Type: {kind}\r\n{more}"
         "Content-Length: {length}\r\nConnection: keep-alive\r\n\r\n")
_NOT_FOUND = b"<!DOCTYPE html><html><body><h1>404 Not Found</h1></body></html>\n"


def addresses(n: int) -> list[str]:
    """``127.0.1.1`` onwards: n loopback addresses, skipping .0 and .255."""
    return [f"127.0.{1 + i // 254}.{1 + i % 254}" for i in range(n)]


def pages_per_host(hosts: int, pages: int, skew: float) -> list[int]:
    """Pages of each host: host 0 has ``skew`` × ``pages`` when ``skew`` > 1."""
    counts = [pages] * hosts
    if skew > 1 and hosts:
        counts[0] = max(pages, round(pages * skew))
    return counts


def page_path(i: int) -> str:
    """The path of page ``i`` of a host."""
    return "/" if i == 0 else f"/p/{i}"


def _same_host_targets(rng: random.Random, i: int, count: int) -> list[int]:
    """The next page and random others of the host (never the page itself)."""
    targets = [i + 1] if i + 1 < count else []
    others = [j for j in range(count) if j != i and j not in targets]
    targets += rng.sample(others, min(SAME_HOST_LINKS - len(targets), len(others)))
    return targets


def _cross_host_links(rng: random.Random, h: int, hosts: list[str], counts: list[int], port: int) -> list[str]:
    """One or two absolute links to random pages of other hosts."""
    if len(hosts) < 2:
        return []
    links = []
    for _ in range(rng.randint(1, 2)):
        other = rng.randrange(len(hosts) - 1)
        if other >= h:  # any host but h
            other += 1
        links.append(f"http://{hosts[other]}:{port}{page_path(rng.randrange(counts[other]))}")
    return links


def _paragraphs(rng: random.Random, n: int) -> str:
    return "\n".join("<p>" + " ".join(rng.choice(WORDS) for _ in range(rng.randint(50, 80))) + ".</p>"
                     for _ in range(n))


def render_page(rng: random.Random, h: int, i: int, hosts: list[str], counts: list[int], port: int,
                realweb: bool = False) -> bytes:
    """The HTML of page ``i`` of host ``h`` (about 3–6 KB); ``realweb``: with the links of
    broad_realweb.py too."""
    own = [f'<li><a href="{page_path(j)}">page {j}</a></li>' for j in _same_host_targets(rng, i, counts[h])]
    if realweb:
        own += [f'<li><a href="{path}">more</a></li>' for path in extra_links(i, counts[h])]
    far = [f'<li><a href="{url}">elsewhere</a></li>' for url in _cross_host_links(rng, h, hosts, counts, port)]
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>host {h} page {i}</title></head>\n"
            f"<body><h1>Host {h}, page {i}</h1>\n{_paragraphs(rng, rng.randint(7, 11))}\n"
            f"<ul>{''.join(own)}</ul>\n<ul>{''.join(far)}</ul>\n</body></html>\n").encode()


def _response(body: bytes, status: str = "200 OK", kind: str = "text/html; charset=utf-8",
              location: str | None = None) -> bytes:
    more = f"Location: {location}\r\n" if location else ""
    return _HEAD.format(status=status, kind=kind, more=more, length=len(body)).encode() + body


def build_site(hosts: list[str], counts: list[int], port: int, seed: int,
               realweb: bool = False) -> tuple[dict[tuple[str, bytes], bytes], int]:
    """(host address, path) -> full response, for every page of every host (and, with
    ``realweb``, what broad_realweb.py adds); and the bytes of the pages' bodies."""
    rng = random.Random(seed)
    site, size = {}, 0
    for h, address in enumerate(hosts):
        for i in range(counts[h]):
            body = render_page(rng, h, i, hosts, counts, port, realweb)
            site[(address, page_path(i).encode())] = _response(body)
            size += len(body)
        if realweb:
            for path, answer in extra_responses(address, port, counts[h], page_path, _response).items():
                site[(address, path)] = answer
    return site, size


class RequestLog:
    """Lines kept in memory and appended to the log file every half second."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lines: list[str] = []

    def add(self, arrived: float, answered: float, host: str, status: int, path: bytes) -> None:
        self.lines.append(f"{arrived:.6f} {answered:.6f} {host} {status} {path.decode(errors='replace')}\n")

    def flush(self) -> None:
        if self.lines:
            self.out.write("".join(self.lines))
            self.lines.clear()
        self.out.flush()

    async def flush_every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            self.flush()


class BroadSite:
    """Serves the pages of :func:`build_site`; each answer waits ``latency`` seconds first."""

    def __init__(self, site: dict[tuple[str, bytes], bytes], latency: float, log: RequestLog) -> None:
        self.site, self.latency, self.log = site, latency, log
        self.not_found = _response(_NOT_FOUND, "404 Not Found")

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host = writer.get_extra_info("sockname")[0]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                arrived = time.monotonic()
                path = head[: head.index(b"\r\n")].split(b" ", 2)[1].split(b"?", 1)[0].split(b"#", 1)[0]
                response = self.site.get((host, path))
                if self.latency:
                    await asyncio.sleep(self.latency)
                writer.write(response or self.not_found)
                await writer.drain()
                status = int(response[9:12]) if response else 404
                self.log.add(arrived, time.monotonic(), host, status, path)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError, IndexError):
            pass
        finally:
            writer.close()


def listen_all(hosts: list[str]) -> tuple[int, list[socket.socket]]:
    """A socket on the same free port of every address (tried again on a clash)."""
    for _ in range(20):
        first = socket.create_server((hosts[0], 0), backlog=256)
        port, sockets = first.getsockname()[1], [first]
        try:
            sockets += [socket.create_server((host, port), backlog=256) for host in hosts[1:]]
        except OSError:
            for s in sockets:
                s.close()
            continue
        return port, sockets
    raise OSError("no port free on every address")


async def serve(args: argparse.Namespace) -> None:
    hosts = addresses(args.hosts)
    counts = pages_per_host(args.hosts, args.pages_per_host, args.skew)
    port, sockets = listen_all(hosts)
    with open(args.log, "w", encoding="utf-8", buffering=1 << 20) as out:
        log = RequestLog(out)
        pages, size = build_site(hosts, counts, port, args.seed, args.realweb)
        site = BroadSite(pages, args.latency, log)
        servers = [await asyncio.start_server(site.handle, sock=s, limit=64 * 1024) for s in sockets]
        flusher = asyncio.create_task(log.flush_every(0.5))
        print(f"listening {port} {sum(counts)} {size}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        flusher.cancel()
        for server in servers:
            server.close()
        log.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--pages-per-host", type=int, default=30)
    parser.add_argument("--skew", type=float, default=1.0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--realweb", action="store_true", help="robots.txt, disallowed links, errors, "
                        "redirects (broad_realweb.py)")
    asyncio.run(serve(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
