"""The bench site served with a timeline: when each request arrived and when its response
went out, for what a crawl looks like from the site (requests in flight over time).

    python bench/lib/timed_site.py ROOT LATENCY TIMES_JSON

serves ``ROOT`` (bench/lib/site_gen.py) as bench/lib/site_server.py does, prints
``listening <port>``, and on SIGTERM writes ``[[arrived, sent], ...]`` (monotonic
seconds) to ``TIMES_JSON``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import site_server  # noqa: E402


class TimedSite(site_server.SiteServer):
    """The bench site, noting (arrival, sent) of every request in ``times``."""

    def __init__(self, pages: dict[bytes, site_server.Response], latency: float) -> None:
        super().__init__(pages, latency)
        self.times: list[tuple[float, float]] = []

    def sent(self, arrived: float) -> None:
        self.times.append((arrived, time.monotonic()))


def in_flight(times: list[tuple[float, float]], middle: float = 0.8) -> tuple[float, float]:
    """Mean requests in flight at the site over the ``middle`` share of the crawl's span, and
    the requests a second that arrived in that window."""
    start, end = min(a for a, _ in times), max(b for _, b in times)
    margin = (end - start) * (1 - middle) / 2
    lo, hi = start + margin, end - margin
    busy = sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in times)
    return busy / (hi - lo), sum(1 for a, _ in times if lo <= a < hi) / (hi - lo)


async def _serve(root: Path, latency: float, out: Path) -> None:
    site = TimedSite(site_server.load_pages(root), latency)
    server = await asyncio.start_server(site.handle, host="127.0.0.1", port=0, backlog=1024,
                                        limit=64 * 1024)
    await site_server.serve_until_stopped(server)
    out.write_text(json.dumps(site.times))


if __name__ == "__main__":
    asyncio.run(_serve(Path(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3])))
