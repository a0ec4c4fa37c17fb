"""The ``crawler-tasks`` command as a user types it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import redis

from crawler_tasks.cli.local import free_port
from crawler_tasks.core.settings import pool_missing
from tests.helpers import REDIS, token

PREFIX = os.environ["CRAWLER_KEY_PREFIX"]  # set by conftest

#: CRAWLER_CLI_TEST_DB lets a second run (another checkout's) use its own database.
CLI_DB = int(os.environ.get("CRAWLER_CLI_TEST_DB", "10"))


def cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crawler_tasks.cli.main", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, input=stdin, timeout=timeout)


def cli_env() -> dict[str, str]:
    return {"CRAWLER_BROKER_URL": f"{REDIS}/{CLI_DB}", "CRAWLER_REDIS_URL": f"{REDIS}/{CLI_DB}"}


@pytest.fixture
def empty_broker() -> redis.Redis:
    client = redis.Redis.from_url(f"{REDIS}/{CLI_DB}")
    client.flushdb()
    return client


def assert_one_line_error(result: subprocess.CompletedProcess, code: int) -> None:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crawler-tasks: error:"), result.stderr


@pytest.mark.parametrize("args", [
    ["crawl", "ftp://example.test/"],
    ["crawl", "http://"],
    ["crawl", "not a url"],
    ["crawl", "http://127.0.0.1:9/", "--store", "mongo://x"],
    ["crawl", "http://127.0.0.1:9/", "--workers", "0"],
    ["crawl", "http://127.0.0.1:9/", "--max-pages", "ten"],
    ["crawl"],
    ["submit", "http://127.0.0.1:9/ok", "mailto:someone@example.test"],
    ["submit"],
    ["submit", "--file", "/nonexistent/seeds.txt"],
    ["submit", "http://127.0.0.1:9/ok", "--crawl-id", "c" * 129],
    ["crawl", "http://127.0.0.1:9/", "--crawl-id", "c" * 129],
    ["export", "--store", "/nonexistent/pages.db"],
    ["frobnicate"],
])
def test_bad_input_is_one_line_nonzero_and_enqueues_nothing(args, empty_broker):
    assert_one_line_error(cli(*args, env=cli_env()), 2)
    assert empty_broker.dbsize() == 0


def test_replay_to_a_malformed_store_is_one_line_before_any_letter_moves():
    result = cli("replay-dead", "--to", "mongo://db.internal/pages", env=cli_env())
    assert_one_line_error(result, 2)
    assert "unknown store 'mongo://db.internal/pages': scheme 'mongo'" in result.stderr


def test_bad_line_in_seed_file_enqueues_nothing(empty_broker, tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/a\n{\"url\": \"http://127.0.0.1:9/b\"}\nftp://nope/\n")
    assert_one_line_error(cli("submit", "--file", str(seeds), env=cli_env()), 2)
    assert empty_broker.dbsize() == 0


def test_a_pool_whose_package_is_not_installed_is_one_line_before_any_worker_starts():
    assert pool_missing("threads", lambda name: None) is None and pool_missing("gevent", lambda name: object()) is None
    # gevent as a plain install (no extra) lacks it: import finds nothing of that name.
    code = ("import sys; sys.modules['gevent'] = None; from crawler_tasks.cli.main import main; "
            "sys.exit(main(['crawl', 'http://127.0.0.1:9/']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "CRAWLER_WORKER_POOL": "gevent"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "crawler-tasks: error: CRAWLER_WORKER_POOL=gevent needs gevent, which is not installed: "
        "pip install 'crawler-tasks[gevent]'"]


def test_bad_setting_is_one_line(empty_broker):
    assert_one_line_error(cli("stats", env={**cli_env(), "CRAWLER_MAX_RETRIES": "many"}), 2)


@pytest.mark.parametrize("command", [["submit", "http://127.0.0.1:9/"], ["stats"], ["seeds"]])
def test_unreachable_broker_is_one_line_exit_3(command):
    dead = f"redis://127.0.0.1:{free_port()}/0"
    result = cli(*command, env={"CRAWLER_BROKER_URL": dead, "CRAWLER_REDIS_URL": dead})
    assert_one_line_error(result, 3)


def test_a_short_visibility_timeout_alone_just_works(empty_broker):
    # The settings that must fit inside it (download timeout, retry backoff) follow it;
    # only values the user set that cannot work together are refused.
    env = {**cli_env(), "CRAWLER_VISIBILITY_TIMEOUT": "10", "CRAWLER_RETRY_BACKOFF_MAX": "",
           "CRAWLER_DOWNLOAD_TIMEOUT": ""}
    result = cli("submit", "http://127.0.0.1:9/vt", env=env)
    assert result.returncode == 0, result.stderr
    result = cli("submit", "http://127.0.0.1:9/vt2", env={**env, "CRAWLER_RETRY_BACKOFF_MAX": "30"})
    assert_one_line_error(result, 2)
    assert "retry_backoff_max: must be below visibility_timeout (30.0 >= 10)" in result.stderr


def test_submit_reads_urls_and_seed_objects_and_reports_duplicates(empty_broker, tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# seeds\nhttp://127.0.0.1:9/a\n"
                     '{"url": "http://127.0.0.1:9/b", "method": "HEAD", "meta": {"url_id": 1}}\n')
    result = cli("submit", "--file", str(seeds), "http://127.0.0.1:9/a#again", env=cli_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "enqueued 2 of 3 URL(s) (1 already seen)"
    stats = json.loads(cli("stats", "--json", env=cli_env()).stdout)
    assert stats["queues"]["crawl.fetch"]["band 5"] == 2
    assert stats["crawls"]["default"]["duplicates"] == 1


@pytest.mark.parametrize("dedup", ["set", "bloom"])
def test_stats_shows_each_crawl_s_gate(empty_broker, dedup):
    env = {**cli_env(), "CRAWLER_DEDUP": dedup, "CRAWLER_BLOOM_CAPACITY": "100000"}
    assert cli("submit", "http://127.0.0.1:9/a", "http://127.0.0.1:9/b", env=env).returncode == 0
    gate = json.loads(cli("stats", "--json", env=env).stdout)["crawls"]["default"]["gate"]
    assert gate["mode"] == dedup and gate["items"] == 2 and gate["bytes"] > 0
    if dedup == "bloom":
        assert gate["capacity"] == 100_000 and gate["error_rate"] == 0.001
        assert gate["bytes"] <= 100_000 * 2.4  # the first slice, allocated as URLs land in it
    text = cli("stats", env=env).stdout
    assert f"gate                    {dedup}: 2 URLs in" in text


def test_submit_past_max_queued_is_one_line_and_enqueues_nothing(empty_broker):
    env = {**cli_env(), "CRAWLER_MAX_QUEUED": "2"}
    assert cli("submit", *[f"http://127.0.0.1:9/{i}" for i in range(3)], env=env).returncode == 0
    result = cli("submit", "http://127.0.0.1:9/more", env=env)
    assert_one_line_error(result, 3)
    assert "CRAWLER_MAX_QUEUED=2" in result.stderr
    assert json.loads(cli("stats", "--json", env=env).stdout)["queues"]["crawl.fetch"]["total"] == 3


def test_crawl_on_embedded_redis_then_export(site, tmp_path):
    store = str(tmp_path / "pages.db")
    env = {"CRAWLER_BROKER_URL": "", "CRAWLER_REDIS_URL": ""}
    result = cli("crawl", f"{site.url}/", "--store", store, "--workers", "2", "--crawl-id", "cli1",
                 "--embedded-redis", env=env)
    assert result.returncode == 0, result.stderr
    assert "starting an embedded Redis" in result.stderr
    summary = {line[:20].strip(): line[20:] for line in result.stdout.splitlines()}
    assert summary["pages stored"] == "3" and summary["failed"] == "0"
    assert summary["redis"] == "embedded (gone with the crawl)"
    exported = [json.loads(line) for line in cli("export", "--store", store).stdout.splitlines()]
    assert sorted(r["url"] for r in exported) == [f"{site.url}/", f"{site.url}/page/1",
                                                  f"{site.url}/page/2"]
    assert {r["crawl_id"] for r in exported} == {"cli1"}


def test_a_configured_redis_that_does_not_answer_is_one_line_not_an_embedded_crawl(site, tmp_path):
    dead = f"redis://127.0.0.1:{free_port()}/0"
    result = cli("crawl", f"{site.url}/", "--store", str(tmp_path / "pages.db"),
                 env={"CRAWLER_BROKER_URL": "", "CRAWLER_REDIS_URL": dead})
    assert_one_line_error(result, 3)
    assert "CRAWLER_REDIS_URL" in result.stderr and "embedded" in result.stderr  # says how to get one
    assert not (tmp_path / "pages.db").exists()  # nothing crawled, nothing written


def test_crawl_max_depth_and_max_pages(site, tmp_path, empty_broker):
    t = token()
    store = str(tmp_path / "pages.db")
    result = cli("crawl", f"{site.url}/chain/{t}/0", "--store", store, "--max-depth", "2",
                 "--workers", "1", env=cli_env())
    assert result.returncode == 0, result.stderr
    assert len(cli("export", "--store", store).stdout.splitlines()) == 3
    result = cli("crawl", f"{site.url}/tree/{t}/0?size=50", "--store", store, "--max-pages", "7",
                 "--workers", "1", env=cli_env())
    assert result.returncode == 0, result.stderr
    assert {line[:20].strip(): line[20:] for line in result.stdout.splitlines()}["pages stored"] == "7"


# -- the private-network guard ---------------------------------------------------

#: The guard as a user gets it with no setting (the tests' loopback allowlist cleared), and
#: CRAWLER_DENY_PRIVATE_NETWORKS=1 said outright.
GUARDED = {"CRAWLER_PRIVATE_ALLOWLIST": "", "CRAWLER_DENY_PRIVATE_NETWORKS": "1"}


@pytest.mark.parametrize("seeds", [
    ["http://169.254.169.254/latest/meta-data/"],
    ["http://127.0.0.1:9/ok", "http://[64:ff9b::a9fe:a9fe]/"],
    ["--file", "-"],
])
def test_submit_of_a_seed_at_a_refused_address_is_one_line_and_enqueues_nothing(seeds, empty_broker):
    stdin = '{"url": "http://10.0.0.5/admin", "headers": {"X-Token": "t"}}\n'
    result = cli("submit", *seeds, env={**cli_env(), **GUARDED}, stdin=stdin)
    assert_one_line_error(result, 2)
    assert "refused:" in result.stderr and "CRAWLER_PRIVATE_ALLOWLIST" in result.stderr
    assert empty_broker.dbsize() == 0


def test_crawl_allows_the_hosts_typed_and_refuses_a_redirect_elsewhere(site, tmp_path, empty_broker):
    t, port = token(), site.url.rsplit(":", 1)[1]
    store = str(tmp_path / "pages.db")
    elsewhere = f"http://127.0.0.2:{port}/page/{t}-elsewhere"
    # 127.0.0.2 is a domain links may go to, yet not a host typed: the guard has the say.
    env = {**cli_env(), **GUARDED, "CRAWLER_ALLOWED_DOMAINS": "127.0.0.1,127.0.0.2,localhost"}
    result = cli("crawl", f"{site.url}/goto?to={elsewhere}", f"http://localhost:{port}/page/{t}",
                 "--store", store, "--workers", "1", env=env)
    assert result.returncode == 0, result.stderr
    records = {r["url"]: r for r in map(json.loads, cli("export", "--store", store).stdout.splitlines())}
    assert records[f"http://localhost:{port}/page/{t}"]["status"] == 200
    assert records[f"{site.url}/goto?to={elsewhere}"]["status"] == 302
    assert records[elsewhere]["description"] == (
        "refused: 127.0.0.2 is a loopback address (not in CRAWLER_PRIVATE_ALLOWLIST)")


def test_demo_crawls_its_own_local_site_with_the_guard_on(tmp_path):
    result = cli("demo", "--pages", "5", "--store", str(tmp_path / "demo.db"), "--workers", "1",
                 "--embedded-redis", env={"CRAWLER_BROKER_URL": "", "CRAWLER_REDIS_URL": "", **GUARDED})
    assert result.returncode == 0, result.stderr
    summary = {line[:20].strip(): line[20:] for line in result.stdout.splitlines()}
    assert summary["pages stored"] == "6" and summary["failed"] == "0"  # / and /page/0 to /page/4


@pytest.mark.parametrize("command", ["submit", "crawl"])
def test_a_seed_over_the_url_length_cap_is_one_line_and_enqueues_nothing(command, empty_broker):
    long_url = "http://127.0.0.1:9/" + "x" * 9000
    result = cli(command, "http://127.0.0.1:9/ok", long_url, env=cli_env())
    assert_one_line_error(result, 2)
    assert "9019 bytes, longer than CRAWLER_MAX_URL_LENGTH (8192)" in result.stderr
    assert empty_broker.dbsize() == 0
    result = cli("submit", long_url, env={**cli_env(), "CRAWLER_MAX_URL_LENGTH": "10000"})
    assert result.returncode == 0, result.stderr


def crawl_keys(client: redis.Redis, crawl_id: str) -> list[bytes]:
    return list(client.scan_iter(match=f"{PREFIX}:{{{crawl_id}}}:*"))


def test_purge_removes_a_finished_crawl_s_state_and_keeps_the_others(site, tmp_path, empty_broker):
    t = token()
    store = str(tmp_path / "pages.db")
    for crawl_id in ("old", "kept"):
        result = cli("crawl", f"{site.url}/tree/{t}{crawl_id}/0?size=20", "--store", store,
                     "--workers", "1", "--crawl-id", crawl_id, env={**cli_env(), "CRAWLER_DEDUP": "bloom",
                                                                    "CRAWLER_BLOOM_CAPACITY": "10000"})
        assert result.returncode == 0, result.stderr
    assert len(crawl_keys(empty_broker, "old")) >= 3  # the Bloom filter's keys, stats, config
    result = cli("purge", "--crawl-id", "old", env=cli_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("purged crawl old: ")
    assert crawl_keys(empty_broker, "old") == []
    assert empty_broker.smembers(f"{PREFIX}:crawls") == {b"kept"}
    assert empty_broker.hkeys(f"{PREFIX}:stats_flushed") in ([], [b"kept"])
    assert len(crawl_keys(empty_broker, "kept")) >= 3
    exported = cli("export", "--store", store, "--crawl-id", "old").stdout.splitlines()
    assert len(exported) == 20  # the records stay in their store
    assert_one_line_error(cli("purge", "--crawl-id", "old", env=cli_env()), 2)  # nothing left


def test_purge_refuses_a_crawl_with_work_outstanding_unless_forced(empty_broker):
    empty_broker.sadd(f"{PREFIX}:crawls", "busy")
    empty_broker.sadd(f"{PREFIX}:{{busy}}:outstanding", "task-1", "task-2")
    empty_broker.hset(f"{PREFIX}:{{busy}}:stats", "stored", 1)
    result = cli("purge", "--crawl-id", "busy", env=cli_env())
    assert_one_line_error(result, 2)
    assert "crawl busy has 2 task(s) outstanding" in result.stderr
    assert len(crawl_keys(empty_broker, "busy")) == 2
    result = cli("purge", "--crawl-id", "busy", "--force", env=cli_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "purged crawl busy: 2 key(s) removed"
    assert not empty_broker.smembers(f"{PREFIX}:crawls")
    # Its mark stays a while, so its fetches still queued are dropped when they come up.
    assert crawl_keys(empty_broker, "busy") == [f"{PREFIX}:{{busy}}:config".encode()]
    assert empty_broker.hget(f"{PREFIX}:{{busy}}:config", "control") == b"purged"
    assert 0 < empty_broker.ttl(f"{PREFIX}:{{busy}}:config") <= 7 * 86400


def test_crawl_lets_through_only_what_its_seeds_name_literally_never_a_name_or_metadata():
    from crawler_tasks.cli.crawl import allow_seed_hosts
    from crawler_tasks.core.settings import Settings
    from crawler_tasks.stages.seed import build_requests

    seeds = ["http://10.1.2.3/", "http://rebind.example/", "http://localhost:8080/", "http://169.254.169.254/",
             "http://[fd00::1]/"]
    allowed = allow_seed_hosts(Settings(), build_requests(seeds)).private_allowlist
    assert {"10.1.2.3", "localhost", "fd00::1"} <= set(allowed)
    assert "rebind.example" not in allowed  # its name may point anywhere later (DNS rebinding)
    assert "169.254.169.254" not in allowed


def test_export_items_and_items_say_what_is_wrong_in_one_line(tmp_path):
    assert_one_line_error(cli("export", "--format", "csv", "--store", str(tmp_path / "none.db")), 2)
    assert_one_line_error(cli("items", "--store", str(tmp_path / "none.db")), 2)
    archive = tmp_path / "warc"
    archive.mkdir()
    done = cli("export", "--items", "--store", f"warc://{archive}")
    assert_one_line_error(done, 2)
    assert "keeps no items feed" in done.stderr
    done = cli("items", "--store", "kafka://127.0.0.1:9/pages")
    assert_one_line_error(done, 2)
    assert "its items feed is the topic pages-items: read it with a Kafka consumer" in done.stderr
    from crawler_tasks.backends import open_store

    open_store(str(tmp_path / "empty.db")).upsert([])
    assert cli("items", "--store", str(tmp_path / "empty.db")).stdout == "no items\n"
