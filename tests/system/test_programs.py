"""Plugins in real workers: parse rules, items in every store, item pipelines, the per-crawl
choice of plugins, and what a failing rule, pipeline or plugin does.

Every crawl here is ``crawler-tasks crawl`` as a user types it (real ``celery worker``
processes, the real Redis, a local site); the shop walkthrough is the one docs/programming.md gives.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery
from elasticsearch import Elasticsearch

from crawler_tasks.backends import open_store
from tests.fakes.es_server import ESServer
from tests.fakes.hbase_server import HBaseServer
from tests.helpers import REDIS, token

ROOT = Path(__file__).resolve().parents[2]
SHOP = ROOT / "examples" / "shop"
PROGRAM_DB = int(os.environ.get("CRAWLER_PROGRAM_TEST_DB", "5"))
CRAWLER_TASKS = str(Path(sys.executable).parent / "crawler-tasks")
PRICED = {n for n in range(1, 13)} - {4, 9}


def env(**extra: str) -> dict[str, str]:
    url = f"{REDIS}/{PROGRAM_DB}"
    base = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLER_")}
    path = f"{Path(sys.executable).parent}{os.pathsep}{base.get('PATH', '')}"  # as in an activated venv
    return {**base, "PATH": path, "CRAWLER_BROKER_URL": url, "CRAWLER_REDIS_URL": url, "PYTHONPATH": str(ROOT),
            **extra}


def run(*args: str, cwd: Path = ROOT, timeout: float = 180, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([CRAWLER_TASKS, *args], cwd=cwd, env=env(**extra), capture_output=True,
                          text=True, timeout=timeout)


def records(store: str, cwd: Path = ROOT) -> dict[str, dict]:
    done = run("export", "--store", store, "--no-body", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return {(r := json.loads(line))["url"]: r for line in done.stdout.splitlines()}


@pytest.fixture(scope="module", autouse=True)
def clean_db() -> None:
    redis.Redis.from_url(f"{REDIS}/{PROGRAM_DB}").flushdb()


@pytest.fixture(scope="module")
def shop_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of examples/shop, where the walkthrough's commands run as a user runs them."""
    target = tmp_path_factory.mktemp("example") / "shop"
    shutil.copytree(SHOP, target, ignore=shutil.ignore_patterns("__pycache__", "*.db"))
    return target


def example_copy(factory: pytest.TempPathFactory, folder: Path) -> Path:
    """A copy of an example's folder, where its commands run as a user runs them."""
    target = factory.mktemp("example") / folder.name
    shutil.copytree(folder, target, ignore=shutil.ignore_patterns("__pycache__", "*.db", "*.jsonl", "logs"))
    return target


@contextlib.contextmanager
def example_site(folder: Path, script: str, banner: str) -> Iterator[str]:
    """An example's site started as its walkthrough starts it, on a free port: its base URL
    (no trailing slash)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, script, "--port", str(port)], cwd=folder,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith(banner)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def shop(shop_dir: Path) -> Iterator[str]:
    """The example's own site, started as the walkthrough starts it (on a free port)."""
    with example_site(shop_dir, "shop_site.py", "shop at ") as base:
        yield f"{base}/"


def crawl_shop(shop_dir: Path, url: str, store: str, *more: str, **extra: str) -> subprocess.CompletedProcess:
    done = run("crawl", "--plugins", "shop_plugin", "--delay", "0", "--workers", "1", "--quiet",
               "--store", store, *more, url, cwd=shop_dir,
               CRAWLER_ITEM_PIPELINES="shop_plugin.normalise_price:100", **extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def crawl_id_of(done: subprocess.CompletedProcess) -> str:
    return next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("crawl "))


