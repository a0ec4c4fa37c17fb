"""A deterministic benchmark site: N HTML pages of 15-25 KB, generated once and cached.

Page 0 is ``/`` (file ``index.html``), page n is ``/p/n`` (file ``p/n.html``).
Every page links to the next one, so all pages are reachable from ``/``, plus
20-40 links in all: navigation, in-text and "related" links to random pages
(some relative, some with a fragment), a few links with the query ``a=1&b=2``
in either order (the two orders canonicalise to one URL), links to external
hosts (``http://external-N.example/...``, offsite: never to be fetched) and a
``mailto:`` link.

A URL with a query serves the page of its path, so it is a page of its own for
a crawler; the manifest says how many distinct canonical URLs the site has
(``expected_urls``): what a complete crawl stores.

The RNG is seeded per page (``seed`` and page number), so the same pages come
out on every machine. The site is written to ``/tmp/crawler-bench-site-<pages>-<seed>/``
through a temporary directory renamed into place, and reused while its
manifest matches :data:`GENERATOR_VERSION`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

GENERATOR_VERSION = 1
CACHE_ROOT = Path(tempfile.gettempdir())
QUERY_TARGET_EVERY = 50  # query-string links point only at pages n with n % 50 == 0
QUERY_ORDERS = ("a=1&b=2", "b=2&a=1")
NAV_PAGES = (1, 2, 3, 4, 5)
FOOTER_PAGES = (6, 7, 8, 9)

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pa", "qui", "dor",
              "len", "mar", "tos", "bel", "cin", "fra", "gul", "hon", "jex", "pry", "sto", "wen")


@dataclass(frozen=True)
class Site:
    """A generated site on disk."""

    root: Path
    pages: int
    seed: int
    expected_urls: int
    total_bytes: int
    external_links: int

    @property
    def mean_page_kb(self) -> float:
        return self.total_bytes / self.pages / 1024


def page_path(n: int) -> str:
    """URL path of page ``n``."""
    return "/" if n == 0 else f"/p/{n}"


def page_file(root: Path, n: int) -> Path:
    """File of page ``n`` under ``root``."""
    return root / "index.html" if n == 0 else root / "p" / f"{n}.html"


def site_dir(pages: int, seed: int) -> Path:
    return CACHE_ROOT / f"crawler-bench-site-{pages}-{seed}"


def ensure_site(pages: int, seed: int = 1) -> Site:
    """The cached site for ``pages`` and ``seed``, generated first when missing or stale."""
    if pages < 10:
        raise ValueError("--pages: at least 10")
    root = site_dir(pages, seed)
    site = _load(root)
    if site is not None and site.pages == pages and site.seed == seed:
        return site
    shutil.rmtree(root, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{root.name}.tmp-", dir=root.parent))
    try:
        manifest = _generate(tmp, pages, seed)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        tmp.chmod(0o755)  # nginx workers may run as another user
        os.rename(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    loaded = _load(root)
    assert loaded is not None
    return loaded


def _load(root: Path) -> Site | None:
    try:
        m = json.loads((root / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if m.get("version") != GENERATOR_VERSION:
        return None
    return Site(root=root, pages=m["pages"], seed=m["seed"], expected_urls=m["expected_urls"],
                total_bytes=m["total_bytes"], external_links=m["external_links"])


def _generate(root: Path, pages: int, seed: int) -> dict[str, int]:
    (root / "p").mkdir(parents=True)
    corpus = _Corpus(random.Random(f"corpus:{seed}"))
    canonical: set[str] = {page_path(n) for n in range(pages)}
    total = external = 0
    for n in range(pages):
        page = _PageWriter(n, pages, random.Random(f"page:{seed}:{n}"), corpus)
        html = page.render()
        canonical.update(page.query_urls)
        external += page.external
        data = html.encode("utf-8")
        page_file(root, n).write_bytes(data)
        total += len(data)
    return {"version": GENERATOR_VERSION, "pages": pages, "seed": seed,
            "expected_urls": len(canonical), "total_bytes": total, "external_links": external}


class _Corpus:
    """Pseudo-words, sentences and paragraphs drawn once from the seeded RNG."""

    def __init__(self, rng: random.Random) -> None:
        self.words = sorted({self._word(rng) for _ in range(3000)})
        self.paragraphs = [self._paragraph(rng) for _ in range(2500)]
        self.phrases = [" ".join(rng.choices(self.words, k=rng.randint(2, 5))) for _ in range(2000)]

    @staticmethod
    def _word(rng: random.Random) -> str:
        return "".join(rng.choices(_SYLLABLES, k=rng.randint(1, 4)))

    def _sentence(self, rng: random.Random) -> str:
        words = rng.choices(self.words, k=rng.randint(6, 18))
        return " ".join(words).capitalize() + rng.choice((".", ".", ".", "?", "!"))

    def _paragraph(self, rng: random.Random) -> str:
        return " ".join(self._sentence(rng) for _ in range(rng.randint(3, 9)))


class _PageWriter:
    """Renders one page and remembers the query URLs and external links it holds."""

    def __init__(self, n: int, pages: int, rng: random.Random, corpus: _Corpus) -> None:
        self.n, self.pages, self.rng, self.corpus = n, pages, rng, corpus
        self.query_urls: set[str] = set()
        self.external = 0
        self.target_size = rng.randint(15_000, 23_000)  # + at most one paragraph

    def _random_page(self) -> int:
        return self.rng.randrange(1, self.pages)

    def _internal_href(self) -> str:
        """A link to a random page: root-relative, relative or with a fragment."""
        target = self._random_page()
        kind = self.rng.random()
        if kind < 0.12 and self.n != 0:
            return str(target)  # relative to /p/<n>: resolves to /p/<target>
        if kind < 0.24:
            return f"/p/{target}#{self.rng.choice(('top', 'comments', 'section-2'))}"
        return f"/p/{target}"

    def _query_href(self) -> str:
        multiples = max(1, (self.pages - 1) // QUERY_TARGET_EVERY)
        target = QUERY_TARGET_EVERY * self.rng.randint(1, multiples)
        target = min(target, self.pages - 1)
        self.query_urls.add(f"/p/{target}?{QUERY_ORDERS[0]}")
        return f"/p/{target}?{self.rng.choice(QUERY_ORDERS)}"

    def _external_href(self) -> str:
        self.external += 1
        host = f"external-{self.rng.randrange(60)}.example"
        if self.rng.random() < 0.3:
            return f"https://www.{host}/"
        return f"http://{host}/{self.rng.choice(self.corpus.words)}/{self.rng.randrange(1000)}.html"

    def _link_plan(self) -> list[str]:
        """The hrefs of the body, not counting nav, footer, next and previous."""
        # nav (home + sections), previous, next, #top, footer pages, footer home, mailto
        fixed = 1 + len(NAV_PAGES) + 2 + 1 + len(FOOTER_PAGES) + 1 + 1
        count = self.rng.randint(20, 40) - fixed
        hrefs = [self._query_href() for _ in range(self.rng.randint(1, 2))]
        hrefs += [self._external_href() for _ in range(self.rng.randint(2, 4))]
        hrefs += [self._internal_href() for _ in range(max(0, count - len(hrefs)))]
        self.rng.shuffle(hrefs)
        return hrefs

    def _anchor(self, href: str) -> str:
        return f'<a href="{href}">{self.rng.choice(self.corpus.phrases)}</a>'

    def render(self) -> str:
        """The page's HTML: exactly sized within a paragraph of ``target_size``."""
        rng, corpus = self.rng, self.corpus
        title = " ".join(rng.choices(corpus.words, k=rng.randint(3, 7))).title()
        anchors = [self._anchor(href) for href in self._link_plan()]
        in_text, related = anchors[: len(anchors) // 2], anchors[len(anchors) // 2:]
        parts = [self._head(title), self._nav(), '<main id="content">', f"<h1>{title}</h1>",
                 f'<p class="lead">{rng.choice(corpus.phrases)}</p>']
        pager, footer = self._pager(), self._footer()
        fixed = sum(len(p) + 1 for p in parts) + len(pager) + len(footer) + 120
        body = self._body(in_text, lambda: sum(len(a) + 10 for a in related + in_text) + fixed)
        parts += body
        parts += [pager, self._related(related + in_text), "</main>", footer, "</body></html>\n"]
        return "\n".join(parts)

    def _body(self, in_text: list[str], tail: Callable[[], int]) -> list[str]:
        """Sections of a heading, paragraphs (some with a link inside) and sometimes a list.

        Stops after the paragraph that brings the page (``tail()`` counts the
        rest) to its target size.
        """
        rng, corpus = self.rng, self.corpus
        out: list[str] = []
        size, section = 0, 0
        while size + tail() < self.target_size:
            section += 1
            out.append(f'<section id="section-{section}"><h2>{rng.choice(corpus.phrases).title()}</h2>')
            for _ in range(rng.randint(2, 4)):
                text = rng.choice(corpus.paragraphs)
                if in_text and rng.random() < 0.6:
                    cut = text.find(" ", len(text) // 2)
                    text = f"{text[:cut]} {in_text.pop()}{text[cut:]}"
                out.append(f"<p>{text}</p>")
                size += len(out[-1]) + 1
                if size + tail() >= self.target_size:
                    break
            else:
                if rng.random() < 0.5:
                    items = "".join(f"<li>{rng.choice(corpus.phrases)}</li>" for _ in range(rng.randint(3, 8)))
                    out.append(f"<ul class=\"facts\">{items}</ul>")
                    size += len(out[-1]) + 1
            out.append("</section>")
            size += 11
        return out

    def _head(self, title: str) -> str:
        rng, corpus = self.rng, self.corpus
        keywords = ", ".join(rng.sample(corpus.words, 6))
        description = corpus.paragraphs[self.n % len(corpus.paragraphs)][:150]
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head>\n<meta charset=\"utf-8\">\n"
                f"<title>{title} | Bench Site</title>\n"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                f"<meta name=\"description\" content=\"{description}\">\n"
                f"<meta name=\"keywords\" content=\"{keywords}\">\n"
                "<link rel=\"stylesheet\" href=\"/static/site.css\">\n"
                f"<link rel=\"canonical\" href=\"{page_path(self.n)}\">\n</head>\n<body id=\"top\">")

    def _nav(self) -> str:
        items = ['<li><a href="/">Home</a></li>']
        items += [f'<li><a href="/p/{k}">Section {k}</a></li>' for k in NAV_PAGES if k < self.pages]
        return '<header><nav class="main-nav"><ul>\n' + "\n".join(items) + "\n</ul></nav></header>"

    def _pager(self) -> str:
        links = []
        if self.n > 0:
            links.append(f'<a rel="prev" href="{page_path(self.n - 1)}">Previous</a>')
        if self.n + 1 < self.pages:
            links.append(f'<a rel="next" href="/p/{self.n + 1}">Next</a>')
        links.append('<a href="#top">Back to top</a>')
        return '<div class="pager">' + " | ".join(links) + "</div>"

    def _related(self, anchors: list[str]) -> str:
        items = "\n".join(f"<li>{a}</li>" for a in anchors)
        return f'<aside class="related"><h3>Related</h3><ul>\n{items}\n</ul></aside>'

    def _footer(self) -> str:
        names = ("About", "Contact", "Privacy", "Terms")
        links = [f'<a href="/p/{k}">{name}</a>' for k, name in zip(FOOTER_PAGES, names, strict=False) if k < self.pages]
        return ('<footer><p>' + " · ".join(links) + '</p><p><a href="/">Bench Site</a> · '
                f'<a href="mailto:editor@bench.example">editor@bench.example</a> · © 2024 · '
                f'page {self.n}</p></footer>')


if __name__ == "__main__":
    import sys

    made = ensure_site(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
    print(made)
