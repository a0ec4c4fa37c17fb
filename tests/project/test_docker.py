"""The docker/ files, checked without a Docker engine (none runs here).

The compose model comes from ``docker compose config`` when a Compose v2 CLI is at
hand (``docker compose`` or ``docker-compose``), else from the YAML, interpolated and
normalised to the same shapes here. Every check reads that model: the services and
profiles, what each runs (commands, flags, settings, queues) and its healthcheck. The
crawler's own services are then started from their compose commands on this machine,
and their healthchecks are run against them, alive and stopped. The image is checked
by building the package's wheel from exactly the files the Dockerfile copies.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis
import requests
import yaml

from crawler_tasks.cli.local import free_port
from crawler_tasks.cli.main import COMMANDS, _parser
from crawler_tasks.core import routing
from crawler_tasks.core.kafka_uri import parse_kafka_uri
from crawler_tasks.core.settings import PIPELINES, SPECS, Settings
from crawler_tasks.core.store_uris import split_uris
from crawler_tasks.service.metrics import CrawlCollector
from tests.fakes.kafka_mock import MockKafka

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
#: What compose needs set to interpolate the file (it refuses to go on without them).
SECRETS = {"FLOWER_BASIC_AUTH": "admin:test-secret", "GRAFANA_ADMIN_PASSWORD": "grafana-secret"}
PROFILES = {"elasticsearch": {"elasticsearch"}, "hbase": {"hbase"}, "kafka": {"kafka", "kafka-feed"},
            "pools": {"fetcher", "parser", "storer"}, "render": {"render"}}
CORE = {"redis", "worker", "beat", "flower", "metrics", "prometheus", "alertmanager", "grafana"}
STORES = {"elasticsearch", "hbase", "kafka"}
POOLS = PROFILES["pools"]


# --- the compose model -------------------------------------------------------------------

def compose_cli() -> list[str] | None:
    """A Compose v2 command line, or None when there is none (then the YAML is parsed here)."""
    for cli in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(cli[0]) is None:
            continue
        try:
            out = subprocess.run([*cli, "version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and re.search(r"\bv?2\.\d+", out.stdout):
            return cli
    return None


def run_compose(cli: list[str], *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in SECRETS and not k.startswith("CRAWLER_")}
    return subprocess.run([*cli, "-f", str(DOCKER / "compose.yml"), *args], capture_output=True,
                          text=True, timeout=60, env={**clean, **env})


def raw() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "compose.yml").read_text())


INTERPOLATION = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<name>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|(?P<bare>\w+))")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's interpolation of ``${VAR}``, ``${VAR:-default}``, ``${VAR:?error}``; ``$$``
    stays ``$$``, as in ``docker compose config``."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m["escaped"]:
            return "$$"
        name, op, arg = m["name"] or m["bare"], m["op"], m["arg"]
        unset = env.get(name) is None or (op in (":-", ":?") and not env.get(name))
        if unset and op in (":?", "?"):
            raise ValueError(f"required variable {name} is missing a value: {arg}")
        return arg if unset and op in (":-", "-") else env.get(name, "")

    return INTERPOLATION.sub(sub, value)


def _short_port(spec: str) -> dict[str, Any]:
    parts = spec.split(":")
    host_ip = parts[0] if len(parts) == 3 else ""
    return {"host_ip": host_ip, "published": parts[-2] if len(parts) > 1 else "", "target": int(parts[-1])}


def _short_volume(spec: str) -> dict[str, Any]:
    source, target, *mode = spec.split(":")
    bind = source.startswith((".", "/"))
    return {"type": "bind" if bind else "volume", "source": str((DOCKER / source).resolve()) if bind else source,
            "target": target, **({"read_only": True} if mode == ["ro"] else {})}


def normalise(service: dict[str, Any]) -> dict[str, Any]:
    """One service in the shapes ``docker compose config --format json`` gives, with the
    keys it leaves out when empty."""
    s = dict(service)
    env = s.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env if "=" in item)
    s["environment"] = {k: str(v) for k, v in env.items() if v is not None}
    deps = s.get("depends_on") or {}
    if isinstance(deps, list):
        deps = {name: {"condition": "service_started"} for name in deps}
    s["depends_on"] = {name: {"required": True, **d} for name, d in deps.items()}
    s["ports"] = [_short_port(p) if isinstance(p, str) else p for p in s.get("ports") or []]
    s["volumes"] = [_short_volume(v) if isinstance(v, str) else v for v in s.get("volumes") or []]
    for key in ("command", "entrypoint"):
        if isinstance(s.get(key), str):
            s[key] = shlex.split(s[key])
    check = s.get("healthcheck")
    if check and isinstance(check.get("test"), str):
        s["healthcheck"] = {**check, "test": ["CMD-SHELL", check["test"]]}
    return s


@functools.cache
def model(*profiles: str) -> dict[str, dict[str, Any]]:
    """The services compose runs with these profiles on (``"*"``: all of them)."""
    cli = compose_cli()
    if cli is not None:
        args = [a for p in profiles for a in ("--profile", p)]
        out = run_compose(cli, *args, "config", "--format", "json", env=SECRETS)
        assert out.returncode == 0, out.stderr
        return {name: normalise(s) for name, s in json.loads(out.stdout)["services"].items()}  # fills defaults
    services = interpolate(raw()["services"], SECRETS)
    return {name: normalise(s) for name, s in services.items()
            if not s.get("profiles") or "*" in profiles or set(s["profiles"]) & set(profiles)}


def services() -> dict[str, dict[str, Any]]:
    return model("*")


def crawler_services() -> dict[str, dict[str, Any]]:
    """The services that run the image built from docker/Dockerfile."""
    return {name: s for name, s in services().items() if s.get("build")}


def argv(service: dict[str, Any]) -> list[str]:
    """What the container runs: its entrypoint and command, or the image's."""
    image = dockerfile_stages()[-1]
    return [*(service.get("entrypoint") or image["ENTRYPOINT"]), *(service.get("command") or image["CMD"])]


