"""Broker and state URLs with passwords and TLS: ``rediss://`` and ``amqps://`` crawls verify
certificates, an untrusted server is one line and exit 3, and the password shows up nowhere.

Every server here is the test's own: a redis-server with TLS and ``requirepass``
on a free port (:class:`~tests.fakes.tls.TlsRedis`), and RabbitMQ (vhost
``crawlertls``) behind a TLS-terminating proxy (:class:`~tests.fakes.tls.TlsProxy`).
"""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
import redis
import requests
from elasticsearch import Elasticsearch
from kombu import Connection

from crawler_tasks.backends import open_store
from crawler_tasks.broker import lists
from crawler_tasks.cli.local import EmbeddedRedis, Workers, free_port, wait_drained
from crawler_tasks.core import codec, routing
from crawler_tasks.core.errors import SettingsError
from crawler_tasks.core.settings import Settings
from crawler_tasks.core.store_uris import split_uris
from crawler_tasks.service.celery_app import celery_config, create_app
from crawler_tasks.stages import feeds
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from crawler_tasks.state.connection import broker_params, redis_from_url, safe_url
from tests.cli.test_cli import assert_one_line_error
from tests.fakes.es_server import ESServer
from tests.fakes.polite_site import PoliteSite
from tests.fakes.proxy_server import ForwardProxy
from tests.fakes.site import Site
from tests.fakes.tls import PasswordRedis, Pki, TlsProxy, TlsRedis
from tests.helpers import LOOPBACK, SUFFIX, UNTHROTTLED, by_url, token
from tests.service.test_flower import poll, start_flower

#: The distinctive part of the password: no spelling of it may appear anywhere.
CORE = uuid.uuid4().hex
#: A password with every character a URL needs escaped.
PASSWORD = f"p/{CORE}:@?#%+&="
ENCODED = quote(PASSWORD, safe="")
VHOST = f"crawlertls{SUFFIX}"
RABBIT = ("127.0.0.1", 5672)
TREE = 12  # pages of the crawled tree


def rediss(server: TlsRedis, *, password: str = ENCODED, ca: str | None = None,
           host: str = "127.0.0.1") -> str:
    query = f"?{urlencode({'ssl_cert_reqs': 'required', 'ssl_ca_certs': ca})}" if ca else ""
    return f"rediss://:{password}@{host}:{server.port}/0{query}"


def amqps(proxy: TlsProxy, *, ca: str | None = None, host: str = "127.0.0.1") -> str:
    query = f"?{urlencode({'ssl_ca_certs': ca})}" if ca else ""
    return f"amqps://guest:guest@{host}:{proxy.port}/{VHOST}{query}"