def test_the_shop_walkthrough_runs_as_written(shop: str, shop_dir: Path):
    """docs/programming.md's commands, in a copy of examples/shop (only the port differs)."""
    doc = (ROOT / "docs" / "programming.md").read_text()
    crawl_line = ("export CRAWLER_ITEM_PIPELINES=shop_plugin.normalise_price:100 "
                  "CRAWLER_MIDDLEWARES=shop_plugin.Identify:100\n"
                  "crawler-tasks crawl --plugins shop_plugin --delay 0 --store shop.db http://127.0.0.1:8765/")
    export_line = """crawler-tasks export --store shop.db --no-body | grep '"rule": "shop_plugin.product"' | head -2"""
    assert crawl_line in doc and export_line in doc and "\ncrawler-tasks stats\n" in doc
    done = subprocess.run(crawl_line.replace("http://127.0.0.1:8765/", shop), shell=True, cwd=shop_dir,
                          env=env(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "pages stored        15" in done.stdout
    shown = subprocess.run(export_line, shell=True, cwd=shop_dir, env=env(), capture_output=True, text=True)
    lines = [json.loads(line) for line in shown.stdout.splitlines()]
    assert len(lines) == 2 and all(r["url"].startswith(f"{shop}product/") for r in lines)
    stats = run("stats", cwd=shop_dir).stdout
    assert re.search(r"\n  items/kept +10\n", stats) and re.search(r"\n  items/dropped/no_price +2\n", stats)

    got = records("shop.db", cwd=shop_dir)
    products = {f"{shop}product/{n}" for n in range(1, 13)}
    lists = {shop, f"{shop}list/2", f"{shop}list/3"}
    assert set(got) == products | lists  # follow=False: only what the rules asked for (no /about)
    for n in range(1, 13):
        record = got[f"{shop}product/{n}"]
        assert record["rule"] == "shop_plugin.product"
        expected = [{"name": f"Product {n}", "price": float(f"{1000 + 37 * n}.{n:02d}"),
                     "sku": f"SKU-{n:04d}"}] if n in PRICED else []
        assert record["items"] == expected
    assert all(got[u]["rule"] == "shop_plugin.listing" and got[u]["items"] == [] for u in lists)
    assert all(["From", "crawler@shop.example"] in r["request"]["headers"] for r in got.values())


def test_items_reach_elasticsearch_and_hbase_as_they_reach_sqlite(shop: str, shop_dir: Path, tmp_path: Path):
    with ESServer() as es, HBaseServer() as hbase:
        es_uri = f"elasticsearch://{es.url.split('://', 1)[1]}/shop"
        hbase_uri = f"hbase://{hbase.host}:{hbase.port}/shop"
        sqlite = f"sqlite:///{tmp_path / 'shop.db'}"
        crawl_id = crawl_id_of(crawl_shop(shop_dir, shop, f"{sqlite},{es_uri},{hbase_uri}"))
        local = {r.url: r.items for r in open_store(sqlite).records(crawl_id)}
        assert sum(len(items) for items in local.values()) == 10
        assert {r.url: r.items for r in open_store(es_uri).records(crawl_id)} == local
        assert {r.url: r.items for r in open_store(hbase_uri).records(crawl_id)} == local
        # Items are searchable in Elasticsearch by their fields (a flattened field).
        hits = Elasticsearch(es.url).search(index="shop", query={"term": {"items.sku": "SKU-0007"}})
        assert [h["_source"]["url"] for h in hits["hits"]["hits"]] == [f"{shop}product/7"]
        # The items feed: Elasticsearch's (an index per type) gives what SQLite's table gives.
        def feed(uri: str) -> list[str]:
            done = run("export", "--items", "--store", uri, "--crawl-id", crawl_id, cwd=shop_dir)
            assert done.returncode == 0, done.stderr
            return sorted(done.stdout.splitlines())
        assert len(feed(sqlite)) == 10 and feed(es_uri) == feed(sqlite)
        assert "shop-items-item" in es.index_names()


def test_two_crawls_of_one_site_into_one_store_keep_their_own_records(shop: str, shop_dir: Path, tmp_path: Path):
    store = str(tmp_path / "both.db")
    first = crawl_id_of(crawl_shop(shop_dir, shop, store))
    second = crawl_id_of(crawl_shop(shop_dir, shop, store, "--max-pages", "8"))
    crawls = {c["crawl_id"]: c for c in json.loads(run("crawls", "--json", cwd=shop_dir).stdout)}
    for crawl_id, pages in ((first, 15), (second, 8)):
        exported = run("export", "--store", store, "--crawl-id", crawl_id, "--no-body", cwd=shop_dir).stdout
        assert len(exported.splitlines()) == crawls[crawl_id]["counters"]["stored"] == pages


@pytest.mark.parametrize("workers", ["1", "2"])
def test_pipelines_and_middlewares_open_and_close_once_on_every_worker_that_ran_them(
        shop: str, shop_dir: Path, tmp_path: Path, workers: str):
    log = tmp_path / "lifecycle.jsonl"
    done = run("crawl", "--plugins", "shop_plugin,tests.programs.lifecycle", "--delay", "0", "--workers", workers,
               "--quiet", "--store", str(tmp_path / "life.db"), shop, cwd=shop_dir,
               CRAWLER_ITEM_PIPELINES="shop_plugin.normalise_price:100,tests.programs.lifecycle.Tally:200",
               CRAWLER_MIDDLEWARES="tests.programs.lifecycle.Watch:100", LIFECYCLE_LOG=str(log))
    assert done.returncode == 0, done.stdout + done.stderr
    crawl_id = crawl_id_of(done)
    notes = [json.loads(line) for line in log.read_text().splitlines()]
    assert {n["crawl_id"] for n in notes} == {crawl_id}
    for who in ("pipeline", "middleware"):
        mine = [n for n in notes if n["who"] == who]
        pids = {n["pid"] for n in mine}
        assert 1 <= len(pids) <= int(workers)
        for pid in pids:  # every process that opened the crawl closed it, once, after
            assert [n["event"] for n in mine if n["pid"] == pid] == ["open", "close"]
    assert sum(n["items"] for n in notes if n["event"] == "close" and n["who"] == "pipeline") == 10
    assert all(n["plugins"] == ["shop_plugin", "tests.programs.lifecycle"] for n in notes if n["event"] == "open"
               and n["who"] == "pipeline")


def test_a_crawl_gets_only_the_plugins_it_names(shop: str, shop_dir: Path, tmp_path: Path):
    # Both plugins are loaded; catch_all's rule matches every page at priority 100.
    loaded = {"CRAWLER_PLUGINS": "tests.programs.catch_all,shop_plugin"}
    store = str(tmp_path / "named.db")
    crawl_shop(shop_dir, shop, store, **loaded)
    assert {r["rule"] for r in records(store, cwd=shop_dir).values()} == {"shop_plugin.listing", "shop_plugin.product"}

    everything = str(tmp_path / "all.db")
    done = run("crawl", "--delay", "0", "--workers", "1", "--quiet", "--store", everything, "--max-pages", "3",
               shop, cwd=shop_dir, **loaded)
    assert done.returncode == 0, done.stderr
    got = records(everything, cwd=shop_dir)
    assert {r["rule"] for r in got.values()} == {"tests.programs.catch_all.everything"}
    assert all(r["items"] == [{"caught_by": "catch_all", "url": u}] for u, r in got.items())


@pytest.mark.parametrize("pipeline", ["local", "split"])
def test_failing_rules_and_pipelines_are_recorded_counted_and_do_not_stop_the_crawl(site, tmp_path: Path,
                                                                                    pipeline: str):
    """With CRAWLER_PIPELINE=split the rules and pipelines run in crawl.parse (and the worker
    log goes where --log-file says)."""
    base = f"{site.url}/rules/{token()}"
    store = str(tmp_path / "faulty.db")
    own_log = ["--log-file", str(tmp_path / "mine" / "workers.log")] if pipeline == "split" else []
    done = run("crawl", "--delay", "0", "--workers", "1", "--quiet", "--store", store, *own_log, f"{base}/start",
               CRAWLER_PLUGINS="tests.programs.faulty", CRAWLER_PIPELINE=pipeline,
               CRAWLER_ITEM_PIPELINES="tests.programs.faulty.exploding:10")
    assert done.returncode == 0, done.stderr
    assert not Path(store + "-wal").exists()  # the workers closed the file whole (its log checkpointed)
    got = records(store)
    assert set(got) == {f"{base}/{n}" for n in ("start", "fail", "odd", "items", "linked", "target")}
    fail = got[f"{base}/fail"]
    assert fail["items"] == [{"partial": True}] and fail["status"] == 200  # what it yielded before failing
    assert fail["description"] == "rule tests.programs.faulty.fails failed: ValueError: no such field on this page"
    assert f"{base}/linked" in got  # the failed rule (follow=True) still followed its page's links
    assert "yielded a int" in got[f"{base}/odd"]["description"]
    items = got[f"{base}/items"]
    assert items["items"] == [{"n": 1}]
    assert items["description"] == ("item pipeline tests.programs.faulty.exploding failed: "
                                    "RuntimeError: pipeline bug")
    assert got[f"{base}/target"]["meta"] == {"from": "rule"}
    crawl_id = crawl_id_of(done)
    stats = json.loads(run("stats", "--crawl-id", crawl_id, "--json").stdout)["crawls"][crawl_id]
    assert stats["plugin/failed/rule"] == 2 and stats["plugin/failed/pipeline"] == 1
    assert stats["items/dropped/pipeline_failed"] == 1 and stats["items/kept"] == 2
    assert stats.get("errors", 0) == 0 and stats["stored"] == 6
    # The workers' warnings are kept, in a log beside the store that the summary names.
    [log] = [line[20:] for line in done.stdout.splitlines() if line.startswith("worker log")]
    assert log == (own_log[1] if own_log else str(tmp_path / "logs" / f"{crawl_id}.log"))
    assert "rule tests.programs.faulty.fails failed on" in Path(log).read_text()


def test_a_plugin_package_whose_rules_sit_in_a_module_it_never_imports_is_named_at_start(site, tmp_path: Path):
    done = run("crawl", "--delay", "0", "--workers", "1", "--quiet", "--store", str(tmp_path / "q.db"),
               "--plugins", "tests.programs.quiet_pkg", f"{site.url}/page/{token()}")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "crawler-tasks: warning: CRAWLER_PLUGINS: 'tests.programs.quiet_pkg' registered no rule, pipeline or "
        "middleware: nothing of it runs (rules in a package's submodules count once it imports them, e.g. "
        "'from . import rules' in its __init__.py)"]


def test_a_plugin_that_fails_to_import_stops_the_worker_with_one_line():
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "celery", "-A", "crawler_tasks", "worker", "-P", "threads",
                           "-c", "1", "--without-mingle", "--without-gossip"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env=env(CRAWLER_PLUGINS="tests.programs.broken"))
    assert done.returncode == 2
    # (Celery's own warning about running as root may come first.)
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "crawler_tasks: CRAWLER_PLUGINS: cannot import 'tests.programs.broken': "
        "ImportError: this plugin is broken on purpose")
    assert time.monotonic() - start < 30

    crawl = run("crawl", "--plugins", "no_such_plugin", "http://127.0.0.1:9/")
    assert crawl.returncode == 2
    assert crawl.stderr.strip().splitlines() == [
        "crawler-tasks: error: CRAWLER_PLUGINS: cannot import 'no_such_plugin': ModuleNotFoundError: "
        "No module named 'no_such_plugin'"]
    pipeline = run("crawl", "http://127.0.0.1:9/", CRAWLER_ITEM_PIPELINES="tests.programs.faulty.missing:5")
    assert pipeline.returncode == 2 and "'tests.programs.faulty.missing' names nothing" in pipeline.stderr


