"""Pages rendered in a headless Chromium driven by Playwright: one browser per process.

The browser runs on a thread of its own, under its own event loop (Playwright's async
API): the threads of a threads-pool worker render several pages at once in one browser,
each in a page of its own. A forked (prefork) child starts its own browser on first use,
and a fetch worker never starts one: only a ``crawl.render`` task asks for it.

The browser has no network of its own. It is launched behind a proxy that does not
answer, with every host name unresolvable, and every request its pages make is
intercepted (:mod:`crawler_tasks.net.intercept`): a page cannot reach an address the
crawler would not.

A browser is replaced after ``CRAWLER_RENDER_PAGES_PER_BROWSER`` pages, or once its
processes hold more than ``CRAWLER_RENDER_BROWSER_MAX_MIB``: the pages at work finish in
the old one while new pages start in a fresh one. A browser that crashed is replaced too.

This module holds the browser's lifecycle: starting it, its thread, its replacements,
closing it; :mod:`crawler_tasks.net.intercept` holds what its pages may load.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import BrowserMissing, RenderFailed
from ..core.render import WAIT_EVENTS, RenderReport, is_selector
from ..core.responses import Download
from ..core.settings import Settings
from .intercept import CACHE_BYTES, Cache, FetchSub, PageState, Tab, intercept

log = logging.getLogger(__name__)

#: Chromium's switches: no network of its own (a proxy that does not answer, loopback
#: included; no name resolves; no UDP around the proxy), nothing in the background.
LAUNCH_ARGS = (
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-domain-reliability",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--js-flags=--max-old-space-size=512",
)
#: Seconds to read the DOM of a page past its time limit, and to close a page.
READ_S, CLOSE_S = 2.0, 5.0
#: Seconds to start a browser.
LAUNCH_S = 30.0
#: Pages between two looks at the browser's memory.
MEASURE_EVERY = 10
#: Threads fetching the subresources of the pages of one browser.
SUBRESOURCE_THREADS = 8


def browser_problem(settings: Settings) -> str | None:
    """Why this process cannot render (one line), or None when it can."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed: pip install 'crawler-tasks[render]'"
    path = settings.render_browser
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        return (f"CRAWLER_RENDER_BROWSER: no browser at {path} (install Debian's chromium package, "
                "or set CRAWLER_RENDER_BROWSER to a Chromium executable)")
    return None


@dataclass
class _Generation:
    """One browser and its context, with the pages at work in it and its idle tabs."""

    browser: Any
    context: Any
    cache: Cache
    inflight: int = 0
    done: int = 0
    retiring: bool = False
    idle: list[Tab] = field(default_factory=list)