def start_cli(*args: str, env: dict[str, str]) -> subprocess.Popen:
    """``crawler-tasks`` with ``env`` over a clean environment (no CA bundle of the caller's)."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("CRAWLER_") and k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    return subprocess.Popen([sys.executable, "-m", "crawler_tasks.cli.main", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**base, **env})


def finish(proc: subprocess.Popen, timeout: float = 60) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return finish(start_cli(*args, env=env))


def assert_no_secret(where: str, text: str | bytes, *secrets: str) -> None:
    data = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    for secret in (CORE, *secrets):
        at = data.find(secret)
        assert at < 0, f"{secret!r} leaked into {where}: ...{data[max(0, at - 200):at + 200]}"


def queued(client: redis.Redis) -> list[bytes]:
    """Every message waiting in a crawl queue of a Redis broker (each band is its own list)."""
    names = [lists.redis_list(q, p) for q in routing.QUEUE_ORDER for p in range(routing.MAX_BAND + 1)]
    return [m for name in names for m in client.lrange(name, 0, -1)]


def dump_redis(client: redis.Redis) -> dict[bytes, object]:
    """Every key and its value, whatever its type (the stats hash, crawl config, queues...),
    what is kept compressed (store entries, dead letters) decompressed."""
    out: dict[bytes, object] = {}
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        value = {b"string": lambda: client.get(key), b"hash": lambda: client.hgetall(key),  # noqa: B023 (called at once)
                 b"list": lambda: client.lrange(key, 0, -1), b"set": lambda: client.smembers(key),  # noqa: B023
                 b"zset": lambda: client.zrange(key, 0, -1, withscores=True)}.get(kind, lambda: kind)()  # noqa: B023
        out[key] = [_plain(v) for v in value] if isinstance(value, list) else _plain(value)
    return out


def _plain(value: object) -> object:
    """``value`` decompressed when it is a compressed entry or letter."""
    if isinstance(value, bytes) and value[:1] != b"{":
        try:
            return codec.unpack(value)
        except (*codec.DAMAGED, ValueError):
            return value
    return value


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_redis(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsRedis]:
    server = TlsRedis(tmp_path_factory.mktemp("tls-redis"), pki, PASSWORD).start()
    yield server
    server.stop()


def settings_for(tmp_path: Path, broker: str, state: str) -> Settings:
    return Settings(broker_url=broker, redis_url=state, key_prefix=f"sec{token()}",
                    store=str(tmp_path / "pages.db"), visibility_timeout=60, retry_backoff=0.1,
                    download_timeout=5, worker_concurrency=4, stall_timeout=60, **UNTHROTTLED)


def tree_seed(site) -> str:
    return f"{site.url}/tree/{token()}/0?size={TREE}"


# -- what the URLs turn into (no server) -------------------------------------

@pytest.mark.parametrize("url,expected", [
    ("rediss://:pw@h:6380/0", ("rediss://:pw@h:6380/0",
                               {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_check_hostname": True})),
    ("rediss://:pw@h:6380/0?ssl_ca_certs=/ca.pem&ssl_cert_reqs=required",
     ("rediss://:pw@h:6380/0", {"ssl_ca_certs": "/ca.pem", "ssl_cert_reqs": ssl.CERT_REQUIRED,
                                "ssl_check_hostname": True})),
    ("amqps://u:pw@rabbit.test:5671/v", ("amqps://u:pw@rabbit.test:5671/v",
                                        {"cert_reqs": ssl.CERT_REQUIRED, "server_hostname": "rabbit.test"})),
    ("amqps://u:pw@rabbit.test/v?ssl_ca_certs=/ca.pem&heartbeat=10",
     ("amqps://u:pw@rabbit.test/v?heartbeat=10",
      {"ca_certs": "/ca.pem", "cert_reqs": ssl.CERT_REQUIRED, "server_hostname": "rabbit.test"})),
    ("amqps://u:pw@h/v?ssl_cert_reqs=none", ("amqps://u:pw@h/v", {"cert_reqs": ssl.CERT_NONE})),
    ("redis://:pw@h:6379/0", ("redis://:pw@h:6379/0", None)),
    ("amqp://u:pw@h//", ("amqp://u:pw@h//", None)),
])
def test_tls_broker_urls_verify_certificates_unless_told_not_to(url, expected):
    assert broker_params(url) == expected
    config = celery_config(Settings(broker_url=url, redis_url="redis://h/0"))
    assert (config["broker_url"], config["broker_use_ssl"] or None) == expected


@pytest.mark.parametrize("url,message", [
    ("rediss://:pw@h/0?ssl_cert_reqs=maybe", "ssl_cert_reqs='maybe' is not one of required, optional, none"),
    ("amqps://u:pw@h/v?ssl_ca_path=/etc", "ssl_ca_path not supported for amqps://"),
])
def test_bad_tls_parameters_are_a_settings_error_without_the_password(url, message):
    with pytest.raises(SettingsError, match=message) as info:
        broker_params(url)
    assert "pw" not in str(info.value)


@pytest.mark.parametrize("secret", ["12?34", "56#78", "ab/cd", PASSWORD], ids=["?", "#", "/", "every-escape"])
def test_a_password_that_breaks_the_url_is_refused_and_not_shown(secret):
    # A parser would cut these inside the password and connect to (and show) a piece of it.
    for check in (broker_params, lambda url: redis_from_url(url, check=False)):
        with pytest.raises(SettingsError, match="is not a valid URL") as info:
            check(f"rediss://:{secret}@h:6380/0")
        assert str(info.value).startswith(("broker URL rediss://:**@h:6380/0 ",
                                           "Redis URL rediss://:**@h:6380/0 "))
        pieces = re.split(r"[/?#:@]", secret)
        assert not [p for p in pieces if len(p) > 1 and p in str(info.value)], str(info.value)


@pytest.mark.parametrize("url,shown", [
    (f"rediss://:{ENCODED}@h:6380/0?ssl_ca_certs=/ca.pem", "rediss://:**@h:6380/0"),
    (f"amqps://guest:{ENCODED}@h:5671/v", "amqps://guest:**@h:5671/v"),
    (f"rediss://:{PASSWORD}@h:6380/0", "rediss://:**@h:6380/0"),  # not percent-encoded: still masked
    ("redis://h:6379/0", "redis://h:6379/0"),
], ids=["rediss-encoded", "amqps-encoded", "rediss-raw", "no-password"])
def test_safe_url_masks_the_password_however_it_is_written(url, shown):
    assert safe_url(url) == shown


# -- crawls over TLS ---------------------------------------------------------

@pytest.fixture(scope="module")
def rediss_crawl(tls_redis: TlsRedis, pki: Pki, site, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One crawl over rediss:// (broker and state, with a password), through the CLI and workers.

    Returns everything a user or Flower could see of it.
    """
    tmp = tmp_path_factory.mktemp("rediss-crawl")
    url = rediss(tls_redis, ca=pki.ca_file)
    settings = settings_for(tmp, url, url)
    env = settings.to_env()
    client = tls_redis.client()
    client.flushdb()
    crawl_id, flaky = f"sec-{token()}", f"{site.url}/flaky/{token()}"
    seen: dict[str, str | bytes] = {}

    result = cli("submit", "--crawl-id", crawl_id, tree_seed(site), flaky, env=env)
    assert result.returncode == 0, result.stderr
    seen["submit"] = result.stdout + result.stderr
    # What Flower shows of a task (headers: argsrepr, kwargsrepr...) is in the message itself.
    messages = queued(client)
    assert len(messages) == 2
    seen["queued messages"] = b"\n".join(messages)

    log = tmp / "worker.log"
    workers = Workers(settings, concurrency=4, name=f"{crawl_id}@%h", log_path=str(log))
    workers.cmds = [[*cmd[:-1], "INFO"] for cmd in workers.cmds]  # more than the default shows
    rt = Runtime(settings, create_app(settings))
    workers.start()
    try:
        wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=60, workers=workers)
        # What Flower's worker pages show: the worker's configuration and stats (broker info).
        inspect = rt.app.control.inspect(timeout=2)
        seen["inspect conf"] = json.dumps(inspect.conf(), default=repr)
        seen["inspect stats"] = json.dumps(inspect.stats(), default=repr)
    finally:
        workers.stop()
    records = list(open_store(settings.store).records(crawl_id))
    stats = rt.stats.read(crawl_id)
    rt.close()

    # `crawler-tasks crawl` runs its own workers on the same servers.
    result = cli("crawl", tree_seed(site), "--workers", "1", "--crawl-id", f"{crawl_id}-cli",
                 "--store", settings.store, env=env)
    assert result.returncode == 0, result.stderr
    seen["crawl"] = result.stdout + result.stderr

    for args in (["stats", "--json"], ["stats"], ["export", "--store", settings.store]):
        result = cli(*args, env=env)
        assert result.returncode == 0, result.stderr
        seen[" ".join(args[:2])] = result.stdout + result.stderr
    exported = [json.loads(line) for line in seen["export --store"].splitlines()]

    seen["worker log"] = log.read_bytes()
    seen["redis keys and values"] = repr(dump_redis(client))
    return {"records": records, "stats": stats, "exported": exported, "seen": seen, "crawl_id": crawl_id,
            "cli_summary": seen["crawl"], "log": seen["worker log"]}


