"""Pages rendered in a browser by render workers of their own, against a local site whose
links and content exist only once its scripts ran (tests/fakes/js_site.py).

Real processes throughout: a fetch worker started as ``celery -A crawler_tasks worker``
(every queue but ``crawl.render``), a render worker started with ``-Q crawl.render``
driving Debian's Chromium through Playwright, the real Redis as broker and state.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from crawler_tasks.backends import open_store
from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.core import counters, routing
from crawler_tasks.core.models import PageRecord
from crawler_tasks.core.settings import Settings
from crawler_tasks.core.urls import fingerprint
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.fakes.js_site import JSSite
from tests.helpers import REDIS, flush, token

RENDER_DB = int(os.environ.get("CRAWLER_RENDER_TEST_DB", "12"))
ROOT = Path(__file__).resolve().parents[2]
RULES, REQUESTS = "tests.programs.render_rules", "tests.programs.render_requests"
CRAWLER_TASKS = str(Path(sys.executable).parent / "crawler-tasks")
PAGES_PER_BROWSER = 4

pytestmark = pytest.mark.skipif(not os.access("/usr/bin/chromium", os.X_OK),
                                reason="Debian's chromium is not installed (.ci/run installs it)")


class Pool:
    """A fetch worker and a render worker on their own Redis database, and a way to crawl."""

    def __init__(self, settings: Settings, logs: Path) -> None:
        self.settings = settings
        self.logs = logs
        env = {"PYTHONPATH": str(ROOT)}
        self.fetchers = Workers(settings, concurrency=4, name="render-tests-fetch@%h", queues=routing.QUEUE_ORDER,
                                log_path=str(logs / "fetch.log"), extra_env=env)
        self.renderers = self.render_worker()
        self.rt = Runtime(settings, create_app(settings))

    def render_worker(self) -> Workers:
        return Workers(self.settings, concurrency=2, name=f"render-tests-{token()}@%h",
                       queues=(routing.RENDER_QUEUE,), log_path=str(self.logs / "render.log"),
                       extra_env={"PYTHONPATH": str(ROOT)}, loglevel="INFO")

    def crawl(self, seeds: list, *, plugins: tuple[str, ...], timeout: float = 60,
              max_depth: int = 2) -> tuple[str, dict[str, PageRecord]]:
        crawl_id = f"r-{token()}"
        store = str(self.logs / f"{crawl_id}.db")
        submit_requests(self.rt, build_requests(seeds, crawl_id=crawl_id), max_depth=max_depth, store=store,
                        plugins=plugins)
        wait_drained(lambda: self.rt.crawls.outstanding(crawl_id) == 0, timeout=timeout, workers=self.fetchers)
        return crawl_id, {r.url: r for r in open_store(store).records(crawl_id)}


@pytest.fixture(scope="module")
def js() -> Iterator[JSSite]:
    site = JSSite(items=5, slow_s=0.7).start()  # under the tests' 1 s download timeout
    yield site
    site.stop()


@pytest.fixture(scope="module")
def pool(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    flush(RENDER_DB)
    s = settings.replace(broker_url=f"{REDIS}/{RENDER_DB}", redis_url=f"{REDIS}/{RENDER_DB}",
                         key_prefix=f"rn{token()}", plugins=(RULES, REQUESTS), render_timeout_s=2.0,
                         render_pages_per_browser=PAGES_PER_BROWSER, visibility_timeout=6,
                         retry_backoff_max=2.0)
    p = Pool(s, tmp_path_factory.mktemp("render"))
    p.fetchers.start()
    p.renderers.start()
    yield p
    p.fetchers.stop()
    p.renderers.stop()
    p.rt.close()
    flush(RENDER_DB)


def items(records: dict[str, PageRecord]) -> dict[str, list[dict]]:
    return {url.rsplit("/", 1)[-1]: r.items for url, r in records.items() if "/item/" in url}


def expected(n: int = 5) -> dict[str, list[dict]]:
    return {str(i): [{"name": f"Widget {i}", "price": f"{i}.50"}] for i in range(1, n + 1)}


def test_without_rendering_the_scripted_links_and_items_are_missed(pool, js):
    _, records = pool.crawl([js.url + "/"], plugins=(REQUESTS,))
    assert list(records) == [js.url + "/"]
    page = records[js.url + "/"]
    assert page.title == "Catalogue" and page.links == [] and page.rendered is None


def test_a_rule_that_renders_crawls_the_scripted_links_and_stores_their_items(pool, js):
    crawl_id, records = pool.crawl([js.url + "/"], plugins=(RULES,))
    catalogue = records[js.url + "/"]
    assert catalogue.title == "Catalogue (built)" and catalogue.rendered["settled"]
    assert catalogue.links == [f"{js.url}/item/{i}" for i in range(1, 6)]
    assert items(records) == expected()
    item = records[js.url + "/item/2"]
    assert item.rendered["requests"] == 3 and item.title == "Widget 2"  # document, app.js, its JSON
    # The record keeps the response as served, and the DOM the rule read.
    assert "Widget" not in item.body and '<h1 class="name">Widget 2</h1>' in item.dom
    stats = pool.rt.stats.read(crawl_id)
    assert stats[counters.RENDERED] == 6 and stats[counters.STORED] == 6


def test_a_render_worker_as_compose_runs_it_with_redis_alone_renders_and_the_workers_store(pool, js):
    """docker/compose.yml's render service: no plugin, no store it could write to, the split
    pipeline; the DOM goes back through a claim check to the fetch workers, which parse it
    with the crawl's rules and store it."""
    pool.renderers.stop()
    bare = Workers(pool.settings, concurrency=2, name=f"render-bare-{token()}@%h", queues=(routing.RENDER_QUEUE,),
                   log_path=str(pool.logs / "render-bare.log"), loglevel="INFO",
                   extra_env={"CRAWLER_PIPELINE": "split", "CRAWLER_PLUGINS": "",
                              "CRAWLER_STORE": "/nonexistent/render-workers-have-no-store.db"}).start()
    try:
        crawl_id, records = pool.crawl([js.url + "/"], plugins=(RULES,))
    finally:
        bare.stop()
        pool.renderers = pool.render_worker().start()
    catalogue = records[js.url + "/"]
    assert catalogue.title == "Catalogue (built)" and catalogue.rendered["settled"]
    assert items(records) == expected()  # the rules ran on the rendered DOM, on the fetch workers
    stats = pool.rt.stats.read(crawl_id)
    assert stats[counters.RENDERED] == 6 and stats[counters.STORED] == 6
    assert pool.rt.dead_letters.count() == 0


