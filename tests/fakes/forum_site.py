"""A forum whose posts appear and change as the test says: the revisit scenario.

``/list/1`` links the posts published so far, newest first, with their view counts;
``/post/<n>`` shows post ``n`` (title, body, a view count that grows with every request,
and the time of the request). Posts with an odd number answer ``If-None-Match`` with
``304 Not Modified`` while their body is unchanged; even ones send no validator, so only
their text tells. ``/robots.txt`` disallows ``/admin/``, which the list links too.
The test moves the forum on with :meth:`publish` and :meth:`edit`.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ForumSite:
    def __init__(self) -> None:
        self.bodies: dict[int, str] = {}
        self.versions: dict[int, int] = {}
        self.views = 0
        self.hits: list[tuple[str, int]] = []  # (path, status)
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

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def publish(self, n: int, body: str) -> None:
        with self.lock:
            self.bodies[n], self.versions[n] = body, 1

    def edit(self, n: int, body: str) -> None:
        with self.lock:
            self.bodies[n], self.versions[n] = body, self.versions[n] + 1

    def fetched(self, path: str) -> list[int]:
        """The statuses ``path`` was answered with, in order."""
        with self.lock:
            return [status for p, status in self.hits if p == path]

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path
        with self.lock:
            self.views += 1
            status, body, headers = self._answer(path, h.headers.get("If-None-Match"))
            self.hits.append((path, status))
        data = body.encode()
        h.send_response(status)
        for name, value in {"Content-Type": "text/html; charset=utf-8", **headers}.items():
            h.send_header(name, value)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _answer(self, path: str, etag: str | None) -> tuple[int, str, dict[str, str]]:
        stamp = f"Now {time.strftime('%H:%M:%S')}, {self.views} views."
        if path == "/robots.txt":
            return 200, "User-agent: *\nDisallow: /admin/\n", {"Content-Type": "text/plain"}
        if path == "/list/1":
            items = "".join(f'<li><a href="/post/{n}">Post {n}</a> ({self.views + n} views)</li>'
                            for n in sorted(self.bodies, reverse=True))
            return 200, f"<html><body><h1>Forum</h1><ul>{items}</ul><a href='/admin/'>admin</a>" \
                        f"<p>{stamp}</p></body></html>", {}
        if path.startswith("/post/") and path[6:].isdigit() and int(path[6:]) in self.bodies:
            n = int(path[6:])
            tag = f'"p{n}v{self.versions[n]}"'
            headers = {"ETag": tag} if n % 2 else {}
            if n % 2 and etag == tag:
                return 304, "", headers
            return 200, (f"<html><head><title>Post {n}</title></head><body><h1>Post {n}</h1>"
                         f"<div class='body'>{self.bodies[n]}</div><p>{stamp}</p>"
                         f"<a href='/list/1'>back</a></body></html>"), headers
        return 404, "<html><body>not found</body></html>", {}
