"""The docker/ files, checked without a Docker engine (none runs here): the compose file's
services and what they run exist in the package, exactly one Beat, and every metric the
Grafana dashboard and the Prometheus alerts read is one the exporter serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from crawler_tasks.cli.main import COMMANDS
from crawler_tasks.core.settings import SPECS
from crawler_tasks.service.metrics import CrawlCollector

DOCKER = Path(__file__).resolve().parent.parent / "docker"


def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yml").read_text())


def test_the_cluster_has_its_services_and_exactly_one_beat():
    services = compose()["services"]
    assert set(services) == {"redis", "worker", "beat", "flower", "metrics", "prometheus", "grafana"}
    beats = [name for name, s in services.items() if "beat" in (s.get("command") or [])]
    assert beats == ["beat"] and "deploy" not in services["beat"]
    assert services["metrics"]["entrypoint"] == ["crawler-tasks"]
    assert services["metrics"]["command"][0] in COMMANDS
    known = {spec.env for spec in SPECS}
    for name, service in services.items():
        env = service.get("environment") or {}
        assert not {k for k in env if k.startswith("CRAWLER_")} - known, name  # every setting exists
        for mount in service.get("volumes") or []:
            source = mount.split(":", 1)[0]
            if source.startswith("./"):
                assert (DOCKER / source).exists(), f"{name} mounts {source}, which is missing"


def test_prometheus_scrapes_the_exporter_it_runs():
    services = compose()["services"]
    port = services["metrics"]["command"][services["metrics"]["command"].index("--port") + 1]
    config = yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())
    [job] = config["scrape_configs"]
    assert job["static_configs"][0]["targets"] == [f"metrics:{port}"]
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
    for wanted in ("pages/s", "status", "queue", "gate", "hosts", "store errors", "dead letters"):
        assert wanted in titles
    assert {r["alert"] for g in rules["groups"] for r in g["rules"]} == {
        "CrawlerThroughputZero", "CrawlerDeadLetters", "CrawlerCrawlStalled"}