def option(args: list[str], *names: str) -> str | None:
    """The value of the first of ``names`` in ``args`` (``-Q x`` or ``--queues=x``)."""
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag in names:
            return value if eq else args[i + 1]
    return None


def queues_of(service: dict[str, Any]) -> set[str]:
    """The queues a worker consumes: its -Q, else every queue the app declares."""
    listed = option(argv(service), "-Q", "--queues")
    return set(listed.split(",")) if listed else set(routing.QUEUE_ORDER)


def is_worker(service: dict[str, Any]) -> bool:
    return bool(service.get("build")) and argv(service)[:4] == ["celery", "-A", "crawler_tasks", "worker"]


# --- the Dockerfile ------------------------------------------------------------------------

@functools.cache
def dockerfile_stages() -> list[dict[str, Any]]:
    """Each stage's instructions: {"FROM": ..., "RUN": [...], "COPY": [...], "USER": ..., ...}."""
    text = re.sub(r"\\\n", " ", (DOCKER / "Dockerfile").read_text())
    stages: list[dict[str, Any]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word, rest = word.upper(), rest.strip()
        if word == "FROM":
            stages.append({"FROM": rest, "RUN": [], "COPY": []})
        elif word in ("RUN", "COPY"):
            stages[-1][word].append(rest)
        elif word in ("ENTRYPOINT", "CMD"):
            stages[-1][word] = json.loads(rest)
        else:
            stages[-1][word] = rest
    return stages


def copied_sources() -> list[str]:
    """What the build stage copies from the build context (the repository root)."""
    build = dockerfile_stages()[0]
    sources = []
    for copy in build["COPY"]:
        parts = [p for p in copy.split() if not p.startswith("--")]
        sources += parts[:-1]
    return sources


# --- the compose file ----------------------------------------------------------------------

def test_the_cluster_has_its_services_and_each_profile_adds_its_own():
    assert set(model()) == CORE
    for profile, added in PROFILES.items():
        assert set(model(profile)) == CORE | added, profile
        for name in added:
            assert services()[name]["profiles"] == [profile]
    assert set(services()) == CORE.union(*PROFILES.values())


def test_every_service_has_a_healthcheck_and_starts_once_what_it_needs_is_healthy():
    all_services = services()
    for name, service in all_services.items():
        check = service.get("healthcheck") or {}
        assert check.get("test", ["NONE"])[0] in ("CMD", "CMD-SHELL"), f"{name} has no healthcheck"
        assert not check.get("disable"), name
        for dep, how in service["depends_on"].items():
            assert dep in all_services, f"{name} depends on {dep}, which is no service"
            assert how["condition"] == "service_healthy", f"{name} waits for {dep} to start only"
            # A dependency outside every profile the service is in is optional.
            dep_profiles = set(all_services[dep].get("profiles") or [])
            inside = not dep_profiles or bool(dep_profiles & set(service.get("profiles") or []))
            assert how["required"] is inside, (name, dep)
    for name, service in crawler_services().items():
        assert "redis" in service["depends_on"], name
    assert set(all_services["prometheus"]["depends_on"]) == {"metrics", "alertmanager"}
    assert set(all_services["grafana"]["depends_on"]) == {"prometheus"}
    for name in ("worker", *POOLS):  # the workers wait for the stores that run
        assert set(all_services[name]["depends_on"]) == {"redis", "elasticsearch", "hbase", "kafka"}
    assert set(all_services["render"]["depends_on"]) == {"redis"}
    assert set(all_services["kafka-feed"]["depends_on"]) == {"redis", "kafka"}


def test_the_crawler_healthchecks_run_tools_the_image_has():
    for name, service in crawler_services().items():
        test = service["healthcheck"]["test"]
        first = shlex.split(test[1])[0] if test[0] == "CMD-SHELL" else test[1]
        assert first in ("celery", "python", "crawler-tasks"), (name, first)


#: What each image the compose file runs has to check its health with (what its base ships).
HEALTH_TOOLS = {"redis:": {"redis-cli"}, "prom/prometheus:": {"wget"}, "prom/alertmanager:": {"wget"},
                "grafana/grafana:": {"wget"}, "docker.elastic.co/elasticsearch/": {"curl"},
                "harisekhon/hbase:": {"bash"}, "apache/kafka:": {"/opt/kafka/bin/kafka-broker-api-versions.sh"}}


def test_every_healthcheck_runs_a_binary_its_image_ships():
    for name, service in services().items():
        if service.get("build"):
            continue  # the crawler's own image: test_the_crawler_healthchecks_run_tools_the_image_has
        test = service["healthcheck"]["test"]
        first = shlex.split(test[1])[0] if test[0] == "CMD-SHELL" else test[1]
        [tools] = [t for prefix, t in HEALTH_TOOLS.items() if service["image"].startswith(prefix)]
        assert first in tools, (name, first)


def test_workers_outlive_a_download_when_stopped():
    timeout = Settings().download_timeout
    for name, service in services().items():
        if is_worker(service):
            grace = service.get("stop_grace_period", "10s")
            assert grace.endswith("s") and float(grace[:-1]) > timeout, (name, grace)


def test_the_render_workers_get_redis_alone():
    render = services()["render"]
    assert render["profiles"] == ["render"]
    assert set(render["environment"]) == {"CRAWLER_BROKER_URL", "CRAWLER_DENY_PRIVATE_NETWORKS", "CRAWLER_PIPELINE"}
    assert render["environment"]["CRAWLER_PIPELINE"] == "split"  # the DOM goes back through Redis
    assert render["volumes"] == []  # no data volume
    assert set(render.get("networks") or {"default"}) == {"default"}
    for name in STORES:  # the stores are on their own network, which render is not on
        assert set(services()[name]["networks"]) == {"stores"}
    writers = {n for n, s in services().items() if "stores" in (s.get("networks") or ())} - STORES
    assert writers == {"worker", "kafka-feed", *POOLS}
    for name in writers:  # and on the default one, where Redis is
        assert set(services()[name]["networks"]) == {"default", "stores"}


def test_alerts_go_to_the_alertmanager_the_cluster_runs():
    config = yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())
    [target] = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert target == "alertmanager:9093" and services()["alertmanager"]["ports"][0]["target"] == 9093
    manager = yaml.safe_load((DOCKER / "alertmanager" / "alertmanager.yml").read_text())
    receivers = {r["name"] for r in manager["receivers"]}
    assert manager["route"]["receiver"] in receivers


