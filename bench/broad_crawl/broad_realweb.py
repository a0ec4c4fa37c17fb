"""bench/broad --realweb: the broad polite crawl on hosts that serve what real sites serve.

Every host answers ``/robots.txt`` (``Disallow: /private/`` and a ``Sitemap`` line), and its
pages link, besides their pages, to disallowed paths (``/private/<i>``: two per page), to
``/gone/<i>`` (410) and ``/old/<i>`` (a 301 to a page) on every fifth page, and from its
root to ``/boom`` (500, always: retried by both crawlers). Each crawler runs with its
defaults (robots.txt obeyed; crawler_tasks at its default host concurrency, the private
network guard on with the loopback allowed) and the benchmark's delay.

The figures come from the site's request log, the same yardstick for every crawler:
requests per second over the log's span against the politeness limit (M hosts ÷ delay,
or less when the host with the most requests needs longer), the disallowed requests (must
be 0) and the gaps under the delay.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

#: Every page links this many disallowed paths.
DISALLOWED_PER_PAGE = 2
#: Every n-th page links a 410 and a redirect.
ERRORS_EVERY = 5
ROBOTS = "User-agent: *\nDisallow: /private/\nSitemap: http://{host}:{port}/sitemap.xml\n"


def extra_links(i: int, count: int) -> list[str]:
    """The links page ``i`` of a host of ``count`` pages has besides its own."""
    links = [f"/private/{i}-{k}" for k in range(DISALLOWED_PER_PAGE)]
    if i % ERRORS_EVERY == 0:
        links += [f"/gone/{i}", f"/old/{(i + 1) % count}"]
    if i == 0:
        links.append("/boom")
    return links


def extra_responses(host: str, port: int, count: int, page_path: Any,
                    response: Any) -> dict[bytes, bytes]:
    """Path -> full response of what a host serves besides its pages."""
    out = {b"/robots.txt": response(ROBOTS.format(host=host, port=port).encode(), "200 OK", "text/plain"),
           b"/boom": response(b"<html><body>boom</body></html>", "500 Internal Server Error")}
    for i in range(0, count, ERRORS_EVERY):
        out[f"/gone/{i}".encode()] = response(b"<html><body>gone</body></html>", "410 Gone")
        target = page_path((i + 1) % count)
        out[f"/old/{(i + 1) % count}".encode()] = response(b"", "301 Moved Permanently", location=target)
    return out


@dataclass
class RealwebFigures:
    """What the server's log says of one crawl of the real-web site."""

    requests: int = 0
    pages: int = 0  # distinct pages answered 200 (robots.txt left out)
    disallowed: int = 0  # requests to /private/: robots.txt disallows them
    span_s: float = 0.0
    requests_per_s: float = 0.0  # over the span
    steady_requests_per_s: float | None = None
    limit_per_s: float = 0.0  # the politeness limit for the requests each host had
    most_per_host: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def figures(hits: list[Any], delay: float, latency: float, hosts: int) -> RealwebFigures:
    """The figures of one run's log (``hits``: broad_log.Hit, in arrival order)."""
    fig = RealwebFigures(requests=len(hits))
    if not hits:
        return fig
    fig.pages = len({(h.host, h.path) for h in hits if h.status == 200 and h.path != "/robots.txt"})
    fig.disallowed = sum(h.path.startswith("/private/") for h in hits)
    fig.span_s = hits[-1].arrived - hits[0].arrived
    fig.requests_per_s = (len(hits) - 1) / fig.span_s if fig.span_s > 0 else 0.0
    times = [h.arrived for h in hits]
    i, j = len(times) // 10, len(times) * 9 // 10 - 1
    if j > i and times[j] > times[i]:
        fig.steady_requests_per_s = (j - i) / (times[j] - times[i])
    per_host = Counter(h.host for h in hits)
    fig.most_per_host = max(per_host.values())
    spacing = max(delay, latency)
    longest = (fig.most_per_host - 1) * spacing + latency
    fig.limit_per_s = min(hosts / spacing, len(hits) / longest) if longest > 0 else hosts / spacing
    return fig


HEADER = ("| Row | Requests | Pages (of {pages}) | Disallowed fetched | Span s | Requests/s | Limit/s "
          "| ÷ limit | Steady ÷ limit | CPU ms/request | Min gap s | Gaps < 0.95 d | Max in flight/host |")


def table(rows: list[Any], runs: list[Any], pages: int) -> str:
    """The realweb table: medians over the good runs of each row, the worst politeness."""
    header = HEADER.format(pages=f"{pages:,}")
    lines = [header, "|" + "---|" * (header.count(" | ") + 1)]
    for row in rows:
        ok = [r for r in runs if r.row == row and r.ok and "realweb" in r.result.notes]
        if not ok:
            lines.append(f"| {row.label}: failed |" + " – |" * 12)
            continue
        rw = [r.result.notes["realweb"] for r in ok]

        def med(name: str, rw: list[dict[str, Any]] = rw) -> float:
            values = [f[name] for f in rw if f[name] is not None]
            return statistics.median(values) if values else 0.0

        cpu = statistics.median(r.result.cpu_s * 1000 / max(1, f["requests"])
                                for r, f in zip(ok, rw, strict=True))
        gaps = [r.log.min_gap_s for r in ok if r.log.min_gap_s is not None]
        cells = [row.label, f"{med('requests'):,.0f}", f"{med('pages'):,.0f}", f"{max(f['disallowed'] for f in rw)}",
                 f"{med('span_s'):.1f}", f"{med('requests_per_s'):.1f}", f"{med('limit_per_s'):.1f}",
                 f"{med('requests_per_s') / med('limit_per_s'):.2f}",
                 f"{med('steady_requests_per_s') / med('limit_per_s'):.2f}", f"{cpu:.2f}",
                 f"{min(gaps):.3f}" if gaps else "–",
                 f"{max(r.log.gaps_under_tolerance for r in ok):,} of {max(r.log.gaps for r in ok):,}",
                 str(max(r.log.max_in_flight_per_host for r in ok))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
