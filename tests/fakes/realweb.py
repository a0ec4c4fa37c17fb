"""A test bed of many hosts that serve what real sites serve, each on its own 127.0.0.x.

Every host answers:

- ``/robots.txt`` with ``Disallow: /private/`` and ``Disallow: /cart``, a ``Sitemap`` line,
  and (the first host) a ``Crawl-delay``; every page links to disallowed paths;
- pages ``/p/<n>`` linking onwards, with duplicate spellings of the same URL (query
  order, a fragment), a ``rel=nofollow`` link, links to a PDF and an image;
- ``/missing`` 404, ``/gone`` 410, ``/boom`` 500 (always), ``/busy`` 503 once then 200,
  ``/limited`` 429 with ``Retry-After: 1`` once then 200;
- ``/old`` 301 to ``/older``, which 302s to the relative ``p/1``; ``/away`` 302s to the
  next host's ``/p/0``; ``/p/2/`` (trailing slash) 301s to ``/p/2``;
- ``/based`` with ``<base href="/p/">`` and a relative link; ``/latin1`` in ISO-8859-1;
- the second host answers every request after :attr:`RealWeb.slow_s`; the third serves a
  5 MiB page at ``/big``.

``wide=True`` links every page from the index (many fetches wait for each host at once).
``disallowed=False`` builds the same web without the links to disallowed paths (the
crawl the defaults are held against). :meth:`RealWeb.expected` is every URL a polite
crawl stores, :meth:`RealWeb.hits` what each host was asked.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: Bytes of the large page.
BIG = 5 * 1024 * 1024
#: Paths that every host serves besides its pages (each linked from the index).
EXTRA = ("/missing", "/gone", "/boom", "/busy", "/limited", "/old", "/older", "/away",
         "/based", "/latin1", "/doc.pdf", "/logo.png")
DISALLOWED = ("/private/a", "/private/b", "/cart")


class RealWeb:
    """``hosts`` hosts of ``pages`` pages each, served from threads (see the module doc)."""

    def __init__(self, hosts: int = 4, pages: int = 8, *, disallowed: bool = True,
                 slow_s: float = 0.3, first_ip: int = 60, crawl_delay: float = 0.1,
                 wide: bool = False) -> None:
        self.pages, self.disallowed, self.slow_s, self.crawl_delay = pages, disallowed, slow_s, crawl_delay
        #: The index links every page at once (a crawl with many fetches waiting per host).
        self.wide = wide
        self.counts: list[Counter[str]] = [Counter() for _ in range(hosts)]
        self.lock = threading.Lock()
        self.servers: list[ThreadingHTTPServer] = []
        for i in range(hosts):
            self.servers.append(self._server(i, f"127.0.0.{first_ip + i}"))

    def _server(self, index: int, ip: str) -> ThreadingHTTPServer:
        web = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                web.answer(index, self)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer((ip, 0), Handler)
        server.daemon_threads = True
        return server

    def start(self) -> RealWeb:
        for s in self.servers:
            threading.Thread(target=s.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        for s in self.servers:
            s.shutdown()
            s.server_close()

    def base(self, index: int) -> str:
        host, port = self.servers[index].server_address[:2]
        return f"http://{host}:{port}"

    @property
    def seeds(self) -> list[str]:
        return [self.base(i) + "/" for i in range(len(self.servers))]

    @property
    def hosts(self) -> list[str]:
        """The politeness keys (``host:port``) of the hosts."""
        return [self.base(i).removeprefix("http://") for i in range(len(self.servers))]

    def assert_crawled_politely(self, urls: list[str], disallowed_counted: int) -> None:
        """Assert what a polite crawl of the seeds leaves: every allowed page stored once
        (``urls``), no disallowed page fetched, each robots.txt fetched once, and the
        crawl's ``robots/disallowed`` counter (``disallowed_counted``) one per disallowed link."""
        from crawler_tasks.core.urls import canonicalize_url

        stored = sorted(canonicalize_url(u) for u in urls)
        disallowed = {canonicalize_url(self.base(i) + p) for i in range(len(self.servers)) for p in DISALLOWED}
        assert len(stored) == len(set(stored)), "a page stored twice"
        assert set(stored) - disallowed == {canonicalize_url(u) for u in self.expected()}
        for i in range(len(self.servers)):
            hits = self.hits(i)
            assert not [p for p in hits if p.startswith(("/private/", "/cart"))], "a disallowed page was fetched"
            assert hits["/robots.txt"] == 1
        assert disallowed_counted == len(disallowed)

    def hits(self, index: int) -> Counter[str]:
        with self.lock:
            return Counter(self.counts[index])

    def expected(self) -> set[str]:
        """Every URL a crawl of the seeds stores a record of (robots.txt obeyed): each page,
        error and redirect (redirects as records of their own), never a disallowed one."""
        urls: set[str] = set()
        for i in range(len(self.servers)):
            b = self.base(i)
            urls |= {b + "/"} | {f"{b}/p/{n}" for n in range(self.pages)} | {b + p for p in EXTRA}
            urls |= {f"{b}/p/2/", f"{b}/p/0?a=1&b=2"}  # the query's two spellings are one URL
            if i == 2:
                urls.add(b + "/big")
        return urls

    # -- serving -----------------------------------------------------------
    def answer(self, index: int, h: BaseHTTPRequestHandler) -> None:
        path = h.path
        with self.lock:
            self.counts[index][path] += 1
            seen = self.counts[index][path]
        if index == 1:
            time.sleep(self.slow_s)
        status, headers, body = self.route(index, path, seen)
        h.send_response(status)
        headers = {"Content-Type": "text/html; charset=utf-8", "Content-Length": str(len(body)), **headers}
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def route(self, index: int, path: str, seen: int) -> tuple[int, dict[str, str], bytes]:
        b = self.base(index)
        if path == "/robots.txt":
            lines = ["User-agent: *", "Disallow: /private/", "Disallow: /cart"]
            if index == 0:
                lines.append(f"Crawl-delay: {self.crawl_delay}")
            lines.append(f"Sitemap: {b}/sitemap.xml")
            return 200, {"Content-Type": "text/plain"}, ("\n".join(lines) + "\n").encode()
        if path.split("?")[0] == "/":
            links = [f"/p/{n}" for n in range(self.pages if self.wide else min(2, self.pages))] + list(EXTRA)
            if index == 2:
                links.append("/big")
            return 200, {}, self.page("index", links)
        if path.startswith("/p/") and path.rstrip("/") != path:
            return 301, {"Location": path.rstrip("/")}, b""
        if path.split("?")[0].startswith("/p/"):
            n = int(path.split("?")[0][3:])
            nxt = [f"/p/{k}" for k in (2 * n + 1, 2 * n + 2) if k < self.pages]
            dupes = ["/p/0?b=2&a=1", "/p/0?a=1&b=2", f"/p/{n}#top", "/p/2/"]
            return 200, {}, self.page(f"page {n}", nxt + dupes, nofollow="/nofollow")
        return self.special(index, path, seen)

    def special(self, index: int, path: str, seen: int) -> tuple[int, dict[str, str], bytes]:
        if path == "/gone":
            return 410, {}, b"gone"
        if path == "/boom":
            return 500, {}, b"boom"
        if path == "/busy" and seen == 1:
            return 503, {"Retry-After": "1"}, b"busy"
        if path == "/limited" and seen == 1:
            return 429, {"Retry-After": "1"}, b"slow down"
        if path in ("/busy", "/limited"):
            return 200, {}, self.page(path, [])
        if path == "/old":
            return 301, {"Location": "/older"}, b""
        if path == "/older":
            return 302, {"Location": "p/1"}, b""
        if path == "/away":
            return 302, {"Location": self.base((index + 1) % len(self.servers)) + "/p/0"}, b""
        if path == "/based":
            body = b'<html><head><base href="/p/"></head><body><a href="1">one</a></body></html>'
            return 200, {}, body
        if path == "/latin1":
            body = "<html><head><title>caf\u00e9 cr\u00e8me</title></head><body>d\u00e9j\u00e0</body></html>"
            return 200, {"Content-Type": "text/html; charset=iso-8859-1"}, body.encode("latin-1")
        if path == "/doc.pdf":
            return 200, {"Content-Type": "application/pdf"}, b"%PDF-1.4\n%\xe2\xe3\n1 0 obj\n<<>>\nendobj\n"
        if path == "/logo.png":
            return 200, {"Content-Type": "image/png"}, b"\x89PNG\r\n\x1a\n" + b"\0" * 64
        if path == "/big" and index == 2:
            filler = b"<p>" + b"x" * 1000 + b"</p>\n"
            body = b"<html><body>" + filler * (BIG // len(filler)) + b"</body></html>"
            return 200, {}, body
        return 404, {}, b"not found"

    def page(self, title: str, links: list[str], *, nofollow: str | None = None) -> bytes:
        if self.disallowed:
            links = links + list(DISALLOWED)
        anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
        if nofollow:
            anchors += f'<a rel="nofollow" href="{nofollow}">no</a>'
        return f"<html><head><title>{title}</title></head><body>{anchors}</body></html>".encode()