@pytest.mark.slow
def test_crawl_over_rediss_with_a_password_stores_the_pages(rediss_crawl):
    records = rediss_crawl["records"]
    assert len(records) == len({r.url for r in records}) == TREE + 1
    assert all(r.status == 200 for r in records), [r.description for r in records]
    stats = rediss_crawl["stats"]
    assert stats["stored"] == TREE + 1 and stats["retries"] == 2, stats
    assert {r["crawl_id"] for r in rediss_crawl["exported"]} == {rediss_crawl["crawl_id"],
                                                                 f"{rediss_crawl['crawl_id']}-cli"}
    assert "pages stored        12" in rediss_crawl["cli_summary"]
    assert b"Connected to rediss://:**@127.0.0.1" in rediss_crawl["log"]  # TLS, password masked
    # Flower's view of the worker: the masked URL, and verification on.
    conf = json.loads(rediss_crawl["seen"]["inspect conf"])
    (worker_conf,) = conf.values()
    assert worker_conf["broker_url"].startswith("rediss://:********@127.0.0.1:")
    assert worker_conf["broker_use_ssl"]["ssl_cert_reqs"] == ssl.CERT_REQUIRED


@pytest.mark.slow
def test_the_password_appears_in_no_output_log_message_record_or_counter(rediss_crawl):
    assert set(rediss_crawl["seen"]) == {
        "submit", "queued messages", "inspect conf", "inspect stats", "stats --json", "stats",
        "export --store", "crawl", "worker log", "redis keys and values"}
    for where, text in rediss_crawl["seen"].items():
        assert_no_secret(where, text, ENCODED, PASSWORD)