def test_exactly_one_beat():
    beats = [name for name, s in crawler_services().items() if "beat" in argv(s)]
    assert beats == ["beat"]
    assert "deploy" not in services()["beat"] and "scale" not in services()["beat"]


def test_flower_and_grafana_refuse_to_start_without_their_passwords():
    env = raw()["services"]
    assert re.fullmatch(r"\$\{FLOWER_BASIC_AUTH:\?[^}]+\}", env["flower"]["environment"]["FLOWER_BASIC_AUTH"])
    assert re.fullmatch(r"\$\{GRAFANA_ADMIN_PASSWORD:\?[^}]+\}",
                        env["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"])
    assert services()["flower"]["environment"]["FLOWER_BASIC_AUTH"] == SECRETS["FLOWER_BASIC_AUTH"]
    cli = compose_cli()
    for missing in SECRETS:
        env_without = {k: v for k, v in SECRETS.items() if k != missing}
        if cli is None:
            with pytest.raises(ValueError, match=missing):
                interpolate(raw()["services"], env_without)
        else:
            out = run_compose(cli, "config", "--quiet", env=env_without)
            assert out.returncode != 0 and missing in out.stderr, out.stderr


def test_redis_keeps_its_data_and_never_evicts():
    redis_service = services()["redis"]
    command = redis_service["command"]
    assert option(command, "--appendonly") == "yes"
    assert option(command, "--maxmemory-policy") == "noeviction"
    assert [v["target"] for v in redis_service["volumes"]] == ["/data"]
    assert "redis-cli ping" in redis_service["healthcheck"]["test"][1]