def test_middlewares_in_a_real_crawl(site, tmp_path: Path):
    base = f"{site.url}/mw/{token()}"
    store = str(tmp_path / "mw.db")
    done = run("crawl", "--delay", "0", "--workers", "1", "--quiet", "--store", store, f"{base}/start",
               CRAWLER_MIDDLEWARES="tests.programs.middlewares.Second:200,tests.programs.middlewares.First:100",
               CRAWLER_RETRY_BACKOFF="0.2")
    assert done.returncode == 0, done.stderr
    got = records(store)
    assert set(got) == {f"{base}/{n}" for n in ("start", "plain", "plain?swapped=1", "ban", "broken")}
    plain = got[f"{base}/plain"]
    assert ["X-Order", "first,second"] in plain["request"]["headers"]  # as sent, ascending priority
    assert plain["headers"]["x-order"] == "second,first"  # as read back, descending priority
    assert plain["meta"]["marked_by"] == "first"
    assert "Welcome to ban" in got[f"{base}/ban"]["text"]  # the ban page was retried away
    assert got[f"{base}/broken"]["description"] == (
        "response middleware tests.programs.middlewares.Second failed: KeyError: 'no such header'")
    crawl_id = crawl_id_of(done)
    stats = json.loads(run("stats", "--crawl-id", crawl_id, "--json").stdout)["crawls"][crawl_id]
    assert stats["requests/dropped/not_wanted"] == 1 and stats["requests/dropped/offsite"] == 1
    assert stats["requests/replaced"] == 1
    assert stats["retries"] == 2 and stats["retry/reason_count/ban_page"] == 2
    assert stats["plugin/failed/middleware"] == 1 and stats["stored"] == 5