@pytest.mark.slow
def test_error_paths_do_not_show_the_password(tls_redis, pki):
    good = rediss(tls_redis, ca=pki.ca_file)
    cases = {
        "wrong password": rediss(tls_redis, password=f"x{CORE}", ca=pki.ca_file),
        "unreachable host": f"rediss://:{ENCODED}@127.0.0.1:{free_port()}/0",
        "password not percent-encoded": rediss(tls_redis, password=PASSWORD, ca=pki.ca_file),
    }
    procs = {  # at once: each waits for kombu's retry
        (name, command[0]): start_cli(*command, env={"CRAWLER_BROKER_URL": url, "CRAWLER_REDIS_URL": url})
        for name, url in cases.items() for command in (["submit", "http://127.0.0.1:9/a"], ["stats"])}
    # The state Redis refusing the password while the broker takes it.
    state = cli("submit", "http://127.0.0.1:9/a",
                env={"CRAWLER_BROKER_URL": good, "CRAWLER_REDIS_URL": cases["wrong password"]})
    assert_one_line_error(state, 3)
    assert_no_secret("state-Redis error", state.stdout + state.stderr, ENCODED, PASSWORD)
    for (name, command), proc in procs.items():
        result = finish(proc)
        assert_one_line_error(result, 2 if name == "password not percent-encoded" else 3)
        assert_no_secret(f"{command} with {name}", result.stdout + result.stderr, ENCODED, PASSWORD)
    assert queued(tls_redis.client()) == []


def test_crawl_with_a_refused_password_or_certificate_stops_instead_of_crawling_elsewhere(tls_redis, pki, tmp_path):
    # Nothing listening means an embedded Redis; a server that refuses us is a setting to fix.
    for url in (rediss(tls_redis, password=f"x{CORE}", ca=pki.ca_file), rediss(tls_redis)):
        result = cli("crawl", "http://127.0.0.1:9/a", "--store", str(tmp_path / "p.db"),
                     env={"CRAWLER_BROKER_URL": url, "CRAWLER_REDIS_URL": url})
        assert_one_line_error(result, 3)
        assert "refused the connection" in result.stderr and "embedded" not in result.stderr
        assert_no_secret("crawl error", result.stdout + result.stderr, ENCODED, PASSWORD)


# -- RabbitMQ over TLS -------------------------------------------------------

def rabbitmq_vhost() -> None:
    """Our own vhost, created when missing, with our queues emptied."""
    url = f"amqp://guest:guest@{RABBIT[0]}:{RABBIT[1]}/{VHOST}"
    try:
        conn = Connection(url, connect_timeout=3)
        conn.ensure_connection(max_retries=1)
    except Exception:
        for args in (["add_vhost", VHOST], ["set_permissions", "-p", VHOST, "guest", ".*", ".*", ".*"]):
            subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=120)
        conn = Connection(url, connect_timeout=3)
    with conn:
        for queue in routing.QUEUE_ORDER:
            channel = conn.channel()
            try:
                channel.queue_purge(queue)
            except Exception:  # not declared yet
                pass
            finally:
                try:
                    channel.close()
                except Exception:
                    pass


@pytest.fixture
def tls_proxy(pki: Pki) -> Iterator[TlsProxy]:
    proxy = TlsProxy(pki.server_context(), RABBIT).start()
    yield proxy
    proxy.stop()