def test_workers_scale_and_every_published_port_is_on_loopback_and_its_own():
    published = []
    for name, service in services().items():
        assert "container_name" not in service, f"{name} cannot scale with a fixed container name"
        if is_worker(service):
            assert not service["ports"], f"{name} publishes ports: two replicas would clash"
        for port in service["ports"]:
            assert port["host_ip"] == "127.0.0.1", (name, port)
            published.append(int(port["published"]))
    assert len(published) == len(set(published)), sorted(published)
    assert {name for name, s in services().items() if is_worker(s)} == {"worker", "render", *POOLS}


def test_every_image_is_pinned_and_the_crawler_services_share_one():
    for name, service in services().items():
        image = service["image"]
        assert ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest"), (name, image)
    plain = {name: s for name, s in crawler_services().items() if name != "render"}
    builds = {json.dumps(s["build"], sort_keys=True) for s in plain.values()}
    assert len(builds) == 1 and {s["image"] for s in plain.values()} == {"crawler-tasks:local"}
    assert set(crawler_services()) == {"worker", "render", "beat", "flower", "metrics", "kafka-feed", *POOLS}
    # The render workers' image: the same Dockerfile, with the browser (ARG RENDER).
    render = services()["render"]
    assert render["image"] == "crawler-tasks:render"
    assert {k: v for k, v in render["build"].items() if k != "args"} == json.loads(builds.pop())
    assert render["build"]["args"] == {"RENDER": "1"}
    final = dockerfile_stages()[-1]
    assert final["ARG"] == "RENDER=0"
    assert any('"$RENDER" = 1' in r and "apt-get install" in r and "chromium" in r and "playwright" in r
               for r in final["RUN"])


def test_every_crawler_setting_exists_and_parses():
    known = {spec.env for spec in SPECS}
    for name, service in crawler_services().items():
        env = service["environment"]
        assert not {k for k in env if k.startswith("CRAWLER_")} - known, name
        Settings.from_env(env)  # refuses a value it cannot parse (SettingsError)
    for name, service in services().items():
        if name not in crawler_services():
            assert not [k for k in service["environment"] if k.startswith("CRAWLER_")], name


def _options(command: Any) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *getattr(p, "secondary_opts", []))}


def _flags(args: list[str]) -> list[str]:
    return [a.partition("=")[0] for a in args if a.startswith("-")]


