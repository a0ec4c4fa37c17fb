"""A local site whose links and content exist only once its scripts ran, served on loopback.

``/``             a catalogue: its title and its links to ``/item/1..N`` are written by
                  ``/app.js``; the HTML as served has neither.
``/item/<n>``     an item: its name and price are written by ``/app.js`` from ``/api/item/<n>``
                  (JSON fetched by the page); the served HTML holds none of them.
``/api/item/<n>`` the JSON an item page fetches.
``/slow/<n>``     an item whose JSON (``/api/slow/<n>``) takes ``slow_s`` seconds to come.
``/late``         its ``#ready`` element appears 300 ms after ``load``.
``/busy``         its script never ends (``while (true)``): the page never settles.
``/polling``      fetches ``/api/ping`` every 100 ms forever: the network is never idle.
``/private``      its script asks a private address, a metadata address and another
                  loopback port, loads an image and a font, and posts to the site; what
                  answered is written into the page.
``/away``         its script sends the browser to another page.
``/latin``        served in ISO-8859-1 (``naïve``); its script adds ``café``.

Every request is counted by path (``hits``).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

APP_JS = """
(function () {
  var path = location.pathname;
  if (path === "/") {
    document.title = "Catalogue (built)";
    var list = document.getElementById("list");
    for (var i = 1; i <= ITEMS; i++) {
      var a = document.createElement("a");
      a.href = "/item/" + i;
      a.textContent = "item " + i;
      list.appendChild(a);
    }
  } else if (path.indexOf("/item/") === 0 || path.indexOf("/slow/") === 0) {
    var n = path.split("/")[2];
    var xhr = new XMLHttpRequest();
    xhr.open("GET", (path.indexOf("/slow/") === 0 ? "/api/slow/" : "/api/item/") + n, false);
    xhr.send();
    var item = JSON.parse(xhr.responseText);
    document.title = item.name;
    document.getElementById("item").innerHTML =
      '<h1 class="name">' + item.name + '</h1><span class="price">' + item.price + '</span>';
  }
})();
"""

PAGE = """<!doctype html><html><head><title>{title}</title></head>
<body><div id="list"></div><div id="item"></div>{body}<script src="/app.js"></script></body></html>"""

PRIVATE = """<script>
function note(id, text) { var p = document.createElement("p"); p.id = id; p.textContent = text;
                          document.body.appendChild(p); }
function ask(id, url, options) {
  fetch(url, options).then(function (r) { note(id, "answered " + r.status); },
                           function () { note(id, "refused"); });
}
ask("private", "http://10.11.12.13/secret");
ask("metadata", "http://169.254.169.254/latest/meta-data/");
ask("post", "/api/item/1", {method: "POST", body: "x"});
ask("api", "/api/item/2");
var img = new Image(); img.src = "/pic.png"; document.body.appendChild(img);
</script><style>@font-face { font-family: f; src: url(/font.woff2); } body { font-family: f; }</style>"""


class JSSite:
    """The site on ``host`` (a free port), from a thread; ``items`` item pages."""

    def __init__(self, host: str = "127.0.0.1", items: int = 5, slow_s: float = 1.5) -> None:
        self.host = host
        self.items = items
        self.slow_s = slow_s
        self.hits: Counter[str] = Counter()
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                with site.lock:
                    site.hits[self.path] += 1
                status, kind, body = site.answer(self.path)
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802
                with site.lock:
                    site.hits["POST " + self.path] += 1
                self.send_response(405)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # a browser killed mid-request
        self.url = f"http://{host}:{self.server.server_address[1]}"

    def answer(self, path: str) -> tuple[int, str, bytes]:
        html = "text/html; charset=utf-8"
        if path == "/":
            return 200, html, PAGE.format(title="Catalogue", body="").encode()
        if path == "/app.js":
            return 200, "application/javascript", APP_JS.replace("ITEMS", str(self.items)).encode()
        if path.startswith(("/item/", "/slow/")):
            return 200, html, PAGE.format(title="Item", body="").encode()
        if path.startswith(("/api/item/", "/api/slow/")):
            n = path.rsplit("/", 1)[-1]
            if path.startswith("/api/slow/"):
                time.sleep(self.slow_s)
            return 200, "application/json", json.dumps({"name": f"Widget {n}", "price": f"{n}.50"}).encode()
        if path == "/api/ping":
            return 200, "application/json", b"{}"
        if path == "/late":
            return 200, html, (b"<html><head><title>late</title></head><body><script>"
                               b"addEventListener('load', function () { setTimeout(function () {"
                               b"var d = document.createElement('div'); d.id = 'ready'; d.textContent = 'ready';"
                               b"document.body.appendChild(d); }, 300); });</script></body></html>")
        if path == "/busy":
            return 200, html, b"<html><head><title>busy</title></head><body><script>while (true) {}</script></body></html>"
        if path == "/polling":
            return 200, html, (b"<html><head><title>polling</title></head><body><p id='x'>polled</p><script>"
                               b"setInterval(function () { fetch('/api/ping'); }, 100);</script></body></html>")
        if path == "/private":
            return 200, html, f"<html><head><title>private</title></head><body>{PRIVATE}</body></html>".encode()
        if path == "/away":
            return 200, html, (b"<html><head><title>away</title></head><body><script>"
                               b"location.href = '/item/1';</script></body></html>")
        if path == "/latin":
            return 200, "text/html; charset=iso-8859-1", (
                "<html><head><meta charset='iso-8859-1'><title>na\u00efve</title></head><body><p>na\u00efve</p>"
                "<script>var p = document.createElement('p'); p.id = 'js'; p.textContent = 'caf\\u00e9';"
                "document.body.appendChild(p);</script></body></html>").encode("latin-1")
        return 404, html, b"<html><body>not here</body></html>"

    def start(self) -> JSSite:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
