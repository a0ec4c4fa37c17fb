"""The browser of a render worker, driven directly: Debian's Chromium through Playwright,
pages of a local site whose content exists only once its scripts ran (tests/fakes/js_site.py)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import psutil
import pytest

from crawler_tasks.core.errors import BrowserMissing, RenderFailed
from crawler_tasks.core.models import CrawlRequest
from crawler_tasks.core.responses import Download
from crawler_tasks.core.settings import Settings
from crawler_tasks.net.download import download, make_session
from crawler_tasks.net.render import Browser, browser_problem
from tests.fakes.js_site import JSSite
from tests.helpers import LOCAL, UNTHROTTLED

pytestmark = pytest.mark.skipif(not os.access("/usr/bin/chromium", os.X_OK),
                                reason="Debian's chromium is not installed (.ci/run installs it)")


class Fetcher:
    """The guarded downloader a runtime gives its browser: a session per thread."""

    def __init__(self) -> None:
        self.local = threading.local()

    def __call__(self, url: str, headers: dict[str, str], proxy: str | None = None) -> Download:
        session = getattr(self.local, "session", None) or make_session("tests", policy=LOCAL)
        self.local.session = session
        return download(session, CrawlRequest(url=url, headers=headers), timeout=2, maxsize=1 << 20, proxy=proxy)


@pytest.fixture(scope="module")
def js() -> Iterator[JSSite]:
    site = JSSite(items=3).start()
    yield site
    site.stop()


def browser(**settings: object) -> Browser:
    return Browser(Settings(**{**UNTHROTTLED, "render_timeout_s": 2.0, **settings}), Fetcher())


@pytest.fixture(scope="module")
def shared() -> Iterator[Browser]:
    b = browser()
    yield b
    b.close()


def render(b: Browser, site: JSSite, path: str, wait: str = "load"):
    url = site.url + path
    return b.render(url, b.fetch(url, {}, None), wait=wait)


def test_a_page_is_read_once_its_scripts_built_it(shared, js):
    dom, report = render(shared, js, "/")
    assert "<title>Catalogue (built)</title>" in dom and '<a href="/item/3">item 3</a>' in dom
    assert report.settled and report.requests == 2 and report.refused == report.blocked == 0


def test_a_selector_is_waited_for_after_the_load_event(shared, js):
    dom, report = render(shared, js, "/late", wait="#ready")
    assert report.settled and '<div id="ready">ready</div>' in dom
    dom, report = render(shared, js, "/late", wait="load")
    assert report.settled and 'id="ready"' not in dom  # 300 ms after load


def test_several_threads_render_at_once_in_one_browser(shared, js):
    started = shared.browsers_started
    out: list[str] = []

    def one(n: int) -> None:
        dom, _ = render(shared, js, f"/item/{n % 3 + 1}")
        out.append(dom)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 6 and all('<h1 class="name">Widget' in dom for dom in out)
    assert shared.browsers_started == max(started, 1)


def test_a_page_that_never_settles_is_read_as_it_stood_at_the_time_limit(shared, js):
    start = time.monotonic()
    dom, report = render(shared, js, "/polling", wait="networkidle")
    assert not report.settled and '<p id="x">polled</p>' in dom and report.requests > 5
    assert 2.0 <= time.monotonic() - start < 4


def test_a_page_whose_script_holds_the_browser_gives_no_dom_and_the_browser_goes_on(shared, js):
    start = time.monotonic()
    dom, report = render(shared, js, "/busy")
    assert dom is None and not report.settled
    assert time.monotonic() - start < 2.0 + 2 + 5 + 1  # the limit, the DOM read, the page's close
    dom, _ = render(shared, js, "/")
    assert "Catalogue (built)" in dom


def test_scripts_sending_the_browser_elsewhere_are_not_followed(shared, js):
    dom, report = render(shared, js, "/away")
    assert "<title>away</title>" in dom and report.navigated == js.url + "/item/1"
    assert not report.settled and report.refused == 1 and report.ms < 2000


def test_requests_past_the_cap_are_refused(js):
    b = browser(render_max_requests=2)
    try:
        dom, report = render(b, js, "/item/1")  # document, app.js, then its JSON: refused
        assert report.refused == 1 and "Widget" not in dom
    finally:
        b.close()


def test_a_browser_is_replaced_after_its_share_of_pages(js):
    b = browser(render_pages_per_browser=2)
    try:
        for _ in range(5):
            assert "Catalogue (built)" in render(b, js, "/")[0]
        assert b.browsers_started == 3
    finally:
        b.close()


def _browsers() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if "chrom" in p.name()]


def test_a_crashed_browser_is_replaced(js):
    b = browser()
    try:
        render(b, js, "/")
        for p in _browsers():
            os.kill(p.pid, signal.SIGKILL)
        time.sleep(0.5)
        try:  # the page in flight when it died, if any, fails; the next one gets a new browser
            render(b, js, "/")
        except RenderFailed:
            pass
        dom, _ = render(b, js, "/")
        assert "Catalogue (built)" in dom and b.browsers_started == 2
    finally:
        b.close()
    assert not [p for p in _browsers() if p.status() != psutil.STATUS_ZOMBIE]


def test_no_browser_is_said_in_one_line():
    s = Settings(render_browser="/nonexistent/chromium")
    assert browser_problem(s) == ("CRAWLER_RENDER_BROWSER: no browser at /nonexistent/chromium (install Debian's "
                                  "chromium package, or set CRAWLER_RENDER_BROWSER to a Chromium executable)")
    with pytest.raises(BrowserMissing):
        Browser(s, Fetcher()).render("http://127.0.0.1/", None, wait="load")  # type: ignore[arg-type]