def test_the_error_handler_hears_of_every_kind_of_failure_and_its_follow_ups_are_crawled(site, tmp_path: Path):
    token_ = token()
    told = tmp_path / "failures.jsonl"
    store = str(tmp_path / "handled.db")
    done = run("crawl", "--delay", "0", "--workers", "1", "--quiet", "--store", store,
               f"{site.url}/rules/{token_}/failing",
               CRAWLER_PLUGINS="tests.programs.faulty", CRAWLER_ITEM_PIPELINES="tests.programs.faulty.exploding:10",
               CRAWLER_MIDDLEWARES="tests.programs.middlewares.Second:200",
               CRAWLER_ERROR_HANDLER="tests.programs.handler.on_error", CRAWLER_MAX_RETRIES="0",
               CRAWLER_TEST_FAILURES=str(told))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in told.read_text().splitlines()]
    heard = [(f["kind"], f["reason"], f["url"], f["status"]) for f in lines if f.get("errback")]
    assert heard == [("download", "connection_reset", f"{site.url}/reset/{token_}", None)]  # its errback
    failures = sorted((f["kind"], f["reason"], f["url"], f["status"]) for f in lines if not f.get("errback"))
    assert failures == sorted([
        ("download", "connection_reset", f"{site.url}/reset/{token_}", None),
        ("rule", "ValueError", f"{site.url}/rules/{token_}/fail", 200),
        ("pipeline", "RuntimeError", f"{site.url}/rules/{token_}/items", 200),
        ("download", "http_500", f"{site.url}/broken/{token_}", 500),
        ("middleware", "KeyError", f"{site.url}/mw/{token_}/broken", 200)])
    first = next(f for f in lines if not f.get("errback"))
    assert first["crawl_id"] == crawl_id_of(done) and first["depth"] == 1 and first["request_url"] == first["url"]
    got = records(store)
    for kind, reason in (("rule", "ValueError"), ("pipeline", "RuntimeError"), ("download", "http_500"),
                         ("middleware", "KeyError"), ("download", "connection_reset")):
        assert got[f"{site.url}/page/handled-{kind}-{reason}"]["status"] == 200  # the follow-up, crawled
    assert got[f"{site.url}/broken/{token_}"]["description"] == "HTTP 500"  # recorded as always