def test_every_command_and_flag_exists():
    import flower.options  # noqa: F401  (defines Flower's options)
    import tornado.options
    from celery.bin.beat import beat
    from celery.bin.celery import celery
    from celery.bin.control import inspect
    from celery.bin.worker import worker

    for name, service in crawler_services().items():
        args = argv(service)
        if args[0] == "crawler-tasks":
            assert args[1] in COMMANDS, name
            _parser().parse_args(args[1:])  # exits (SystemExit) on an unknown flag
            continue
        assert args[:3] == ["celery", "-A", "crawler_tasks"], name
        sub, rest = args[3], args[4:]
        if sub == "flower":
            assert all(flag.lstrip("-").replace("-", "_") in tornado.options.options for flag in _flags(rest)), name
        else:
            assert set(_flags(rest)) <= _options({"worker": worker, "beat": beat}[sub]), (name, sub)
        check = service["healthcheck"]["test"]
        if check[0] == "CMD-SHELL" and " inspect " in check[1]:
            words = shlex.split(check[1])
            assert words[:4] == ["celery", "-A", "crawler_tasks", "inspect"] and words[4] == "ping", name
            assert set(_flags(words[5:])) <= _options(inspect), name
            # The node it pings is this container's: <name given by -n>@$HOSTNAME.
            node = option(rest, "-n", "--hostname") or ("celerybeat@%h" if sub == "beat" else "celery@%h")
            assert option(words, "-d", "--destination") == node.replace("%h", "$$HOSTNAME"), name
    assert {"-A"} <= _options(celery)


def test_the_pools_split_the_queues_between_them():
    all_services = services()
    consumed = {name: queues_of(all_services[name]) for name in ("worker", *POOLS)}
    served = set(routing.QUEUE_ORDER)
    for name, queues in consumed.items():
        assert queues <= served, f"{name} consumes {queues - served}, which no crawler task uses"
        assert routing.CALLBACK_QUEUE not in queues, f"{name} would take the calling app's callbacks"
    assert consumed["worker"] == served
    # The render workers serve crawl.render alone; no other worker takes it.
    assert queues_of(all_services["render"]) == {routing.RENDER_QUEUE}
    assert routing.RENDER_QUEUE not in set().union(*consumed.values())
    assert set().union(*(consumed[p] for p in POOLS)) == served
    assert sum(len(consumed[p]) for p in POOLS) == len(served), "a queue is served by two pools"
    assert consumed["fetcher"] == {routing.FETCH_QUEUE, routing.SEED_QUEUE}
    assert consumed["parser"] == {routing.PARSE_QUEUE}
    assert routing.STORE_QUEUE in consumed["storer"]
    pools = {name: (option(argv(all_services[name]), "-P", "--pool"), option(argv(all_services[name]), "-c"))
             for name in POOLS}
    assert pools == {"fetcher": ("threads", "64"), "parser": ("prefork", "2"), "storer": (None, "4")}
    for name in POOLS:
        assert all_services[name]["environment"]["CRAWLER_PIPELINE"] == "split" and "split" in PIPELINES
    assert "CRAWLER_PIPELINE" not in all_services["worker"]["environment"]  # local: parse in the fetch task


def test_the_stores_run_in_their_profiles():
    all_services = services()
    es = all_services["elasticsearch"]
    assert es["image"].split(":")[-1].startswith("9.")
    assert es["environment"]["discovery.type"] == "single-node"
    assert es["environment"]["xpack.security.enabled"] == "false"
    assert "_cluster/health" in " ".join(es["healthcheck"]["test"])
    hbase = all_services["hbase"]
    assert [p["target"] for p in hbase["ports"]] == [9090]  # Thrift; its host port is not Prometheus'
    assert "9090" in " ".join(hbase["healthcheck"]["test"])
    # The store URIs the compose file suggests name the services and ports that run.
    suggested = re.search(r"CRAWLER_STORE=(\S+)", (DOCKER / "compose.yml").read_text())[1]
    assert "elasticsearch://elasticsearch:9200/" in suggested and "hbase://hbase:9090/" in suggested
    [kafka_store] = [uri for uri in split_uris(suggested) if uri.startswith("kafka://")]
    assert parse_kafka_uri(kafka_store).servers == ("kafka:9092",)
    Settings.from_env({"CRAWLER_STORE": suggested})


def _listeners(text: str) -> dict[str, str]:
    """``NAME://host:port,...`` (Kafka's listeners) as {NAME: "host:port"}."""
    return dict(item.split("://", 1) for item in text.split(","))


