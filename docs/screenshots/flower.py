"""Screenshots of Flower watching a crawl, as a person sees it in a browser.

Run from the repository: ``.venv/bin/python docs/screenshots/flower.py``. It writes
``flower-tasks.png`` (the Tasks page) and ``flower-workers.png`` (the Workers
dashboard) next to itself.

Everything it needs is its own and goes away at the end, on an error or Ctrl-C too:
a Redis on a free loopback port (broker and crawl state; the shared Redis on
127.0.0.1:6379 is never touched), the demo site (slowed down per request so the
crawl lasts while the pictures are taken), Flower (with basic auth, as the docs
recommend), one worker, and headless Chromium (Debian's /usr/bin/chromium).

Chromium opens ``http://admin:demo-password@127.0.0.1:PORT/...``: after Flower's
401 challenge it keeps the credentials in its auth cache and sends them with the
page's XHRs too (the task table loads that way), as a browser does after a person
typed them into the login dialog.
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
FLOWER_USER, FLOWER_PASSWORD = "admin", "demo-password"
def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the demo site

def slow_demo_site(pages: int, latency: float):
    """The quick start's DemoSite, each page answered after ``latency`` seconds."""
    from crawler_tasks.cli.demo_site import DemoSite

    class SlowDemoSite(DemoSite):
        def render(self, path: str) -> bytes | None:
            time.sleep(latency)
            return super().render(path)

    return SlowDemoSite(pages)


# ---------------------------------------------------------------- processes