@pytest.mark.slow
@pytest.mark.rabbitmq
def test_crawl_over_amqps_through_a_tls_proxy_with_rediss_state(tls_proxy, tls_redis, pki, site, tmp_path):
    rabbitmq_vhost()
    settings = settings_for(tmp_path, amqps(tls_proxy, ca=pki.ca_file), rediss(tls_redis, ca=pki.ca_file))
    rt = Runtime(settings, create_app(settings))
    crawl_id = f"sec-amqps-{token()}"
    log = tmp_path / "worker.log"
    workers = Workers(settings, concurrency=4, name=f"{crawl_id}@%h", log_path=str(log)).start()
    try:
        assert submit_requests(rt, build_requests(tree_seed(site), crawl_id=crawl_id)) == 1
        wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=60, workers=workers)
    finally:
        workers.stop()
    records = list(open_store(settings.store).records(crawl_id))
    assert len(records) == len({r.url for r in records}) == TREE
    assert rt.stats.read(crawl_id)["stored"] == TREE
    rt.close()
    assert tls_proxy.handshakes >= 2  # this process and the worker went through TLS
    assert_no_secret("worker log", log.read_bytes(), ENCODED, PASSWORD, "guest:guest")


# -- untrusted servers -------------------------------------------------------

@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """Another CA: a certificate from it is not trusted by anyone here."""
    return Pki(tmp_path_factory.mktemp("stranger"))