def test_the_error_handler_hears_of_records_a_store_refused_once_each(site, tmp_path: Path):
    told = tmp_path / "failures.jsonl"
    with ESServer() as es:
        Elasticsearch(es.url).indices.create(index="strict", mappings={"properties": {"title": {"type": "integer"}}})
        url = f"{site.url}/page/{token()}"
        done = run("crawl", "--delay", "0", "--workers", "1", "--quiet", "--store",
                   f"elasticsearch://{es.url.split('://', 1)[1]}/strict", url,
                   CRAWLER_ERROR_HANDLER="tests.programs.handler.on_error", CRAWLER_TEST_FAILURES=str(told))
        assert done.returncode == 0, done.stderr
    failures = [json.loads(line) for line in told.read_text().splitlines()]
    # The page, then the handler's follow-up (refused too); its own follow-up is a duplicate.
    assert [(f["kind"], f["reason"], f["url"]) for f in failures] == [
        ("store", "refused", url), ("store", "refused", f"{site.url}/page/handled-store-refused")]
    assert failures[0]["description"].startswith("store elasticsearch://")


def test_a_failing_error_handler_is_counted_and_changes_nothing_else(site, tmp_path: Path):
    store = str(tmp_path / "h.db")
    done = run("crawl", "--delay", "0", "--workers", "1", "--quiet", "--store", store, f"{site.url}/broken/{token()}",
               CRAWLER_ERROR_HANDLER="tests.programs.handler.broken", CRAWLER_MAX_RETRIES="0")
    assert done.returncode == 0, done.stderr
    crawl_id = crawl_id_of(done)
    stats = json.loads(run("stats", "--crawl-id", crawl_id, "--json").stdout)["crawls"][crawl_id]
    assert stats["plugin/failed/error_handler"] == 1 and stats["failures"] == 1 and stats["stored"] == 1


