"""What Celery and kombu alone cost per message: one worker process draining no-op tasks.

A crawl task can cost no less than this, whatever it does, so it bounds what one
worker process can reach (pages/s, CPU ms/page). The queue is filled first, then
one ``celery worker`` drains it; the worker's whole CPU (start-up included) is
divided by the messages::

    python bench/celery_floor/celery_floor.py [--messages 10000] [--redis redis://127.0.0.1:6379/5]

Rows: kombu's own Redis transport, and this package's (one ``redis.Redis`` per
channel, ``broker/transport.py``), each on the threads pool (32) and solo.
Late acks, prefetch 1, no events, no results: as crawler_tasks runs its workers.
The database named by ``--redis`` is flushed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ensure_project_python  # noqa: E402

ensure_project_python("bench/celery_floor/celery_floor.py", "redis", "celery")

import redis  # noqa: E402

APP = '''
import os
from celery import Celery
if os.environ.get("FLOOR_OURS") == "1":
    from crawler_tasks.broker import transport
    transport.register()
app = Celery("floor", broker=os.environ["FLOOR_BROKER"])
app.conf.update(task_serializer="json", accept_content=["json"], task_ignore_result=True,
                task_acks_late=True, worker_prefetch_multiplier=1, worker_send_task_events=False,
                task_default_queue="floor", broker_transport_options={"visibility_timeout": 60})

@app.task(name="floor.noop")
def noop(request):
    return None
'''


def fill(url: str, n: int, env: dict[str, str], cwd: Path) -> None:
    code = ("from floor_app import app, noop\n"
            "with app.producer_or_acquire() as p:\n"
            f"    for i in range({n}):\n"
            "        noop.apply_async(args=[{'url': f'http://127.0.0.1:8000/p/{i}', 'depth': 2, 'crawl_id': 'c'}],"
            " producer=p)\n")
    subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, check=True)


def drain(url: str, n: int, pool: str, concurrency: int, ours: bool, cwd: Path) -> tuple[float, float]:
    """Seconds to drain ``n`` messages and the worker's CPU seconds."""
    client = redis.Redis.from_url(url)
    client.flushdb()
    env = {**os.environ, "FLOOR_BROKER": url, "FLOOR_OURS": "1" if ours else "0"}
    fill(url, n, env, cwd)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "floor_app", "worker", "-P", pool,
                               "-c", str(concurrency), "-l", "ERROR", "-Q", "floor", "--without-mingle",
                               "--without-gossip", "--without-heartbeat"], env=env, cwd=cwd,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while client.llen("floor") or client.hlen("unacked"):
        time.sleep(0.02)
    elapsed = time.monotonic() - start
    worker.terminate()
    worker.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return elapsed, cpu


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=10000)
    p.add_argument("--redis", default="redis://127.0.0.1:6379/5", help="a database to flush and use")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    rows = [("kombu's transport, threads 32", "threads", 32, False), ("kombu's transport, solo", "solo", 1, False),
            ("crawler_tasks' transport, threads 32", "threads", 32, True),
            ("crawler_tasks' transport, solo", "solo", 1, True)]
    results: dict[str, list[tuple[float, float]]] = {r[0]: [] for r in rows}
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "floor_app.py").write_text(APP)
        for _ in range(args.rounds):  # interleaved rounds
            for name, pool, conc, ours in rows:
                results[name].append(drain(args.redis, args.messages, pool, conc, ours, cwd))
    print(f"{args.messages:,} no-op tasks drained by one worker process, {args.rounds} rounds (median)\n")
    print("| Worker | Messages/s | CPU ms/message |\n|---|---|---|")
    for name, runs in results.items():
        rate = statistics.median(args.messages / e for e, _ in runs)
        cpu = statistics.median(1000 * c / args.messages for _, c in runs)
        print(f"| {name} | {rate:,.0f} | {cpu:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