def test_requests_that_say_render_are_rendered_and_their_items_stored(pool, js):
    crawl_id, records = pool.crawl([{"url": js.url + "/", "render": True}], plugins=(REQUESTS,))
    assert items(records) == expected()
    assert all(r.rendered is not None for r in records.values())
    assert pool.rt.stats.read(crawl_id)[counters.RENDERED] == 6


def test_a_rendered_page_served_in_another_encoding_is_read_right(pool, js):
    _, records = pool.crawl([{"url": js.url + "/latin", "render": True}], plugins=(REQUESTS,))
    page = records[js.url + "/latin"]
    assert page.title == "na\u00efve" and "na\u00efve" in page.text and "caf\u00e9" in page.text
    assert page.encoding == "cp1252" and "<p>na\u00efve</p>" in page.body and 'id="js">caf\u00e9<' in page.dom


def test_a_page_whose_scripts_never_settle_ends_at_the_time_limit_with_a_description(pool, js):
    start = time.monotonic()
    _, records = pool.crawl([{"url": js.url + "/busy", "render": True},
                             {"url": js.url + "/polling", "render": True, "meta": {"render_wait": "networkidle"}}],
                            plugins=(REQUESTS,))
    busy, polling = records[js.url + "/busy"], records[js.url + "/polling"]
    assert busy.description == ("render: the page's scripts did not let it reach the load event within 2s, "
                                "nor give its DOM")
    assert busy.title is None and busy.rendered is None
    assert polling.description == "render: network idle not reached within 2s; the DOM as it stood"
    assert polling.title == "polling" and polling.rendered["settled"] is False
    assert polling.rendered["requests"] > 5  # it polled all along
    assert time.monotonic() - start < 20