def test_kafka_runs_in_its_profile_on_one_kraft_node_with_the_seed_feed_beside_it():
    all_services = services()
    kafka = all_services["kafka"]
    repository, tag = kafka["image"].rsplit(":", 1)
    assert repository == "apache/kafka" and tag.startswith("4."), kafka["image"]
    env = kafka["environment"]
    # KRaft, one node: broker and controller in one process, voting for itself alone.
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert not [k for k in env if "ZOOKEEPER" in k]
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@kafka:9093"
    listeners, advertised = _listeners(env["KAFKA_LISTENERS"]), _listeners(env["KAFKA_ADVERTISED_LISTENERS"])
    assert listeners["PLAINTEXT"] == ":9092" and listeners["CONTROLLER"] == ":9093"
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] == "CONTROLLER" and "CONTROLLER" not in advertised
    assert advertised["PLAINTEXT"] == "kafka:9092" and env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "PLAINTEXT"
    protocols = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(listeners) <= set(protocols)
    # The host's port goes to a listener that advertises that same address: a client on the
    # host is sent back to it, not to kafka:9092, which only the compose network resolves.
    [port] = kafka["ports"]
    [host_listener] = [n for n, a in listeners.items() if a.rpartition(":")[2] == str(port["target"])]
    assert advertised[host_listener] == f"{port['host_ip']}:{port['published']}"
    # Every internal topic has one replica, and one in sync is enough: the consumer offsets
    # (the feed's commits) and the transaction state (the store writes in transactions).
    for key in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
                "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR",
                "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR"):
        assert env[key] == "1", key
    assert [(v["type"], v["source"], v["target"]) for v in kafka["volumes"]] == [
        ("volume", "kafka-data", env["KAFKA_LOG_DIRS"])]
    check = kafka["healthcheck"]["test"]
    assert check[1].endswith("/kafka-broker-api-versions.sh") and option(check, "--bootstrap-server") == "localhost:9092"

    feed = all_services["kafka-feed"]
    assert argv(feed) == ["crawler-tasks", "feed", "kafka"]
    seeds = parse_kafka_uri(feed["environment"]["CRAWLER_KAFKA_SEEDS"], what="CRAWLER_KAFKA_SEEDS")
    assert seeds.servers == (advertised["PLAINTEXT"],) and seeds.topics == ("seeds",)
    assert seeds.group == "crawler-seeds" and not seeds.tls and seeds.username is None
    # The workers' settings (broker, store, private-network guard), and the seeds' topics.
    assert {k: v for k, v in feed["environment"].items() if k != "CRAWLER_KAFKA_SEEDS"} == \
        all_services["worker"]["environment"]
    assert feed["depends_on"]["kafka"]["condition"] == "service_healthy" and feed["depends_on"]["kafka"]["required"]


def test_every_mounted_file_exists():
    for name, service in services().items():
        for mount in service["volumes"]:
            if mount["type"] == "bind":
                assert Path(mount["source"]).exists(), f"{name} mounts {mount['source']}, which is missing"


def test_prometheus_scrapes_the_exporter_it_runs():
    command = services()["metrics"]["command"]
    config = yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())
    [job] = config["scrape_configs"]
    assert job["static_configs"][0]["targets"] == [f"metrics:{option(command, '--port')}"]
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]


def served_names(rt) -> set[str]:
    names = set()
    for family in CrawlCollector(rt).collect():
        names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names


