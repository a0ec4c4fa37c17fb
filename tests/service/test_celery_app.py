"""The ``celery`` command refuses a bad configuration in one line, before it starts."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CELERY = os.path.join(os.path.dirname(sys.executable), "celery")


@pytest.mark.parametrize(("env", "line"), [
    ({"CRAWLER_STORE": "nosuch://x"}, "crawler_tasks: CRAWLER_STORE: unknown store 'nosuch://x'"),
    ({"CRAWLER_STORE": "elasticsearch://u:secret@h:99999/x"}, "crawler_tasks: CRAWLER_STORE: "),
    ({"CRAWLER_STORE_BATCH": "0"}, "crawler_tasks: store_batch: must be greater than 0"),
])
def test_a_worker_with_a_bad_configuration_stops_at_start_in_one_line(env, line, tmp_path):
    done = subprocess.run([CELERY, "-A", "crawler_tasks", "worker", "--without-mingle"],
                          env={**os.environ, **env}, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(line) and "Traceback" not in done.stderr and "secret" not in done.stderr


@pytest.mark.parametrize(("argv", "pool"), [
    (["worker", "-P", "prefork"], "prefork"), (["worker", "-Pprefork"], "prefork"),
    (["worker", "--pool", "solo", "-c", "1"], "solo"), (["worker", "--pool=gevent"], "gevent"),
    (["worker", "-Q", "crawl.parse"], None), (["worker", "-P"], None),
])
def test_the_pool_a_worker_command_names(argv, pool):
    from crawler_tasks.service.celery_app import pool_named

    assert pool_named(argv) == pool


def test_every_task_is_stopped_before_the_broker_would_hand_its_message_to_another_worker():
    from crawler_tasks.core.settings import Settings
    from crawler_tasks.service.celery_app import celery_config

    for vt in (10, 60, 3600):
        config = celery_config(Settings(visibility_timeout=vt))
        assert 0 < config["task_soft_time_limit"] < config["task_time_limit"] < vt
        # each bounded wait inside a task ends before the soft limit
        assert Settings(visibility_timeout=vt).state_hold_s < config["task_soft_time_limit"]


def test_a_worker_configured_for_a_pool_whose_package_is_not_installed_stops_in_one_line(tmp_path):
    # (``-P gevent`` itself is Celery's: its command patches for gevent before it loads any app.)
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['gevent'] = None  # not installed\n")
    done = subprocess.run([CELERY, "-A", "crawler_tasks", "worker", "--without-mingle"],
                          env={**os.environ, "CRAWLER_WORKER_POOL": "gevent", "PYTHONPATH": str(tmp_path)},
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "crawler_tasks: CRAWLER_WORKER_POOL=gevent needs gevent, which is not installed: "
        "pip install 'crawler-tasks[gevent]'")


def test_a_worker_whose_shard_counts_differ_from_its_redis_s_layout_stops_in_one_line(tmp_path):
    import redis

    from tests.helpers import REDIS, token

    prefix, url = f"ly{token()}", f"{REDIS}/13"
    env = {**os.environ, "CRAWLER_BROKER_URL": url, "CRAWLER_KEY_PREFIX": prefix}
    redis.Redis.from_url(url).hset(f"{prefix}:layout", mapping={"host_shards": 1, "gate_shards": 1})
    done = subprocess.run([CELERY, "-A", "crawler_tasks", "worker", "--without-mingle"],
                          env={**env, "CRAWLER_GATE_SHARDS": "4"}, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "crawler_tasks: CRAWLER_GATE_SHARDS=4, but the keys on this Redis are laid out for 1: "
        "every worker and client of one Redis must use the same")
    redis.Redis.from_url(url).delete(f"{prefix}:layout")