def test_a_page_asking_private_and_metadata_addresses_is_refused_them(pool, js):
    crawl_id, records = pool.crawl([{"url": js.url + "/private", "render": True,
                                     "meta": {"render_wait": "networkidle"}}], plugins=(REQUESTS,))
    page = records[js.url + "/private"]
    for refused in ("private", "metadata", "post"):
        assert f'<p id="{refused}">refused</p>' in page.dom
    assert '<p id="api">answered 200</p>' in page.dom
    assert page.rendered["refused"] == 3 and page.rendered["blocked"] == 2  # the image and the font
    assert "POST /api/item/1" not in js.hits and "/pic.png" not in js.hits and "/font.woff2" not in js.hits
    stats = pool.rt.stats.read(crawl_id)
    assert stats[counters.RENDER_REFUSED] == 3 and stats[counters.RENDER_BLOCKED] == 2


def test_a_render_worker_replaces_its_browser_every_few_pages(pool, js):
    before = (pool.logs / "render.log").read_text().count("browser replaced after")
    _, records = pool.crawl([{"url": f"{js.url}/item/{i}?r={token()}", "render": True} for i in range(12)],
                            plugins=(REQUESTS,))
    assert len(records) == 12 and all(r.items for r in records.values())
    log = (pool.logs / "render.log").read_text()
    assert log.count("browser replaced after") - before >= 12 // PAGES_PER_BROWSER - 1


def _chromium_of(pid: int) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if "chrom" in p.name()]
    except psutil.NoSuchProcess:
        return []


def test_a_sigkilled_render_worker_loses_no_page_and_leaves_no_browser(pool, js):
    seeds = [{"url": f"{js.url}/slow/{i}?k={token()}", "render": True} for i in range(4)]
    crawl_id = f"k-{token()}"
    store = str(pool.logs / f"{crawl_id}.db")
    submit_requests(pool.rt, build_requests(seeds, crawl_id=crawl_id), store=store, plugins=(REQUESTS,))
    deadline = time.monotonic() + 30
    while not any(path.startswith("/api/slow/") for path in js.hits):
        assert time.monotonic() < deadline, "no slow page started"
        time.sleep(0.05)
    worker = pool.renderers.proc
    browsers = _chromium_of(worker.pid)
    assert browsers, "the render worker runs no browser"
    os.kill(worker.pid, signal.SIGKILL)  # the worker alone, as the OOM killer does
    worker.wait()
    gone_by = time.monotonic() + 15
    while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in browsers):
        assert time.monotonic() < gone_by, "the browser outlived its worker"
        time.sleep(0.2)
    pool.renderers.stop()
    pool.renderers = pool.render_worker().start()
    wait_drained(lambda: pool.rt.crawls.outstanding(crawl_id) == 0, timeout=90, workers=pool.fetchers)
    records = list(open_store(store).records(crawl_id))
    assert sorted(r.url for r in records) == sorted(s["url"] for s in seeds)
    assert all(r.items and r.items[0]["name"].startswith("Widget") for r in records)
    assert pool.rt.stats.read(crawl_id)[counters.STORED] == 4  # each page written once


def test_crawl_page_moves_a_page_to_render_to_the_render_workers(pool, js):
    crawl_id = f"p-{token()}"
    url = f"{js.url}/item/4?page={token()}"
    pool.rt.crawls.register(crawl_id, store=str(pool.logs / f"{crawl_id}.db"), plugins=[REQUESTS])
    pool.rt.app.send_task(routing.PAGE_TASK, args=[{"url": url, "render": True}], kwargs={"crawl_id": crawl_id})
    store = open_store(str(pool.logs / f"{crawl_id}.db"))
    deadline = time.monotonic() + 30
    while (record := store.get(fingerprint(url))) is None:
        assert time.monotonic() < deadline, "crawl.page never stored its page"
        time.sleep(0.1)
    assert record.rendered is not None and record.items == [{"name": "Widget 4", "price": "4.50"}]
    assert not _chromium_of(pool.fetchers.proc.pid)  # the fetch worker never started a browser