def test_the_dashboard_and_the_alerts_read_metrics_the_exporter_serves(rt):
    served = served_names(rt)
    dashboard = json.loads((DOCKER / "grafana" / "dashboards" / "crawler.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    rules = yaml.safe_load((DOCKER / "prometheus" / "alerts.yml").read_text())
    exprs += [r["expr"] for g in rules["groups"] for r in g["rules"]]
    used = {name for e in exprs for name in re.findall(r"\bcrawler_[a-z_]+", e)}
    assert used and used <= served, used - served
    titles = " ".join(p["title"] for p in dashboard["panels"]).lower()
    for wanted in ("pages/s", "status", "queue", "gate", "hosts", "store errors", "dead letters", "backlog",
                   "crawl state", "stored", "errors", "redis answers"):
        assert wanted in titles
    # A crawl selector, and every per-crawl series filtered by it.
    [variable] = dashboard["templating"]["list"]
    assert variable["name"] == "crawl" and variable["multi"] and variable["includeAll"]
    per_crawl = {"crawler_pages_total", "crawler_stored_total", "crawler_waiting", "crawler_held",
                 "crawler_failures_total", "crawler_errors_total", "crawler_outstanding", "crawler_crawl_state",
                 "crawler_gate_items", "crawler_bytes_total"}
    for expr in (t["expr"] for p in dashboard["panels"] for t in p["targets"]):
        for name in per_crawl & set(re.findall(r"\bcrawler_[a-z_]+", expr)):
            assert re.search(rf'{name}\{{crawl=~"\$crawl"', expr), expr
    [backlog] = [p for p in dashboard["panels"] if p["title"].startswith("Backlog")]
    assert any("crawler_waiting" in t["expr"] for t in backlog["targets"])
    assert {r["alert"] for g in rules["groups"] for r in g["rules"]} == {
        "CrawlerExporterDown", "CrawlerRedisDown", "CrawlerThroughputZero", "CrawlerCrawlStalled",
        "CrawlerDeadLetters", "CrawlerDeadLettersGrowing", "CrawlerHostBackedOff"}


# --- the image -----------------------------------------------------------------------------

def test_the_image_runs_as_an_unprivileged_user_who_owns_its_volumes():
    final = dockerfile_stages()[-1]
    user = final.get("USER", "root")
    assert user.split(":")[0] not in ("root", "0")
    runs = " ".join(final["RUN"])
    assert re.search(rf"useradd\b[^&]*\b{user}\b", runs)
    for name, service in crawler_services().items():
        for mount in service["volumes"]:
            if mount["type"] == "volume":  # a new volume takes the owner of the image's directory
                target = re.escape(mount["target"])
                assert re.search(rf"mkdir[^&]* {target}\b", runs) and re.search(rf"chown {user}\S* {target}\b", runs), \
                    f"{mount['target']} ({name}) is not the user's in the image"


def test_the_build_context_lets_in_what_the_image_copies():
    ignore = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert ignore[0] == "*"
    for source in copied_sources():
        assert f"!{source}" in ignore, f"{source} is copied but .dockerignore keeps it out"


def test_the_package_builds_from_exactly_the_files_the_image_copies(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for source in copied_sources():  # as .dockerignore lets them in: no bytecode
        path = ROOT / source
        if path.is_dir():
            shutil.copytree(path, src / source, ignore=shutil.ignore_patterns("__pycache__", "*.py[co]"))
        else:
            shutil.copy2(path, src / source)
    build_runs = " ".join(dockerfile_stages()[0]["RUN"])
    assert "pip wheel" in build_runs and "--no-deps" in build_runs
    assert any("pip install" in r and "/wheels/" in r for r in dockerfile_stages()[-1]["RUN"])
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir",
                          str(tmp_path / "wheels"), str(src)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    [wheel] = (tmp_path / "wheels").glob("crawler_tasks-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {str(p.relative_to(ROOT)) for p in (ROOT / "crawler_tasks").rglob("*")
              if p.suffix in (".py", ".lua") and "__pycache__" not in p.parts}
    assert wanted and not wanted - names, sorted(wanted - names)
    assert "beat_schedule.py" in names
    dist_info = {n.rsplit("/", 1)[-1]: zipfile.ZipFile(wheel).read(n).decode() for n in names if ".dist-info/" in n}
    assert "crawler-tasks = crawler_tasks.cli.main:main" in dist_info["entry_points.txt"]
    # pyproject's readme: setuptools builds without the file, leaving the description empty.
    assert (ROOT / "README.md").read_text().splitlines()[0] in dist_info["METADATA"]


# --- the services, run on this machine -----------------------------------------------------

class Local:
    """A container's command line on this machine: its paths under ``tmp``, its ports free
    ones, its listen address loopback, the other services' addresses (``host:port``) those
    of their stand-ins here, ``$HOSTNAME`` this host's name (Docker sets it to the
    container's, which Celery's ``%h`` expands to), and its process 1 (``/proc/1/``, the
    container's own process) the process started here."""

    def __init__(self, tmp: Path, hosts: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.ports: dict[str, str] = {}
        self.hosts = dict(hosts or {})
        for sub in ("tmp", "data"):
            (tmp / sub).mkdir(exist_ok=True)

    def listen_on(self, port: str) -> None:
        self.ports.setdefault(port, str(free_port()))

    def text(self, value: str) -> str:
        value = value.replace("0.0.0.0", "127.0.0.1")
        for port, local in self.ports.items():
            value = re.sub(rf"(?<!\d){port}(?!\d)", local, value)
        for host, local in self.hosts.items():
            value = re.sub(rf"(?<![\w.-]){re.escape(host)}(?!\d)", local, value)
        return re.sub(r"(?<![\w.-])/(tmp|data)/", lambda m: f"{self.tmp}/{m[1]}/", value)

    def env(self, service: dict[str, Any]) -> dict[str, str]:
        env = {**os.environ, **{k: self.text(v) for k, v in service["environment"].items()}}
        env.update({k: os.environ[k] for k in ("CRAWLER_BROKER_URL", "CRAWLER_REDIS_URL")})  # the tests' Redis
        env["HOSTNAME"] = socket.gethostname()
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        return env

    def healthcheck(self, service: dict[str, Any], pid: int) -> list[str]:
        kind, *test = service["healthcheck"]["test"]
        test = [self.text(t).replace("$$", "$").replace("/proc/1/", f"/proc/{pid}/") for t in test]
        return ["sh", "-c", test[0]] if kind == "CMD-SHELL" else test


def healthy(cmd: list[str], env: dict[str, str], cwd: Path) -> bool:
    try:
        return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, timeout=60).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@pytest.fixture
def kafka() -> Iterator[MockKafka]:
    """Kafka for kafka-feed: librdkafka's mock cluster, with the feed's topic."""
    cluster = MockKafka()
    cluster.create_topic("seeds", 4)
    yield cluster
    cluster.close()


def test_the_crawler_services_start_from_their_compose_commands_and_pass_their_healthchecks(rt, kafka, tmp_path):
    local = Local(tmp_path, hosts={"kafka:9092": kafka.bootstrap})
    chosen = crawler_services()
    for service in chosen.values():
        port = option(argv(service), "--port")
        if port:
            local.listen_on(port)
    procs: dict[str, subprocess.Popen] = {}
    envs = {name: local.env(service) for name, service in chosen.items()}
    try:
        for name, service in chosen.items():
            args = [local.text(a) for a in argv(service)]
            args[0] = shutil.which(args[0], path=envs[name]["PATH"])
            log = open(tmp_path / f"{name}.log", "wb")
            procs[name] = subprocess.Popen(args, env=envs[name], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)

        def until_healthy(name: str) -> bool:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and procs[name].poll() is None:
                if healthy(local.healthcheck(chosen[name], procs[name].pid), envs[name], tmp_path):
                    return True
                time.sleep(1)
            return False

        with ThreadPoolExecutor(len(chosen)) as pool:
            results = dict(zip(chosen, pool.map(until_healthy, chosen), strict=True))
        logs = {n: (tmp_path / f"{n}.log").read_text(errors="replace")[-2000:] for n, ok in results.items() if not ok}
        assert all(results.values()), logs
        # Flower, as compose runs it, wants the password for everything but its healthcheck.
        flower_url = f"http://127.0.0.1:{local.ports['5555']}"
        assert requests.get(f"{flower_url}/api/workers", timeout=10).status_code == 401
        user, _, password = SECRETS["FLOWER_BASIC_AUTH"].partition(":")
        assert requests.get(f"{flower_url}/api/workers", auth=(user, password), timeout=10).ok
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    # With the service gone, its healthcheck fails (a ping waits 1 s for no answer, not 10).
    def down_check(name: str) -> list[str]:
        return [a.replace("-t 10", "-t 1") for a in local.healthcheck(chosen[name], procs[name].pid)]

    with ThreadPoolExecutor(len(chosen)) as pool:
        after = dict(zip(chosen, pool.map(lambda n: healthy(down_check(n), envs[n], tmp_path), chosen), strict=True))
    assert not any(after.values()), after


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server on this machine")
def test_redis_runs_its_compose_command_and_its_healthcheck_tells_when_it_is_down(tmp_path):
    service = services()["redis"]
    port = str(free_port())
    proc = subprocess.Popen([*service["command"], "--port", port, "--bind", "127.0.0.1", "--dir", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    check = ["sh", "-c", service["healthcheck"]["test"][1].replace("redis-cli", f"redis-cli -p {port}")]
    try:
        deadline = time.monotonic() + 10
        while not healthy(check, dict(os.environ), tmp_path):
            assert time.monotonic() < deadline and proc.poll() is None, "redis did not come up"
            time.sleep(0.1)
        r = redis.Redis(port=int(port))
        assert r.config_get("appendonly") == {"appendonly": "yes"}
        assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    finally:
        proc.terminate()
        proc.wait(10)
    assert not healthy(check, dict(os.environ), tmp_path)
