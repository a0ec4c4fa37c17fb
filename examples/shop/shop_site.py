"""A small product catalogue served on loopback: list pages (with pagination) link
to product pages; a few products have no price. ``python shop_site.py --port 8765``.
"""

from __future__ import annotations

import argparse
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PRODUCTS = 12
PER_PAGE = 5
#: Products shown without a price (the example's pipeline drops them).
UNPRICED = frozenset({4, 9})


def price(n: int) -> str:
    return f"${1000 + 37 * n:,}.{n % 100:02d}"


def list_page(page: int) -> str:
    first = (page - 1) * PER_PAGE + 1
    items = "".join(f'<li><a class="product" href="/product/{n}">Product {n}</a></li>'
                    for n in range(first, min(first + PER_PAGE, PRODUCTS + 1)))
    more = page * PER_PAGE < PRODUCTS
    nxt = f'<a rel="next" href="/list/{page + 1}">next</a>' if more else ""
    return (f"<html><head><title>Catalogue, page {page}</title></head><body>"
            f'<ul>{items}</ul>{nxt} <a href="/about">About us</a></body></html>')


def product_page(n: int) -> str:
    shown = "" if n in UNPRICED else f'<span class="price">{price(n)}</span>'
    return (f"<html><head><title>Product {n}</title></head><body>"
            f'<h1 class="name">Product {n}</h1>{shown}<span class="sku">SKU-{n:04d}</span>'
            f'<a href="/list/1">back to the catalogue</a></body></html>')


def route(path: str) -> tuple[int, str]:
    if path in ("/", "/list/1"):
        return 200, list_page(1)
    if path.startswith("/list/") and path[6:].isdigit() and 1 <= int(path[6:]) <= -(-PRODUCTS // PER_PAGE):
        return 200, list_page(int(path[6:]))
    if path.startswith("/product/") and path[9:].isdigit() and 1 <= int(path[9:]) <= PRODUCTS:
        return 200, product_page(int(path[9:]))
    if path == "/about":
        return 200, "<html><head><title>About the shop</title></head><body>We sell products.</body></html>"
    if path == "/robots.txt":
        return 200, "User-agent: *\nAllow: /\n"
    return 404, "<html><body>not found</body></html>"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802
        status, text = route(self.path.split("?", 1)[0])
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if self.path == "/robots.txt" else "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def serve(port: int = 0) -> ThreadingHTTPServer:
    """The shop on 127.0.0.1:``port`` (0: any free port), served from a thread."""
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8765)
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"shop at http://127.0.0.1:{port}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