def start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """A child in a session of its own (Ctrl-C reaches only this script, which stops it)."""
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen | None, timeout: float = 15.0) -> None:
    """SIGTERM, then SIGKILL to its whole process group (pool children too)."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def get_json(url: str, timeout: float = 5.0):
    """A Flower API answer (with the basic-auth credentials)."""
    token = base64.b64encode(f"{FLOWER_USER}:{FLOWER_PASSWORD}".encode()).decode()
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        return json.load(resp)


def wait_for(what: str, check, timeout: float, procs: tuple[subprocess.Popen, ...] = ()) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, ValueError):
            if check():
                return
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{what}: {proc.args[:6]} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g}s")
        time.sleep(0.2)


def screenshot(url: str, out: Path, *, size: str, budget_ms: int, logs: Path) -> None:
    """One headless Chromium picture of ``url`` (a fresh profile, no network chatter)."""
    profile = tempfile.mkdtemp(prefix="flower-shot-chromium-")
    tmp = out.with_suffix(".tmp.png")  # the old picture stays if this one fails
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-extensions", "--disable-breakpad", "--disable-crash-reporter",
           "--hide-scrollbars", "--force-device-scale-factor=1",
           f"--user-data-dir={profile}", f"--window-size={size}", f"--virtual-time-budget={budget_ms}",
           f"--screenshot={tmp}", url]
    shown = url.replace(f":{FLOWER_PASSWORD}@", ":***@")
    proc = start(cmd, os.environ.copy(), logs / "chromium.log")
    try:
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"chromium did not finish the screenshot of {shown} in 60s") from None
        if not tmp.exists() or tmp.stat().st_size == 0:
            raise RuntimeError(f"chromium wrote no screenshot of {shown} (see {logs / 'chromium.log'})")
        tmp.replace(out)
    finally:
        stop(proc, timeout=5)
        shutil.rmtree(profile, ignore_errors=True)
        tmp.unlink(missing_ok=True)
    say(f"wrote {out} ({out.stat().st_size // 1024} KiB)")


# ---------------------------------------------------------------- main

def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops everything the way Ctrl-C does


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="directory for the PNGs (default: %(default)s)")
    parser.add_argument("--pages", type=int, default=300, help="pages of the demo site (default: %(default)s)")
    parser.add_argument("--latency", type=float, default=1.0,
                        help="seconds the demo site takes per page (default: %(default)s)")
    parser.add_argument("--concurrency", type=int, default=8, help="worker threads (default: %(default)s)")
    parser.add_argument("--width", type=int, default=1900, help="browser window width (default: %(default)s)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the logs (Flower, worker, Chromium)")
    args = parser.parse_args()

    if not os.access(CHROMIUM, os.X_OK):
        sys.exit(f"{CHROMIUM} not found (Debian: apt-get install chromium)")
    signal.signal(signal.SIGTERM, interrupt)

    from crawler_tasks.cli.local import EmbeddedRedis, free_port

    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="flower-shot-"))
    started = time.monotonic()
    keep_logs = True  # unless it ends well or is interrupted
    redis_server = site = flower = worker = None
    try:
        redis_server = EmbeddedRedis().start()
        say(f"private Redis at {redis_server.url}")
        site = slow_demo_site(args.pages, args.latency).__enter__()
        say(f"demo site with {args.pages} pages at {site.url} ({args.latency:g}s per page)")

        # Only these settings: none of the caller's CRAWLER_* or FLOWER_* (a broker, a store...).
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CRAWLER_", "FLOWER_"))}
        env.update({
            "CRAWLER_BROKER_URL": redis_server.url,
            "CRAWLER_REDIS_URL": redis_server.url,
            "CRAWLER_STORE": str(work / "pages.db"),
            "CRAWLER_PRIVATE_ALLOWLIST": "127.0.0.1",  # the demo site, as `crawler-tasks demo` allows it
            "CRAWLER_DOWNLOAD_DELAY": "0",  # the site is ours: no politeness delay
            "CRAWLER_HOST_CONCURRENCY": "0",
            "CRAWLER_TASK_EVENTS": "1",  # every task in Flower from the start
        })
        os.environ.clear()
        os.environ.update(env)  # submit() in this process reads them too

        flower_port = free_port()
        flower = start([sys.executable, "-m", "celery", "-A", "crawler_tasks", "flower",
                        "--address=127.0.0.1", f"--port={flower_port}",
                        f"--basic-auth={FLOWER_USER}:{FLOWER_PASSWORD}"],  # the args column: the app's default
                       env, work / "flower.log")
        flower_url = f"http://127.0.0.1:{flower_port}"
        wait_for("Flower", lambda: isinstance(get_json(f"{flower_url}/api/workers"), dict), 30, (flower,))
        say(f"Flower at {flower_url} (user {FLOWER_USER}, password {FLOWER_PASSWORD})")

        worker = start([sys.executable, "-m", "celery", "-A", "crawler_tasks", "worker",
                        "-P", "threads", "-c", str(args.concurrency), "-n", "demo@%h",
                        "--without-mingle", "--without-gossip", "-l", "WARNING"],
                       env, work / "worker.log")
        wait_for("the worker online in Flower",
                 lambda: any(get_json(f"{flower_url}/api/workers?status=1").values()), 60, (worker, flower))
        say("worker online")

        import crawler_tasks

        crawl_id = datetime.now(UTC).strftime("demo-%Y%m%d-%H%M%S")
        accepted = crawler_tasks.submit(site.url, crawl_id=crawl_id)
        say(f"crawl {crawl_id} submitted ({accepted} seed accepted)")

        def tasks_by_state() -> collections.Counter:
            tasks = get_json(f"{flower_url}/api/tasks?limit={args.pages * 10}").values()
            return collections.Counter((t.get("name"), t.get("state")) for t in tasks)

        def enough_tasks() -> bool:
            seen = tasks_by_state()
            return seen["crawl.fetch", "SUCCESS"] >= 30 and seen["crawl.store_batch", "SUCCESS"] >= 1

        wait_for("30 fetches and a store batch done", enough_tasks, 120, (worker, flower))
        # Heights: the tasks page's 15 rows and its footer; the workers page's table.
        browser_url = f"http://{FLOWER_USER}:{FLOWER_PASSWORD}@127.0.0.1:{flower_port}"
        screenshot(f"{browser_url}/tasks", args.out / "flower-tasks.png", size=f"{args.width},1030",
                   budget_ms=4000, logs=work)
        screenshot(f"{browser_url}/", args.out / "flower-workers.png", size=f"{args.width},570",
                   budget_ms=4000, logs=work)

        seen = tasks_by_state()
        say("Flower holds " + ", ".join(f"{n} {name} {state}" for (name, state), n in sorted(seen.items())))
        if worker.poll() is not None:
            raise RuntimeError("the worker exited during the screenshots")
        if not seen["crawl.fetch", "STARTED"]:
            say("warning: the crawl had ended before the last screenshot; try more --pages or --latency")
        keep_logs = args.keep_logs
        say(f"done in {time.monotonic() - started:.0f}s")
        return 0
    except KeyboardInterrupt:
        say("interrupted: stopping")
        keep_logs = args.keep_logs
        return 130
    except (RuntimeError, OSError) as exc:
        say(f"failed: {exc}")
        return 1
    finally:
        # Nothing interrupts the clean-up; every stop has a time limit.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop(worker, timeout=20)  # warm: the running fetches finish
        stop(flower)
        if site is not None:
            site.__exit__()
        if redis_server is not None:
            redis_server.stop()
        if keep_logs:
            say(f"logs in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        say(f"stopped everything after {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    sys.exit(main())
