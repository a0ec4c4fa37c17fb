"""A small site that keeps an access log, for the politeness tests: one instance is one host.

``/p/<n>`` is page ``n`` of a binary tree of ``pages`` pages (links to
``2n+1`` and ``2n+2``, plus ``extra_links`` on page 0); each answer takes
``latency`` seconds. ``/robots.txt`` answers what the test set in ``robots``
(a list of ``(status, body, sleep)``, taken in turn, the last one repeated);
``/limited/<n>`` answers 429 with ``Retry-After`` the first time.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Hit:
    path: str
    start: float  # time.time()
    end: float
    status: int
    via: str | None  # the Via header a proxy added
    sent: dict[str, str] = field(default_factory=dict)  # the request's headers


class PoliteSite:
    def __init__(self, pages: int = 20, latency: float = 0.0) -> None:
        self.pages = pages
        self.latency = latency
        self.robots: list[tuple[int, str, float]] = [(404, "", 0.0)]
        self.extra_links: list[str] = []
        #: path -> (status, body, headers) of other files (e.g. where robots.txt redirects).
        self.files: dict[str, tuple[int, str, dict[str, str]]] = {}
        self.ban_after: int | None = None  # answer 403 to direct requests after this many
        self.hits: list[Hit] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                site.handle(self)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def page_hits(self) -> list[Hit]:
        with self.lock:
            return sorted((h for h in self.hits if h.path.startswith(("/p/", "/limited/"))),
                          key=lambda h: h.start)

    def robots_hits(self) -> list[Hit]:
        with self.lock:
            return [h for h in self.hits if h.path == "/robots.txt"]

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        start = time.time()
        path = h.path.split("?")[0]
        if path.startswith("http://"):  # absolute form: not expected without a proxy
            path = "/" + path.split("/", 3)[-1]
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            direct = [x for x in self.hits if x.via is None and x.path != "/robots.txt"]
        status, done = 0, False
        try:
            status, body, headers, sleep = self.answer(path, h, len(direct))
            time.sleep(sleep)
            data = body.encode()
            h.send_response(status)
            for k, v in {"Content-Type": "text/html", "Content-Length": str(len(data)), **headers}.items():
                h.send_header(k, v)
            h.end_headers()
            # Out of flight before the body leaves: once the client has it, it may send its
            # next request before this thread runs again, and that would count as an overlap.
            self._done(path, start, status, h)
            done = True
            h.wfile.write(data)
        finally:
            if not done:
                self._done(path, start, status, h)

    def _done(self, path: str, start: float, status: int, h: BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.in_flight -= 1
            self.hits.append(Hit(path, start, time.time(), status, h.headers.get("Via"), dict(h.headers)))

    def answer(self, path: str, h: BaseHTTPRequestHandler, direct: int) -> tuple[int, str, dict, float]:
        if path == "/robots.txt":
            with self.lock:
                status, body, sleep = self.robots[0] if len(self.robots) == 1 else self.robots.pop(0)
            if status in (301, 302, 307, 308):  # ``body`` is where it redirects
                return status, "", {"Location": body}, sleep
            return status, body, {"Content-Type": "text/plain"}, sleep
        if path in self.files:
            status, body, headers = self.files[path]
            return status, body, headers, 0.0
        if self.ban_after is not None and h.headers.get("Via") is None and direct >= self.ban_after:
            return 403, "<html><body>Access denied</body></html>", {}, 0.0
        if path.startswith("/limited/"):
            with self.lock:
                first = not any(x.path == path for x in self.hits)
            if first:
                return 429, "slow down", {"Retry-After": "2"}, 0.0
            return 200, "<html><body>ok</body></html>", {}, self.latency
        if path.startswith("/p/"):
            n = int(path[3:] or 0)
            kids = [f"/p/{k}" for k in (2 * n + 1, 2 * n + 2) if k < self.pages]
            if n == 0:
                kids += self.extra_links
            links = "".join(f'<a href="{k}">{k}</a> ' for k in kids)
            return 200, f"<html><head><title>p{n}</title></head><body>{links}</body></html>", {}, self.latency
        return 404, "not found", {}, 0.0
