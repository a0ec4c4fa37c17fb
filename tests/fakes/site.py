"""The local web site the tests crawl, served on 127.0.0.1 (or another loopback address) from a thread.

Every path is deterministic; paths take a token segment where a test needs
state of its own (e.g. ``/flaky/<token>`` fails twice per token).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections import Counter
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

GBK_TITLE = "中文网页标题"
SJIS_TITLE = "日本語のページ"


def html(title: str, body: str = "", head: str = "") -> bytes:
    return (f"<html><head><title>{title}</title>{head}</head><body>{body}</body></html>").encode()


def links(*hrefs: str) -> str:
    return "".join(f'<a href="{h}">{h}</a> ' for h in hrefs)


class Site:
    """Routes by path prefix; records every hit as (path, monotonic time)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.hits: list[tuple[str, float]] = []
        self.counts: Counter[str] = Counter()
        #: (path, If-None-Match, If-Modified-Since) of each /validated request.
        self.validators: list[tuple[str, str | None, str | None]] = []
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in separate writes

            def do_GET(self) -> None:  # noqa: N802
                site.handle(self)

            def do_HEAD(self) -> None:  # noqa: N802
                site.handle(self, head=True)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.server.server_address[1]}"

    def start(self) -> Site:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def paths(self, prefix: str = "") -> list[str]:
        with self.lock:
            return [p for p, _ in self.hits if p.startswith(prefix)]

    def times(self, path: str) -> list[float]:
        with self.lock:
            return [t for p, t in self.hits if p == path]

    # -- routing ---------------------------------------------------------
    def handle(self, h: BaseHTTPRequestHandler, head: bool = False) -> None:
        with self.lock:
            self.hits.append((h.path, time.monotonic()))
            self.counts[h.path] += 1
            count = self.counts[h.path]
        parts = urlsplit(h.path)
        segs = [s for s in parts.path.split("/") if s]
        kind = segs[0] if segs else "index"
        route = getattr(self, f"r_{kind.replace('-', '_')}", None)
        if route is None:
            return self.send(h, 404, html("Not found"), head=head)
        route(h, segs[1:], parse_qs(parts.query), count, head)

    def send(self, h: BaseHTTPRequestHandler, status: int, body: bytes,
             ctype: str = "text/html", headers: dict[str, str] | None = None,
             head: bool = False) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        if not head:
            try:
                h.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

    def r_validated(self, h, segs, q, count, head):
        """A page with an ETag and a Last-Modified that answers 304 when they still match;
        its content changes (version 2) from hit number ``?change=N`` on (0 = never)."""
        change = int(q.get("change", ["0"])[0])
        version = 2 if change and count >= change else 1
        etag = f'"v{version}"'
        modified = f"Mon, 0{version} Jan 2024 00:00:00 GMT"
        with self.lock:
            self.validators.append((h.path, h.headers.get("If-None-Match"),
                                    h.headers.get("If-Modified-Since")))
        headers = {"ETag": etag, "Last-Modified": modified}
        if h.headers.get("If-None-Match") == etag:
            return self.send(h, 304, b"", headers=headers, head=True)
        self.send(h, 200, html(f"Version {version}"), headers=headers, head=head)

    def r_index(self, h, segs, q, count, head):
        self.send(h, 200, html("Index", links("/page/1", "/page/2")), head=head)

    def r_page(self, h, segs, q, count, head):
        delay = float(q.get("delay", ["0"])[0])
        time.sleep(delay)
        self.send(h, 200, html(f"Page {'/'.join(segs)}"), head=head)

    def r_rules(self, h, segs, q, count, head):
        """/rules/<token>/<name>: pages for the parse-rule tests; ``start`` links to the others,
        ``fail`` links to ``linked`` (followed even though its rule fails); ``failing`` links
        to a page of each kind of failure."""
        token, name = segs[0], segs[1]
        base = f"/rules/{token}"
        body = {"start": links(f"{base}/fail", f"{base}/odd", f"{base}/items"),
                "fail": links(f"{base}/linked"),
                "failing": links(f"{base}/fail", f"{base}/items", f"/broken/{token}",
                                 f"/mw/{token}/broken")}.get(name, "")
        self.send(h, 200, html(f"Rules {name}", body), head=head)

    def r_mw(self, h, segs, q, count, head):
        """/mw/<token>/<name>: pages for the middleware tests; ``start`` links to the others,
        ``ban`` is a ban page served with a 200 on its first two hits."""
        token, name = segs[0], segs[1]
        base = f"/mw/{token}"
        if name == "start":
            body = links(*(f"{base}/{n}" for n in ("plain", "drop", "swap", "ban", "broken", "offsite")))
        elif name == "ban" and count <= 2:
            body = "You are banned"
        else:
            body = f"Welcome to {name}"
        self.send(h, 200, html(f"Middleware {name}", body), head=head)

    def r_redirect(self, h, segs, q, count, head):
        # /redirect/<token>/<n>: n hops left
        token, n = segs[0], int(segs[1])
        if n == 0:
            return self.send(h, 200, html("Redirect target"), head=head)
        status = (301, 302, 307, 308)[n % 4]
        self.send(h, status, b"", headers={"Location": f"/redirect/{token}/{n - 1}"}, head=head)

    def r_loop(self, h, segs, q, count, head):
        token, side = segs[0], segs[1]
        self.send(h, 302, b"", headers={"Location": f"/loop/{token}/{'b' if side == 'a' else 'a'}"},
                  head=head)

    def r_flaky(self, h, segs, q, count, head):
        if count <= 2:
            return self.send(h, 503, html("Unavailable"), head=head)
        self.send(h, 200, html("Recovered"), head=head)

    def r_throttled(self, h, segs, q, count, head):
        if count == 1:
            return self.send(h, 429, html("Slow down"), headers={"Retry-After": "1"}, head=head)
        self.send(h, 200, html("Thanks for waiting"), head=head)

    def r_broken(self, h, segs, q, count, head):
        self.send(h, 500, html("Server error"), head=head)

    def r_reset(self, h, segs, q, count, head):
        """/reset/<token>: the connection is reset before any answer (a network failure)."""
        h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        h.connection.close()
        h.close_connection = True

    def r_slow(self, h, segs, q, count, head):
        time.sleep(3)
        self.send(h, 200, html("Too slow"), head=head)

    def r_huge(self, h, segs, q, count, head):
        total = 200 * 1024 * 1024
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Content-Length", str(total))
        h.end_headers()
        chunk = b"<p>" + b"x" * 65530 + b"</p>"
        try:
            for _ in range(total // len(chunk)):
                h.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def r_gbk(self, h, segs, q, count, head):
        body = html(GBK_TITLE, "<p>正文</p>", '<meta http-equiv="Content-Type" content="text/html; charset=gbk">')
        self.send(h, 200, body.decode().encode("gbk"), ctype="text/html", head=head)

    def r_sjis(self, h, segs, q, count, head):
        body = html(SJIS_TITLE, "<p>本文です</p>").decode().encode("shift_jis")
        self.send(h, 200, body, ctype="text/html; charset=Shift_JIS", head=head)

    def r_dups(self, h, segs, q, count, head):
        t = segs[0]
        body = html("Dups", links(f"/target/{t}?b=2&a=1", f"/target/{t}?a=1&b=2#frag",
                                  f"/target/{t}?a=1&b=2", f"/target/{t}?b=2&a=1#other"))
        self.send(h, 200, body, head=head)

    def r_target(self, h, segs, q, count, head):
        self.send(h, 200, html("Target"), head=head)

    def r_goto(self, h, segs, q, count, head):
        # /goto?to=URL: a redirect anywhere
        self.send(h, 302, b"", headers={"Location": q["to"][0]}, head=head)

    def r_sitemap(self, h, segs, q, count, head):
        # /sitemap?loc=URL&loc=URL...: a sitemap listing those URLs
        urls = "".join(f"<url><loc>{escape(loc)}</loc></url>" for loc in q.get("loc", []))
        body = ('<?xml version="1.0" encoding="UTF-8"?>'
                f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>').encode()
        self.send(h, 200, body, ctype="application/xml", head=head)

    def r_chain(self, h, segs, q, count, head):
        token, n = segs[0], int(segs[1])
        self.send(h, 200, html(f"Chain {n}", links(f"/chain/{token}/{n + 1}")), head=head)

    def r_nofollow(self, h, segs, q, count, head):
        t = segs[0]
        body = html("No follow", links(f"/page/{t}-hidden"), '<meta name="robots" content="noindex, nofollow">')
        self.send(h, 200, body, head=head)

    def r_relnofollow(self, h, segs, q, count, head):
        t = segs[0]
        body = html("Rel", f'<a rel="nofollow" href="/page/{t}-skip">x</a>'
                           f'<a href="/page/{t}-keep">y</a>'
                           f'<a href="mailto:a@b.c">m</a><a href="javascript:void(0)">j</a>'
                           f'<a href="tel:123">t</a><a href="data:text/html,hi">d</a>')
        self.send(h, 200, body, head=head)

    def r_data(self, h, segs, q, count, head):
        self.send(h, 200, b'{"links": ["/page/never"]}', ctype="application/json", head=head)

    def r_malformed(self, h, segs, q, count, head):
        t = segs[0]
        body = (f'<html><head><title>Broken</title><body></span><div><p>unclosed <a href="/page/{t}-m1">one'
                f'<table><tr><td><a href=/page/{t}-m2>two</td></div></div></html').encode()
        self.send(h, 200, body, head=head)

    def r_tree(self, h, segs, q, count, head):
        # /tree/<token>/<n>?size=N&delay=S: a binary tree of N pages, each slow by S
        token, n = segs[0], int(segs[1])
        size, delay = int(q.get("size", ["40"])[0]), float(q.get("delay", ["0"])[0])
        time.sleep(delay)
        kids = [k for k in (2 * n + 1, 2 * n + 2) if k < size]
        body = html(f"Tree {n}", links(*(f"/tree/{token}/{k}?size={size}&delay={delay}" for k in kids)))
        self.send(h, 200, body, head=head)

    def r_external(self, h, segs, q, count, head):
        t = segs[0]
        body = html("External", links("http://example.invalid/away", f"/page/{t}-inside"))
        self.send(h, 200, body, head=head)