def shell_block(doc: str, marker: str) -> list[str]:
    """The lines of the ``sh`` code block of ``doc`` that holds ``marker``."""
    for block in re.findall(r"```sh\n(.*?)```", doc, re.S):
        if marker in block:
            return [line.strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]
    raise AssertionError(f"no sh block with {marker!r}")


def test_the_cluster_walkthrough_with_a_callback_into_the_shop_app_runs_as_written(shop_dir: Path):
    """docs/programming.md's cluster commands, line by line (the port and the Redis database
    differ): celery workers of both apps in the background, then crawler-tasks submit."""
    lines = shell_block((ROOT / "docs" / "programming.md").read_text(), "celery -A shop_app worker")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    shell = env()
    shell = {k: v for k, v in shell.items() if not k.startswith("CRAWLER_") and k != "PYTHONPATH"}
    procs: list[subprocess.Popen] = []
    (shop_dir / "pages.jsonl").unlink(missing_ok=True)
    try:
        for line in lines:
            line = line.replace("8765", str(port)).replace("redis://127.0.0.1:6379/0", f"{REDIS}/{PROGRAM_DB}")
            line = line.replace("$PWD", str(shop_dir))
            if line.startswith("cd "):
                continue  # the copy of examples/shop is where every command runs
            if line.startswith("export "):
                shell.update(part.split("=", 1) for part in shlex.split(line)[1:])
            elif line.endswith("&"):
                procs.append(subprocess.Popen(shlex.split(line[:-1]), cwd=shop_dir, env=shell,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                time.sleep(1.0 if "shop_site" in line else 0)
            else:
                done = subprocess.run(shlex.split(line), cwd=shop_dir, env=shell, capture_output=True, text=True,
                                      timeout=120)
                assert done.returncode == 0, done.stderr
                assert "enqueued 1 of 1 URL(s)" in done.stdout
        deadline = time.monotonic() + 90
        told: list[dict] = []
        while len(told) < 15:
            assert time.monotonic() < deadline, f"{len(told)} page callbacks arrived"
            time.sleep(0.3)
            path = shop_dir / "pages.jsonl"
            told = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        time.sleep(1.0)  # a duplicate would come about now
        told = [json.loads(line) for line in (shop_dir / "pages.jsonl").read_text().splitlines()]
        assert len(told) == len({t["url"] for t in told}) == 15
        assert sum(t["items"] for t in told) == 10 and {t["crawl_id"] for t in told} == {"shop"}

        # An app that knows only the broker sends crawl.submit by name (docs/api.md): the shop
        # app's worker, on crawl.callbacks alone, leaves it to the crawler's.
        other = Celery("other", broker=shell["CRAWLER_BROKER_URL"])
        other.send_task("crawl.submit", kwargs={"urls": [f"http://127.0.0.1:{port}/"], "crawl_id": "shop2",
                                                "plugins": ["shop_plugin"], "on_page": "shop_app.page_stored",
                                                "on_page_follow": True})
        while len([t for t in told if t["crawl_id"] == "shop2"]) < 15:
            assert time.monotonic() < deadline + 60, f"{len(told) - 15} page callbacks of the second crawl"
            time.sleep(0.3)
            told = [json.loads(line) for line in (shop_dir / "pages.jsonl").read_text().splitlines()]
        other.close()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)
