"""A bookshop served on loopback, as books.toscrape.com is laid out: a home page, catalogue
pages of 10 books with pagination, 51 book pages (8 out of stock, prices such as
``£1,021.03``), pages a crawl should ignore, a robots.txt that disallows ``/cart``, a
withdrawn book (410), a missing one (404) and a link that always answers 500. Every
page but robots.txt answers 403 to a request without the ``X-Shop-Client`` header.

``python bookshop_site.py --port 8766``.
"""

from __future__ import annotations

import argparse
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BOOKS = 51
PER_PAGE = 10
PAGES = -(-BOOKS // PER_PAGE)
OUT_OF_STOCK = frozenset({3, 7, 12, 20, 28, 33, 41, 50})
#: The header every request must carry.
CLIENT_HEADER = "X-Shop-Client"


def title(n: int) -> str:
    return f"Book {n}: a tale of {n} pages"


def price(n: int) -> str:
    """The price as shown: ``£1,021.03`` for book 1."""
    return f"£{(997 * n + 24) % 1500 + n / 100 + (1000 if n % 5 == 1 else 0):,.2f}"


def upc(n: int) -> str:
    return f"a{n:05d}ff"


def _page(head: str, body: str) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{head} | Bookshop</title></head>"
            f"<body><header><a href='/'>Bookshop</a> <a href='/about'>About</a> <a href='/cart'>Cart</a>"
            f"</header>{body}<footer><a href='/terms'>Terms</a></footer></body></html>")


def home() -> str:
    return _page("Home", "<h1>Welcome</h1><a class='catalogue' href='/catalogue/page-1.html'>All books</a>"
                         "<a href='/catalogue/withdrawn.html'>A withdrawn book</a>"
                         "<a href='/catalogue/missing.html'>A book we lost</a>"
                         "<a href='/broken'>Our broken page</a>")


def catalogue(page: int) -> str:
    first = (page - 1) * PER_PAGE + 1
    pods = "".join(
        f"<article class='product_pod'><h3><a href='book-{n}.html' title='{title(n)}'>{title(n)[:12]}...</a></h3>"
        f"<div class='product_price'><p class='price_color'>{price(n)}</p></div></article>"
        for n in range(first, min(first + PER_PAGE, BOOKS + 1)))
    nxt = f"<li class='next'><a href='page-{page + 1}.html'>next</a></li>" if page < PAGES else ""
    prev = f"<li class='previous'><a href='page-{page - 1}.html'>previous</a></li>" if page > 1 else ""
    return _page(f"All books, page {page}", f"<ol class='row'>{pods}</ol><ul class='pager'>{prev}{nxt}</ul>")


def book(n: int) -> str:
    stock = "Out of stock" if n in OUT_OF_STOCK else "In stock (5 available)"
    return _page(title(n), f"<article class='product_page'><h1>{title(n)}</h1>"
                           f"<p class='price_color'>{price(n)}</p><p class='availability'>\n    {stock}\n</p>"
                           f"<table class='table'><tr><th>UPC</th><td>{upc(n)}</td></tr>"
                           f"<tr><th>Product Type</th><td>Books</td></tr></table>"
                           f"<a href='page-1.html'>Back to the catalogue</a></article>")


def route(path: str) -> tuple[int, str]:
    """The status and HTML of ``path``."""
    if path in ("/", "/index.html"):
        return 200, home()
    if path.startswith("/catalogue/page-") and path.endswith(".html"):
        n = path[len("/catalogue/page-"):-5]
        if n.isdigit() and 1 <= int(n) <= PAGES:
            return 200, catalogue(int(n))
    if path.startswith("/catalogue/book-") and path.endswith(".html"):
        n = path[len("/catalogue/book-"):-5]
        if n.isdigit() and 1 <= int(n) <= BOOKS:
            return 200, book(int(n))
    if path == "/catalogue/withdrawn.html":
        return 410, _page("Withdrawn", "<h1 class='withdrawn'>Book 99: withdrawn from sale</h1>")
    if path == "/broken":
        return 500, _page("Error", "<h1>Something broke</h1>")
    if path in ("/about", "/terms", "/cart"):
        return 200, _page(path[1:].title(), f"<h1>{path[1:]}</h1>")
    return 404, _page("Not found", "<h1>Not found</h1>")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        if path == "/robots.txt":
            status, text, kind = 200, "User-agent: *\nDisallow: /cart\n", "text/plain"
        elif self.headers.get(CLIENT_HEADER) is None:
            status, text, kind = 403, _page("Forbidden", f"<h1>Send {CLIENT_HEADER}</h1>"), "text/html; charset=utf-8"
        else:
            (status, text), kind = route(path), "text/html; charset=utf-8"
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def serve(port: int = 0) -> ThreadingHTTPServer:
    """The bookshop on 127.0.0.1:``port`` (0: any free port), served from a thread."""
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8766)
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"bookshop at http://127.0.0.1:{port}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