@pytest.fixture(scope="module")
def ip_only(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA whose server certificate names 127.0.0.1 only (not localhost)."""
    return Pki(tmp_path_factory.mktemp("ip-only"), names=("127.0.0.1",))


@pytest.fixture
def untrusted_servers(stranger: Pki, ip_only: Pki, tmp_path: Path) -> Iterator[dict]:
    servers = {"stranger": TlsRedis(tmp_path / "r1", stranger, PASSWORD).start(),
               "ip-only": TlsRedis(tmp_path / "r2", ip_only, PASSWORD).start()}
    proxies = {"proxy": TlsProxy(stranger.server_context(), RABBIT).start(),
               "ip-only proxy": TlsProxy(ip_only.server_context(), RABBIT).start()}
    yield {**servers, **proxies}
    for proxy in proxies.values():
        proxy.stop()
    for server in servers.values():
        server.stop()


@pytest.mark.slow
def test_untrusted_certificate_is_one_line_exit_3_and_enqueues_nothing(untrusted_servers, pki, ip_only,
                                                                     tls_redis):
    stranger_redis, ip_redis = untrusted_servers["stranger"], untrusted_servers["ip-only"]
    proxy, ip_proxy = untrusted_servers["proxy"], untrusted_servers["ip-only proxy"]
    good = rediss(tls_redis, ca=pki.ca_file)
    # (broker, state Redis): the one under test is untrusted, the other one is fine.
    cases = {
        # No CA in the URL: the system's trust store, which does not hold a private CA.
        "rediss, system trust store": (rediss(stranger_redis), good),
        "rediss, another CA": (rediss(stranger_redis, ca=pki.ca_file), good),
        "rediss, host name not in the certificate":
            (rediss(ip_redis, ca=ip_only.ca_file, host="localhost"), good),
        "amqps, system trust store": (amqps(proxy), good),
        "amqps, another CA": (amqps(proxy, ca=pki.ca_file), good),
        "amqps, host name not in the certificate":
            (amqps(ip_proxy, ca=ip_only.ca_file, host="localhost"), good),
        "state rediss, system trust store": (good, rediss(stranger_redis)),
        "state rediss, host name not in the certificate":
            (good, rediss(ip_redis, ca=ip_only.ca_file, host="localhost")),
    }
    procs = {  # at once: each waits for kombu's retry
        name: start_cli("submit", "http://127.0.0.1:9/a",
                        env={"CRAWLER_BROKER_URL": broker, "CRAWLER_REDIS_URL": state})
        for name, (broker, state) in cases.items()}
    for name, proc in procs.items():
        result = finish(proc)
        assert result.returncode == 3, (name, result.stderr)
        assert_one_line_error(result, 3)
        assert "CERTIFICATE_VERIFY_FAILED" in result.stderr, (name, result.stderr)
        assert_no_secret(name, result.stdout + result.stderr, ENCODED, PASSWORD)
    for server in (stranger_redis, ip_redis):
        assert server.client().dbsize() == 0
    # No AMQP client got past TLS, so nothing reached RabbitMQ.
    assert proxy.handshakes == ip_proxy.handshakes == 0
    assert queued(tls_redis.client()) == []


# -- every credential-bearing setting at once ---------------------------------

#: One secret per setting, each its own so that a leak names its source.
SECRETS = {name: f"{name}{uuid.uuid4().hex}" for name in ("broker", "state", "store", "apikey", "proxy")}
#: What goes over the wire for them: ``Authorization: Basic`` / ``ApiKey`` headers.
SENT = {f"{name} header": base64.b64encode(f"{user}:{SECRETS[name]}".encode()).decode()
        for name, user in (("store", "crawler"), ("apikey", "kid"), ("proxy", "crawler"))}


def flower_json(url: str, path: str) -> str:
    """Flower's answer at ``path`` ("" while it is starting)."""
    try:
        return requests.get(f"{url}{path}", timeout=10).text
    except requests.ConnectionError:
        return ""


@pytest.fixture(scope="module")
def every_secret(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Two crawls with a password in every setting that takes one: the broker and the state
    Redis (private redis-servers with ``requirepass``), the store URIs (Elasticsearch with
    ``user:password@``, and an API key), and the proxy a banned host goes through.

    Returns everything a user, an operator or Flower could see of them.
    """
    tmp = tmp_path_factory.mktemp("every-secret")
    broker = PasswordRedis(tmp / "broker", SECRETS["broker"]).start()
    state = PasswordRedis(tmp / "state", SECRETS["state"]).start()
    es = ESServer(username="crawler", password=SECRETS["store"], api_key=("kid", SECRETS["apikey"])).start()
    proxy = ForwardProxy(username="crawler", password=SECRETS["proxy"]).start()
    site = PoliteSite(pages=TREE)
    site.ban_after = 3  # direct requests get 403 after three pages: the host goes through the proxy
    host = es.url.split("://", 1)[1]
    authed = f"elasticsearch://crawler:{SECRETS['store']}@{host}"
    Elasticsearch(es.url, basic_auth=("crawler", SECRETS["store"])).indices.create(
        index="strict", mappings={"properties": {"title": {"type": "integer"}}})  # refuses every page
    settings = Settings(
        broker_url=broker.url(), redis_url=state.url(), key_prefix=f"sec{token()}",
        store=f"{tmp / 'pages.db'},{authed}/pages,elasticsearch://{host}/keyed",
        es_api_key=f"kid:{SECRETS['apikey']}",
        proxies=(f"http://crawler:{SECRETS['proxy']}@127.0.0.1:{proxy.port}",), ban_threshold=2,
        download_delay=0, host_concurrency=2, robotstxt_obey=False, task_events="on",
        visibility_timeout=60, retry_backoff=0.1, download_timeout=5, worker_concurrency=4, stall_timeout=60,
        private_allowlist=LOOPBACK)
    env = settings.to_env()
    crawl_id = f"every-{token()}"
    seen: dict[str, str | bytes] = {}
    flower, flower_url = start_flower(tmp, {**env, "FLOWER_UNAUTHENTICATED_API": "true"})
    log = tmp / "worker.log"
    workers = Workers(settings, concurrency=4, name=f"{crawl_id}@%h", log_path=str(log), loglevel="INFO")
    rt = Runtime(settings, create_app(settings))
    try:
        workers.start()
        assert poll(lambda: crawl_id in flower_json(flower_url, "/api/workers?refresh=1"), 30), \
            "Flower never saw the worker"
        result = cli("submit", "--crawl-id", crawl_id, f"{site.url}/p/0", env=env)
        seen["submit"] = result.stdout + result.stderr
        wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=60, workers=workers)
        seen["flower workers"] = flower_json(flower_url, "/api/workers?refresh=1")
        workers.stop()

        # `crawler-tasks crawl` into a store that refuses every page: the pages are dead letters.
        result = cli("crawl", f"{site.url}/p/0", "--workers", "1", "--crawl-id", f"{crawl_id}-cli",
                     "--store", f"{authed}/strict", env=env)
        assert result.returncode == 0, result.stderr
        seen["crawl"] = result.stdout + result.stderr
        for args in (["stats"], ["stats", "--json"], ["dead-letters"], ["dead-letters", "--json"],
                     ["replay-dead"]):
            result = cli(*args, env=env)
            seen[" ".join(args)] = result.stdout + result.stderr
        for name, store in zip(("sqlite", "user:password", "API key"), split_uris(settings.store)):
            result = cli("export", "--store", store, env=env)
            seen[f"export {name}"] = result.stdout + result.stderr
        seen["flower tasks"] = poll(lambda: (t := flower_json(flower_url, "/api/tasks")) != "{}" and t, 10)
        assert seen["flower tasks"], "Flower saw no task"
        seen["flower log"] = (tmp / "flower.log").read_bytes()
        seen["redis: broker"] = repr(dump_redis(broker.client()))
        seen["redis: state"] = repr(dump_redis(state.client()))
        seen["worker log"] = log.read_bytes()
        yield {"seen": seen, "crawl_id": crawl_id, "es": es, "proxy": proxy, "host": host,
               "letters": [json.loads(line) for line in seen["dead-letters --json"].splitlines()]}
    finally:
        workers.stop()
        rt.close()
        flower.terminate()
        flower.wait(10)
        for server in (site, proxy, es, state, broker):
            server.stop()


def test_a_crawl_with_every_credential_set_uses_each_of_them(every_secret):
    seen, crawl_id, es, host = (every_secret[k] for k in ("seen", "crawl_id", "es", "host"))
    records = [json.loads(line) for line in seen["export sqlite"].splitlines()]
    assert len(records) == TREE and all(r["status"] == 200 for r in records), records
    proxied = [r for r in records if r["proxy"]]
    assert proxied and {r["proxy"] for r in proxied} == {every_secret["proxy"].url}
    assert every_secret["proxy"].requests
    for name in ("pages", "keyed"):  # basic auth from the URI, the API key from the setting
        assert {d["url"] for d in es.documents(name).values()} == {r["url"] for r in records}
    assert len(seen["export user:password"].splitlines()) == len(seen["export API key"].splitlines()) == TREE
    shown = f"elasticsearch://crawler:***@{host}"
    summary = {line[:20].strip(): line[20:] for line in seen["crawl"].splitlines()}
    assert summary["store"] == f"{shown}/strict"
    letters = every_secret["letters"]
    assert len(letters) == TREE and {e["record"]["crawl_id"] for e in letters} == {f"{crawl_id}-cli"}
    assert {(e["store"], e["kind"]) for e in letters} == {(f"{shown}/strict", "refused")}
    assert f"store {shown}/strict is not configured here" in seen["replay-dead"]
    assert json.loads(seen["flower tasks"]) and crawl_id in seen["flower workers"]


def test_no_secret_of_any_setting_reaches_redis_logs_output_records_or_flower(every_secret):
    seen = every_secret["seen"]
    assert {"redis: broker", "redis: state", "worker log", "flower log", "flower tasks", "flower workers",
            "crawl", "dead-letters", "dead-letters --json", "stats --json", "replay-dead"} <= set(seen)
    assert b"INFO" in seen["worker log"] and b"crawl.fetch" in seen["worker log"]
    for where, text in seen.items():
        for secret in (*SECRETS.values(), *SENT.values()):
            assert_no_secret(where, text, secret)


# -- the private-network guard, end to end -------------------------------------

@dataclass
class Guarded:
    """Workers with the guard as shipped, allowing only 127.0.0.2 (the ``inside`` site), on a
    Redis of their own; ``proxy`` is the proxy their environment sends everything through."""

    settings: Settings
    workers: Workers
    rt: Runtime
    proxy: ForwardProxy | None


@pytest.fixture(scope="module")
def inside() -> Iterator[Site]:
    """The one site the guarded crawls may reach: on 127.0.0.2, the loopback address allowed."""
    s = Site(host="127.0.0.2").start()
    yield s
    s.stop()


@pytest.fixture(scope="module", params=["direct", "HTTP_PROXY"])
def guarded(request, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    tmp = tmp_path_factory.mktemp("guarded")
    redis_server = EmbeddedRedis().start()
    settings = Settings(broker_url=redis_server.url, redis_url=redis_server.url, key_prefix=f"guard{token()}",
                        store=str(tmp / "pages.db"), visibility_timeout=60, retry_backoff=0.1,
                        download_timeout=5, worker_concurrency=4, stall_timeout=60,
                        **{**UNTHROTTLED, "private_allowlist": ("127.0.0.2",)},
                        # Links and redirects may go to each of these: the guard decides.
                        allowed_domains=("127.0.0.1", "127.0.0.2", "localhost"))
    proxy, env = None, {}
    if request.param == "HTTP_PROXY":
        proxy = ForwardProxy().start()
        env = {"HTTP_PROXY": proxy.url, "http_proxy": proxy.url, "NO_PROXY": "", "no_proxy": ""}
    workers = Workers(settings, concurrency=4, name=f"guard-{request.param}@%h",
                      log_path=str(tmp / "worker.log"), extra_env=env).start()
    rt = Runtime(settings, create_app(settings))
    yield Guarded(settings, workers, rt, proxy)
    workers.stop()
    rt.close()
    if proxy is not None:
        proxy.stop()
    redis_server.stop()


def test_the_guard_refuses_internal_targets_however_they_come(guarded, inside, site):
    """Direct, by redirect, as a JSON seed with headers, as a sitemap <loc>; with every request
    through a proxy too. The internal server (127.0.0.1, as ``localhost`` or literally) is
    never reached and nothing of it is stored."""
    t, port = token(), site.server.server_address[1]
    rt, crawl_id = guarded.rt, f"guard-{token()}"
    internal = f"http://localhost:{port}/page/{t}"
    rt.crawls.register(crawl_id, store=guarded.settings.store)
    seeds = [f"{inside.url}/page/{t}-ok",
             f"{internal}-direct",
             {"url": f"{internal}-json", "headers": {"Authorization": "Bearer secret"}},
             f"{inside.url}/goto?to={quote(f'http://127.0.0.1:{port}/page/{t}-redirect')}"]
    assert submit_requests(rt, build_requests(seeds, crawl_id=crawl_id)) == 4
    locs = [f"{inside.url}/page/{t}-listed", f"{internal}-sitemap",
            "http://169.254.169.254/latest/meta-data/iam/security-credentials/"]
    sitemap = f"{inside.url}/sitemap?{urlencode([('loc', loc) for loc in locs])}"
    feed_rt = Runtime(guarded.settings.replace(sitemap_urls=(sitemap,), seed_crawl_id=crawl_id), rt.app)
    tick = feeds.tick(feed_rt, feeds.SITEMAPS)
    feed_rt.close()
    assert (tick.outcome, tick.fed.admitted, tick.fed.invalid) == ("fed", 2, 1)  # the metadata <loc> refused

    wait_drained(lambda: rt.crawls.outstanding(crawl_id) == 0, timeout=60, workers=guarded.workers)
    records = by_url(list(open_store(guarded.settings.store).records(crawl_id)))
    loopback = "a loopback address (not in CRAWLER_PRIVATE_ALLOWLIST)"
    assert {url: (r.status, r.description) for url, r in records.items()} == {
        f"{inside.url}/page/{t}-ok": (200, None),
        f"{inside.url}/page/{t}-listed": (200, None),
        f"{internal}-direct": (None, f"refused: localhost is at 127.0.0.1, {loopback}"),
        f"{internal}-json": (None, f"refused: localhost is at 127.0.0.1, {loopback}"),
        f"{internal}-sitemap": (None, f"refused: localhost is at 127.0.0.1, {loopback}"),
        seeds[3]: (302, None),
        f"http://127.0.0.1:{port}/page/{t}-redirect": (None, f"refused: 127.0.0.1 is {loopback}"),
    }
    assert all(r.body is None for r in records.values() if r.status is None)
    assert site.paths(f"/page/{t}") == []  # nothing reached the internal server
    stats = rt.stats.read(crawl_id)
    assert (stats["failures"], stats["seeds/invalid"], stats["total_num"]) == (4, 1, 3), stats
    if guarded.proxy is not None:  # everything went through it, the refused targets never
        assert sorted(guarded.proxy.requests) == sorted([seeds[0], seeds[3], f"{inside.url}/page/{t}-listed"])


def test_a_seed_urls_user_name_and_password_reach_no_record_log_or_request(crawl, worker, site):
    page = f"/page/creds-{uuid.uuid4().hex[:8]}"
    host = site.url.removeprefix("http://")
    [record] = crawl([f"http://alice:S3cretPW@{host}{page}"])
    assert record.url == f"{site.url}{page}" and "S3cretPW" not in json.dumps(record.to_dict())
    assert site.paths(page) == [page]
    assert "S3cretPW" not in Path(worker.log_path).read_text(errors="replace")
    with pytest.raises(Exception) as refused:  # an error about such a URL does not echo it
        build_requests(["gopher://alice:S3cretPW@example.com/"])
    assert "S3cretPW" not in str(refused.value)
