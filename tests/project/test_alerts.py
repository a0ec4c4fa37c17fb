"""The alert rules, each firing and silent where it must be: ``promtool test rules`` on
docker/prometheus/alerts.test.yml (Debian's ``prometheus`` package installs promtool;
skipped without it), and each rule's metrics served by the exporter."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

PROMETHEUS = Path(__file__).resolve().parents[2] / "docker" / "prometheus"
RULES = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
TESTS = yaml.safe_load((PROMETHEUS / "alerts.test.yml").read_text())
ALERTS = {r["alert"] for g in RULES["groups"] for r in g["rules"]}


def test_every_alert_is_tested_firing_and_silent():
    firing, silent = set(), set()
    for case in TESTS["tests"]:
        for check in case["alert_rule_test"]:
            (firing if check["exp_alerts"] else silent).add(check["alertname"])
    assert firing == ALERTS
    # A rule that only fires (an "up == 0" or "> 0" rule) is silent in another case or time.
    assert silent == ALERTS
    assert ALERTS >= {"CrawlerExporterDown", "CrawlerRedisDown", "CrawlerCrawlStalled", "CrawlerDeadLettersGrowing",
                      "CrawlerHostBackedOff"}


def test_the_host_alert_is_silent_for_a_short_back_off():
    [case] = [c for c in TESTS["tests"] if c["name"].startswith("a host backed off")]
    hosts = {alert["exp_labels"]["host"] for check in case["alert_rule_test"] for alert in check["exp_alerts"]}
    assert hosts == {"slow.example"}  # busy.example, backed off 5 minutes, is not among them


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (apt-get install prometheus)")
def test_promtool_passes_the_rules_and_their_tests():
    check = subprocess.run(["promtool", "check", "rules", "alerts.yml"], cwd=PROMETHEUS, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    done = subprocess.run(["promtool", "test", "rules", "alerts.test.yml"], cwd=PROMETHEUS, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (apt-get install prometheus)")
def test_every_dashboard_query_is_valid_promql(tmp_path):
    """Each Grafana query, its crawl selector set to every crawl, checked by promtool as a
    recording rule's expression."""
    import json

    dashboard = json.loads((PROMETHEUS.parent / "grafana" / "dashboards" / "crawler.json").read_text())
    exprs = [t["expr"].replace("$crawl", ".*") for p in dashboard["panels"] for t in p["targets"]]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:query{i}", "expr": e}
                                                         for i, e in enumerate(exprs)]}]}
    (tmp_path / "dashboard.yml").write_text(yaml.safe_dump(rules))
    done = subprocess.run(["promtool", "check", "rules", "dashboard.yml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in done.stdout