class Browser:
    """The browser of this process: :meth:`render` from any thread, :meth:`close` at the end."""

    def __init__(self, settings: Settings, fetch: FetchSub) -> None:
        self.settings = settings
        self.fetch = fetch
        #: Browsers started by this process (for its logs and tests).
        self.browsers_started = 0
        self._lock = threading.Lock()
        self._pid = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._playwright: Any = None
        self._gen: _Generation | None = None
        self._launching = asyncio.Lock()

    def render(self, url: str, served: Download, *, wait: str,
               proxy: str | None = None) -> tuple[str | None, RenderReport]:
        """The DOM of the page at ``url`` whose document is ``served``, and how it went;
        the DOM is None when the page's scripts held the browser past the time limit.
        The page's other requests go through ``proxy`` (None: direct).
        :class:`~crawler_tasks.core.errors.RenderFailed` when the browser failed,
        :class:`~crawler_tasks.core.errors.BrowserMissing` when there is none."""
        loop = self._started()
        future = asyncio.run_coroutine_threadsafe(self._render(url, served, wait, proxy), loop)
        try:
            return future.result(timeout=self.settings.render_timeout_s + READ_S + CLOSE_S + LAUNCH_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise RenderFailed(f"render: the browser did not answer for {url}") from None

    def close(self) -> None:
        """Close the browser and stop its thread (this process's own only)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            if loop is None or thread is None or self._pid != os.getpid():
                return
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=LAUNCH_S)
            except Exception as exc:  # noqa: BLE001 - closing: say it, go on
                log.warning("browser did not close cleanly: %s", exc)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
            self._loop = self._thread = self._pool = None

    def _started(self) -> asyncio.AbstractEventLoop:
        """The browser thread's loop, started on first use in this process."""
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # first use, or a forked child
                problem = browser_problem(self.settings)
                if problem:
                    raise BrowserMissing(problem)
                self._pid = os.getpid()
                self._gen = self._playwright = None
                loop = asyncio.new_event_loop()
                self._launching = asyncio.Lock()
                self._pool = concurrent.futures.ThreadPoolExecutor(SUBRESOURCE_THREADS,
                                                                   thread_name_prefix="render-fetch")
                self._thread = threading.Thread(target=loop.run_forever, name="browser", daemon=True)
                self._thread.start()
                self._loop = loop
            return self._loop

    async def _generation(self) -> _Generation:
        """The browser pages start in: the current one, or a new one."""
        async with self._launching:
            gen = self._gen
            if gen is not None and not gen.retiring and gen.browser.is_connected():
                return gen
            if gen is not None:  # crashed: its pages fail, its leftovers go
                gen.retiring = True
                self._gen = None
                await self._retire(gen)
            from playwright.async_api import async_playwright

            if self._playwright is None:
                self._playwright = await async_playwright().start()
            browser = await self._playwright.chromium.launch(
                executable_path=self.settings.render_browser, args=list(LAUNCH_ARGS), timeout=LAUNCH_S * 1000)
            context = await browser.new_context(service_workers="block", accept_downloads=False,
                                                user_agent=self.settings.user_agent)
            self._gen = _Generation(browser, context, Cache(CACHE_BYTES))
            self.browsers_started += 1
            log.info("browser %d started (%s)", self.browsers_started, self.settings.render_browser)
            return self._gen

    async def _render(self, url: str, served: Download, wait: str,
                      proxy: str | None) -> tuple[str | None, RenderReport]:
        from playwright.async_api import Error as PlaywrightError

        try:
            gen = await self._generation()
        except PlaywrightError as exc:
            raise RenderFailed(f"render: the browser did not start: {_first_line(exc)}") from None
        gen.inflight += 1
        state = PageState(RenderReport(wait=wait), served, proxy)
        started = time.monotonic()
        tab: Tab | None = None
        dom: str | None = None
        try:
            tab = gen.idle.pop() if gen.idle else await self._new_tab(gen)
            tab.state = state
            state.report.settled = await self._navigate(tab.page, url, wait, state.away)
            try:
                dom = await asyncio.wait_for(tab.page.content(), READ_S)
            except (TimeoutError, PlaywrightError):
                dom = None
            state.report.ms = int((time.monotonic() - started) * 1000)
            return dom, state.report
        except PlaywrightError as exc:
            raise RenderFailed(f"render: the browser failed: {_first_line(exc)}") from None
        finally:
            if tab is not None:
                await self._put_back(gen, tab, reuse=dom is not None)
            gen.inflight -= 1
            await self._done(gen)

    async def _new_tab(self, gen: _Generation) -> Tab:
        """A new tab of ``gen``, its every request intercepted."""
        tab = Tab(await gen.context.new_page())
        await tab.page.route("**/*", lambda route, request: intercept(
            tab, gen.cache, route, request, settings=self.settings, fetch=self.fetch, pool=self._pool))
        return tab

    async def _put_back(self, gen: _Generation, tab: Tab, *, reuse: bool) -> None:
        """Keep ``tab`` for the next render, emptied (``about:blank``: its page's timers stop
        asking the site for more), or close it: a page whose scripts held the browser, or any
        page of a browser that goes."""
        from playwright.async_api import Error as PlaywrightError

        tab.state = None
        if reuse and not gen.retiring:
            try:
                await asyncio.wait_for(tab.page.goto("about:blank"), CLOSE_S)
                gen.idle.append(tab)
                return
            except (TimeoutError, PlaywrightError):
                pass
        try:
            await asyncio.wait_for(tab.page.close(run_before_unload=False), CLOSE_S)
        except (TimeoutError, PlaywrightError):
            gen.retiring = True  # a page that will not close: this browser goes

    async def _navigate(self, page: Any, url: str, wait: str, away: asyncio.Event) -> bool:
        """Load ``url`` until ``wait``; False when the time limit came first, or the page's
        scripts navigated away (``away``: not followed, and its load event never comes)."""
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        limit = self.settings.render_timeout_s
        deadline = time.monotonic() + limit
        event = wait if wait in WAIT_EVENTS else "load"

        async def reached() -> None:
            await page.goto(url, wait_until="commit", timeout=limit * 1000)
            await page.wait_for_load_state(event, timeout=_left_ms(deadline))
            if is_selector(wait):
                await page.wait_for_selector(wait, state="attached", timeout=_left_ms(deadline))

        waiting = asyncio.ensure_future(reached())
        gone = asyncio.ensure_future(away.wait())
        try:
            await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (waiting, gone):
                task.cancel()
        if not waiting.done() or waiting.cancelled():
            return False
        try:
            waiting.result()
        except PlaywrightTimeout:
            return False
        return True

    async def _done(self, gen: _Generation) -> None:
        """One page less at work in ``gen``: retire it when it has rendered its share or
        grown too large, close it once its last page is done."""
        gen.done += 1
        s = self.settings
        if not gen.retiring and gen.done >= s.render_pages_per_browser:
            log.info("browser replaced after %d pages", gen.done)
            gen.retiring = True
        elif not gen.retiring and gen.done % MEASURE_EVERY == 0:
            mib = await asyncio.get_running_loop().run_in_executor(self._pool, _children_mib)
            if mib > s.render_browser_max_mib:
                log.info("browser replaced after %d pages: its processes hold %.0f MiB", gen.done, mib)
                gen.retiring = True
        if gen.retiring and self._gen is gen:
            self._gen = None
        if gen.retiring and gen.inflight == 0:
            await self._retire(gen)

    async def _retire(self, gen: _Generation) -> None:
        from playwright.async_api import Error as PlaywrightError

        try:
            await asyncio.wait_for(gen.context.close(), CLOSE_S)
        except (TimeoutError, PlaywrightError):
            pass
        try:
            await asyncio.wait_for(gen.browser.close(), CLOSE_S)
        except (TimeoutError, PlaywrightError) as exc:
            log.warning("a retired browser did not close: %s", exc)

    async def _shutdown(self) -> None:
        if self._gen is not None:
            await self._retire(self._gen)
            self._gen = None
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None


def _children_mib() -> float:
    """Resident MiB of this process's children (the browser's driver and processes), as their
    proportional set size: a page shared by several of them (Chromium's processes share most
    of theirs) is counted once, not once per process as the sum of their RSS would."""
    try:
        import psutil
    except ImportError:
        return 0.0
    total = 0
    for child in psutil.Process().children(recursive=True):
        try:
            total += child.memory_full_info().pss
        except (psutil.Error, AttributeError):
            continue
    return total / (1 << 20)


def _left_ms(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.001) * 1000


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
