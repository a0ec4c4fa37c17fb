"""Settings: one table, and docs/configuration.md generated from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from crawler_tasks.core.errors import SettingsError
from crawler_tasks.core.settings import SPECS, Settings

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs" / "configuration.md"
GENERATOR = ROOT / "docs" / "gen_configuration.py"


def test_configuration_page_is_exactly_what_the_generator_prints():
    printed = subprocess.run([sys.executable, str(GENERATOR)], cwd=ROOT, capture_output=True,
                             check=True, timeout=60).stdout.decode("utf-8")
    assert CONFIGURATION.read_text(encoding="utf-8") == printed, (
        "docs/configuration.md is out of step with the settings: "
        "run `python docs/gen_configuration.py > docs/configuration.md`")


def test_configuration_page_lists_every_setting_exactly_once():
    text = CONFIGURATION.read_text(encoding="utf-8")
    rows = [line.split("`")[1] for line in text.splitlines() if line.startswith("| `CRAWLER_")]
    assert sorted(rows) == sorted(spec.env for spec in SPECS)
    for spec in SPECS:
        assert text.count(spec.markdown_row()) == 1, spec.env


def test_every_setting_has_exactly_one_spec():
    import dataclasses

    assert sorted(f.name for f in dataclasses.fields(Settings) if f.init) == sorted(s.attr for s in SPECS)
    assert len({s.env for s in SPECS}) == len(SPECS)


def test_redis_url_defaults_to_the_broker_when_it_is_redis():
    assert Settings.from_env({"CRAWLER_BROKER_URL": "redis://h:1/3"}).redis_url == "redis://h:1/3"
    assert Settings.from_env({"CRAWLER_BROKER_URL": "amqp://h//"}).redis_url == "redis://localhost:6379/0"


def test_environment_round_trips():
    s = Settings.from_env({"CRAWLER_ALLOWED_DOMAINS": "A.test, b.test", "CRAWLER_TASK_EVENTS": "yes",
                           "CRAWLER_DOWNLOAD_TIMEOUT": "2.5"})
    assert s.allowed_domains == ("a.test", "b.test") and s.task_events == "on" and s.download_timeout == 2.5
    assert Settings.from_env(s.to_env()) == s


@pytest.mark.parametrize("env,message", [
    ({"CRAWLER_MAX_RETRIES": "many"}, "CRAWLER_MAX_RETRIES: 'many' is not a valid integer"),
    ({"CRAWLER_DOWNLOAD_TIMEOUT": "0"}, "download_timeout: must be greater than 0"),
    ({"CRAWLER_MAX_DEPTH": "-1"}, "max_depth: must be 0 or more"),
    ({"CRAWLER_VISIBILITY_TIMEOUT": "30", "CRAWLER_RETRY_BACKOFF_MAX": "60"},
     "retry_backoff_max: must be below visibility_timeout (60.0 >= 30); "
     "unset CRAWLER_RETRY_BACKOFF_MAX to derive it"),
    ({"CRAWLER_DOWNLOAD_DELAY": "-1"}, "download_delay: must be 0 or more"),
    ({"CRAWLER_HOST_CONCURRENCY": "two"}, "CRAWLER_HOST_CONCURRENCY: 'two' is not a valid integer"),
    ({"CRAWLER_ROBOTSTXT_OBEY": "maybe"}, "CRAWLER_ROBOTSTXT_OBEY: 'maybe' is not a valid boolean (1/0)"),
    ({"CRAWLER_PROXIES": "socks5://u:pw@proxy:1080"},  # never echoes the password
     "CRAWLER_PROXIES: 'proxy:1080' is not an http:// or https:// proxy URL"),
    ({"CRAWLER_PROXIES": "@/nonexistent/proxies.txt"},
     "CRAWLER_PROXIES: cannot read '/nonexistent/proxies.txt': No such file or directory"),
    ({"CRAWLER_BAN_PATTERN": "(unclosed"},
     "CRAWLER_BAN_PATTERN: '(unclosed' is not a valid regular expression: "
     "missing ), unterminated subpattern at position 0"),
])
def test_bad_values_raise_a_one_line_settings_error(env, message):
    with pytest.raises(SettingsError) as info:
        Settings.from_env(env)
    assert str(info.value) == message


def test_a_short_visibility_timeout_derives_the_defaults_that_must_fit_inside_it():
    s = Settings.from_env({"CRAWLER_VISIBILITY_TIMEOUT": "10"})
    assert (s.retry_backoff_max, s.download_timeout) == (5.0, 5.0)
    assert Settings.from_env({}).retry_backoff_max == 60.0 and Settings().download_timeout == 30.0
    # Values the user set are kept when they fit, and survive a round trip.
    s = Settings.from_env({"CRAWLER_VISIBILITY_TIMEOUT": "10", "CRAWLER_RETRY_BACKOFF_MAX": "2"})
    assert s.retry_backoff_max == 2.0 and Settings.from_env(s.to_env()) == s
    # A derived value follows a later change of the visibility timeout.
    assert Settings().replace(visibility_timeout=8).retry_backoff_max == 4.0
    assert Settings().replace(visibility_timeout=8, download_timeout=7).download_timeout == 7
    # An AMQP broker has no visibility timeout to fit into, but defaults stay derived the same way.
    assert Settings(broker_url="amqp://h//", visibility_timeout=10, retry_backoff_max=60).retry_backoff_max == 60


def test_proxies_come_from_a_list_or_a_file_and_stay_out_of_the_repr(tmp_path):
    listed = Settings.from_env({"CRAWLER_PROXIES": "http://u:s3cret@p1:3128, https://p2:443"})
    assert listed.proxies == ("http://u:s3cret@p1:3128", "https://p2:443")
    path = tmp_path / "proxies.txt"
    path.write_text("# ours\nhttp://u:s3cret@p1:3128\n\nhttps://p2:443  # spare\n")
    assert Settings.from_env({"CRAWLER_PROXIES": f"@{path}"}).proxies == listed.proxies
    assert "s3cret" not in repr(listed)
