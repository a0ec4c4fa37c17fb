"""A site of N pages whose content and links exist only once their scripts ran, for bench/render.

    python bench/rendering/render_site.py --pages 2000 [--port 0]    # prints "render site at http://..."

Page ``/p/<n>`` is served as a shell: a title placeholder, empty ``<main>`` and ``<nav>``, and
``/app.js``. The script asks ``/api/<n>`` (JSON: a title, three paragraphs of about 2 KB, a
price) and builds the page from it, with links to the next five pages. A crawler that does not
run scripts sees neither the text nor the links. Each page also asks for an image and a web
font (a crawler that renders may block them). A threaded server, in a process of its own.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

APP_JS = b"""(function () {
  var n = parseInt(location.pathname.split("/")[2], 10);
  var xhr = new XMLHttpRequest();
  xhr.open("GET", "/api/" + n, false);
  xhr.send();
  var page = JSON.parse(xhr.responseText);
  document.title = page.title;
  var main = document.querySelector("main");
  var h1 = document.createElement("h1"); h1.textContent = page.title; main.appendChild(h1);
  page.paragraphs.forEach(function (text) {
    var p = document.createElement("p"); p.textContent = text; main.appendChild(p);
  });
  var price = document.createElement("span"); price.className = "price"; price.textContent = page.price;
  main.appendChild(price);
  var nav = document.querySelector("nav");
  page.links.forEach(function (href) {
    var a = document.createElement("a"); a.href = href; a.textContent = href; nav.appendChild(a);
  });
})();
"""

SHELL = ('<!doctype html><html><head><meta charset="utf-8"><title>loading</title>'
         '<link rel="stylesheet" href="/style.css"></head><body><nav></nav><main></main>'
         '<img src="/logo.png" alt="logo"><script src="/app.js"></script></body></html>')
STYLE = b"@font-face { font-family: site; src: url(/font.woff2); } body { font-family: site, sans-serif; }"
WORDS = ("crawler render browser script page link item price catalogue widget gadget queue worker "
         "politeness robots gate band store record archive").split()


def api(n: int, pages: int) -> bytes:
    rnd = random.Random(n)
    paragraphs = [" ".join(rnd.choice(WORDS) for _ in range(110)) for _ in range(3)]
    links = [f"/p/{(n + k) % pages}" for k in range(1, 6)]
    return json.dumps({"title": f"Page {n}", "paragraphs": paragraphs, "price": f"{n % 97}.99",
                       "links": links}).encode()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?", 1)[0]
            kind, body = "text/html; charset=utf-8", b"not here"
            status = 200
            if path.startswith("/p/"):
                body = SHELL.encode()
            elif path == "/app.js":
                kind, body = "application/javascript", APP_JS
            elif path == "/style.css":
                kind, body = "text/css", STYLE
            elif path.startswith("/api/") and path[5:].isdigit():
                kind, body = "application/json", api(int(path[5:]), args.pages)
            elif path in ("/logo.png", "/font.woff2"):
                kind, body = "application/octet-stream", b"\\0" * 4096
            else:
                status = 404
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.handle_error = lambda request, address: None  # type: ignore[method-assign]
    print(f"render site at http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