def test_a_worker_without_a_browser_refuses_to_serve_the_render_queue(pool, tmp_path):
    s = pool.settings.replace(render_browser="/nonexistent/chromium")
    w = Workers(s, concurrency=1, name=f"nobrowser-{token()}@%h", queues=(routing.RENDER_QUEUE,),
                log_path=str(tmp_path / "w.log")).start()
    assert w.proc.wait(timeout=30) == 2
    said = [line for line in (tmp_path / "w.log").read_text().splitlines() if line.startswith("crawler_tasks:")]
    assert said == [
        "crawler_tasks: cannot serve crawl.render: CRAWLER_RENDER_BROWSER: no browser at /nonexistent/chromium "
        "(install Debian's chromium package, or set CRAWLER_RENDER_BROWSER to a Chromium executable)"]
    assert "Traceback" not in (tmp_path / "w.log").read_text()


def test_a_worker_started_without_queues_serves_every_queue_but_the_render_queue(settings):
    from celery import _state

    app = create_app(settings)
    # A worker built in this process marks it as one whose tasks must not wait for results;
    # the mark is process-wide, so it is taken back for the tests that run here next.
    blocked = _state.task_join_will_block()
    try:
        worker = app.WorkController(app=app, hostname=f"plain-{token()}@test", pool_cls="solo")
        assert set(app.amqp.queues.consume_from) == set(routing.QUEUE_ORDER)
        app.WorkController(app=app, hostname=f"render-{token()}@test", pool_cls="solo",
                           queues=[routing.RENDER_QUEUE])
        assert set(app.amqp.queues.consume_from) == {routing.RENDER_QUEUE}
        del worker
    finally:
        _state._set_task_join_will_block(blocked)


CLI_DB = int(os.environ.get("CRAWLER_RENDER_CLI_TEST_DB", "4"))


def cli_crawl(url: str, cwd: Path, *options: str) -> subprocess.CompletedProcess:
    flush(CLI_DB)
    broker = f"{REDIS}/{CLI_DB}"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CRAWLER_")}, "PYTHONPATH": str(ROOT),
           "CRAWLER_BROKER_URL": broker, "CRAWLER_REDIS_URL": broker, "CRAWLER_PLUGINS": f"{RULES},{REQUESTS}"}
    return subprocess.run([CRAWLER_TASKS, "crawl", url, "--workers", "1", "--delay", "0", "--max-depth", "2",
                           "--store", "pages.db", "--quiet", *options],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_crawler_tasks_crawl_starts_a_render_worker_only_when_a_page_needs_one(js, tmp_path):
    plain = cli_crawl(js.url + "/", tmp_path, "--plugins", REQUESTS)
    assert plain.returncode == 0, plain.stderr
    assert "render worker" not in plain.stderr
    assert len(list(open_store(str(tmp_path / "pages.db")).records())) == 1
    (tmp_path / "pages.db").unlink()
    rendered = cli_crawl(js.url + "/", tmp_path, "--plugins", RULES)
    assert rendered.returncode == 0, rendered.stderr
    assert "starting a render worker (Chromium) for the pages to render" in rendered.stderr
    records = {r.url: r for r in open_store(str(tmp_path / "pages.db")).records()}
    assert items(records) == expected()


def test_a_prefork_render_worker_recycles_its_children_with_their_browsers(pool, js, tmp_path):
    pool.renderers.stop()
    # Each new child launches its browser inside its first task: on a loaded machine that took
    # longer than the pool's 4 s task limit (visibility timeout 6 s), and the page lost its items.
    roomy = pool.settings.replace(visibility_timeout=30)
    prefork = Workers(roomy, concurrency=1, pool="prefork", name=f"render-prefork-{token()}@%h",
                      queues=(routing.RENDER_QUEUE,), log_path=str(tmp_path / "prefork.log"),
                      extra_env={"PYTHONPATH": str(ROOT)}, loglevel="INFO")
    prefork.cmds = [[*cmd, "--max-tasks-per-child", "2"] for cmd in prefork.cmds]
    prefork.start()
    try:
        _, records = pool.crawl([{"url": f"{js.url}/item/{i}", "render": True} for i in range(1, 6)],
                                plugins=(REQUESTS,))
        assert items(records) == expected()
        log = (tmp_path / "prefork.log").read_text()
        assert log.count("browser 1 started") >= 3 and "ForkPoolWorker" in log  # a browser per child
        assert len([p for p in _chromium_of(prefork.proc.pid) if p.status() != psutil.STATUS_ZOMBIE
                    and "--type=" not in " ".join(p.cmdline())]) <= 1  # the children gone took theirs
    finally:
        prefork.stop()
        pool.renderers = pool.render_worker().start()
