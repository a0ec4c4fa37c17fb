"""A generated local web site for the quick start and the benchmark (127.0.0.1 only)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def page_html(n: int, pages: int, fanout: int = 5, filler: int = 40) -> bytes:
    """Page ``n`` of a site of ``pages``: links to the next ``fanout`` pages and to page 0."""
    links = "".join(f'<li><a href="/page/{(n * fanout + k) % pages}">page {(n * fanout + k) % pages}</a></li>'
                    for k in range(1, fanout + 1))
    words = " ".join(f"word{(n + i) % 997}" for i in range(filler))
    return (f"<!doctype html><html><head><meta charset=utf-8><title>Page {n}</title></head>"
            f"<body><h1>Page {n}</h1><p>{words}</p><ul>{links}</ul>"
            f'<a href="/page/0#top">home</a></body></html>').encode()


class DemoSite:
    """Serves ``pages`` linked HTML pages at ``/page/<n>`` from a background thread."""

    def __init__(self, pages: int = 200, port: int = 0) -> None:
        self.pages = pages
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in separate writes

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                body = site.render(self.path)
                self.send_response(200 if body is not None else 404)
                body = body if body is not None else b"not found"
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def render(self, path: str) -> bytes | None:
        if path in ("/", ""):
            return page_html(0, self.pages)
        if path.startswith("/page/") and path[6:].isdigit() and int(path[6:]) < self.pages:
            return page_html(int(path[6:]), self.pages)
        return None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def __enter__(self) -> DemoSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
