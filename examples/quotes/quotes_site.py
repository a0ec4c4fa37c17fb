"""Quotes served on loopback, laid out as quotes.toscrape.com is: pages of 10 quotes with
pagination, author pages, tag pages, and a JSON API (``/api/quotes?page=N``) of the same
quotes. ``python quotes_site.py --port 8767``.
"""

from __future__ import annotations

import argparse
import html
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

AUTHORS = {
    "albert-einstein": ("Albert Einstein", "March 14, 1879", "Born in Ulm, in the Kingdom of Württemberg."),
    "jane-austen": ("Jane Austen", "December 16, 1775", "English novelist of the landed gentry."),
    "marilyn-monroe": ("Marilyn Monroe", "June 01, 1926", "Actress, model and singer."),
    "andre-gide": ("André Gide", "November 22, 1869", "French author, Nobel Prize in Literature 1947."),
    "thomas-a-edison": ("Thomas A. Edison", "February 11, 1847", "Inventor of the phonograph."),
}
TAGS = ("change", "deep-thoughts", "thinking", "world", "life", "love", "humor", "books", "inspirational")
PER_PAGE = 10


def _quote(n: int) -> dict:
    slug = list(AUTHORS)[n % len(AUTHORS)]
    tags = [TAGS[(n + k) % len(TAGS)] for k in range(n % 3 + 1)]
    return {"text": f"“Quote number {n}: what we think, we become & more.”", "author": slug, "tags": tags}


QUOTES = [_quote(n) for n in range(1, 48)]  # 47 quotes: five pages, the last one short
PAGES = -(-len(QUOTES) // PER_PAGE)


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='UTF-8'><title>{title}</title></head>"
            f"<body><div class='container'><div class='header-box'><h1><a href='/'>Quotes to Scrape</a></h1>"
            f"<a href='/login'>Login</a></div>{body}</div></body></html>")


def quote_div(q: dict) -> str:
    name = AUTHORS[q["author"]][0]
    tags = "".join(f"<a class='tag' href='/tag/{t}/page/1/'>{t}</a>" for t in q["tags"])
    return (f"<div class='quote'><span class='text'>{html.escape(q['text'])}</span>"
            f"<span>by <small class='author'>{html.escape(name)}</small>"
            f" <a href='/author/{q['author']}'>(about)</a></span>"
            f"<div class='tags'>Tags: {tags}</div></div>")


def list_page(n: int) -> str:
    shown = QUOTES[(n - 1) * PER_PAGE:n * PER_PAGE]
    nxt = f"<li class='next'><a href='/page/{n + 1}/'>Next <span>→</span></a></li>" if n < PAGES else ""
    return _page("Quotes to Scrape", "".join(quote_div(q) for q in shown) + f"<nav><ul class='pager'>{nxt}</ul></nav>")


def author_page(slug: str) -> str:
    name, born, bio = AUTHORS[slug]
    return _page(name, f"<div class='author-details'><h3 class='author-title'>{html.escape(name)}</h3>"
                       f"<p>Born: <span class='author-born-date'>{born}</span></p>"
                       f"<div class='author-description'>\n  {html.escape(bio)}\n</div></div>")


def tag_page(tag: str) -> str:
    return _page(f"Quotes tagged {tag}", "".join(quote_div(q) for q in QUOTES if tag in q["tags"]))


def api_page(n: int) -> dict:
    shown = QUOTES[(n - 1) * PER_PAGE:n * PER_PAGE]
    return {"page": n, "has_next": n < PAGES,
            "quotes": [{"text": q["text"], "author": {"name": AUTHORS[q["author"]][0], "slug": q["author"]},
                        "tags": q["tags"]} for q in shown]}


def route(target: str) -> tuple[int, str, str]:
    """Status, content type and body of ``target`` (a path with its query)."""
    parts = urlsplit(target)
    path, query = parts.path, parse_qs(parts.query)
    html_type = "text/html; charset=utf-8"
    if path == "/robots.txt":
        return 200, "text/plain", "User-agent: *\nDisallow: /login\n"
    if path in ("/", "/page/1/"):
        return 200, html_type, list_page(1)
    if path.startswith("/page/") and path.endswith("/") and path[6:-1].isdigit() and 1 <= int(path[6:-1]) <= PAGES:
        return 200, html_type, list_page(int(path[6:-1]))
    if path.startswith("/author/") and path[8:].rstrip("/") in AUTHORS:
        return 200, html_type, author_page(path[8:].rstrip("/"))
    if path.startswith("/tag/") and path.split("/")[2] in TAGS:
        return 200, html_type, tag_page(path.split("/")[2])
    if path == "/api/quotes":
        page = query.get("page", ["1"])[0]
        if page.isdigit() and 1 <= int(page) <= PAGES:
            return 200, "application/json", json.dumps(api_page(int(page)))
    return 404, html_type, _page("Not found", "<h1>Not found</h1>")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802
        status, kind, text = route(self.path)
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def serve(port: int = 0) -> ThreadingHTTPServer:
    """The site on 127.0.0.1:``port`` (0: any free port), served from a thread."""
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8767)
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"quotes at http://127.0.0.1:{port}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
