"""Test helpers for secured servers: a private CA, a redis-server with a password (with TLS
or without), a TLS-terminating proxy.

Nothing here touches a shared server: :class:`TlsRedis` and
:class:`PasswordRedis` start their own ``redis-server`` on a free port, and
:class:`TlsProxy` puts a TLS listener of its own in front of a plain TCP port
(RabbitMQ has no TLS listener here).
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import threading
import time
from pathlib import Path
from typing import Self

import redis
import trustme

from crawler_tasks.cli.local import free_port


class Pki:
    """A trustme CA and a server certificate for 127.0.0.1 and localhost, as PEM files."""

    def __init__(self, directory: Path, *, names: tuple[str, ...] = ("127.0.0.1", "localhost")) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA()
        self.server = self.ca.issue_cert(*names)
        self.ca_file = str(directory / "ca.pem")
        self.cert_file = str(directory / "server.pem")
        self.key_file = str(directory / "server.key")
        self.ca.cert_pem.write_to_path(self.ca_file)
        self.server.cert_chain_pems[0].write_to_path(self.cert_file)
        for extra in self.server.cert_chain_pems[1:]:
            extra.write_to_path(self.cert_file, append=True)
        self.server.private_key_pem.write_to_path(self.key_file)

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


class _PrivateRedis:
    """A redis-server of the test's own on a free port, with ``requirepass``."""

    def __init__(self, directory: Path, password: str) -> None:
        self.dir, self.password = directory, password
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def client(self, db: int = 0) -> redis.Redis:
        raise NotImplementedError

    def args(self) -> list[str]:
        """Where it listens."""
        raise NotImplementedError

    def start(self, timeout: float = 10.0) -> Self:
        binary = shutil.which("redis-server") or "redis-server"
        self.proc = subprocess.Popen(
            [binary, *self.args(), "--bind", "127.0.0.1", "--requirepass", self.password,
             "--save", "", "--appendonly", "no", "--dir", str(self.dir),
             "--maxmemory-policy", "noeviction", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.client().ping()
                return self
            except (redis.ConnectionError, OSError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the {type(self).__name__} redis-server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class PasswordRedis(_PrivateRedis):
    """A private redis-server on plain TCP with ``requirepass``."""

    def url(self, db: int = 0) -> str:
        """Its URL, password included (as written: give a password that needs no encoding)."""
        return f"redis://:{self.password}@127.0.0.1:{self.port}/{db}"

    def client(self, db: int = 0) -> redis.Redis:
        """A client with the password (for the test's own checks)."""
        return redis.Redis(host="127.0.0.1", port=self.port, db=db, password=self.password,
                           socket_connect_timeout=3)

    def args(self) -> list[str]:
        return ["--port", str(self.port)]


class TlsRedis(_PrivateRedis):
    """A private redis-server speaking only TLS (``--port 0``), with ``requirepass``."""

    def __init__(self, directory: Path, pki: Pki, password: str) -> None:
        super().__init__(directory, password)
        self.pki = pki

    def client(self, db: int = 0) -> redis.Redis:
        """A trusted client with the password (for the test's own checks)."""
        return redis.Redis(host="127.0.0.1", port=self.port, db=db, password=self.password, ssl=True,
                           ssl_ca_certs=self.pki.ca_file, socket_connect_timeout=3)

    def args(self) -> list[str]:
        return ["--port", "0", "--tls-port", str(self.port),
                "--tls-cert-file", self.pki.cert_file, "--tls-key-file", self.pki.key_file,
                "--tls-ca-cert-file", self.pki.ca_file, "--tls-auth-clients", "no"]


class TlsProxy:
    """Terminates TLS on a free loopback port and relays the plain bytes to ``upstream``.

    Runs an asyncio loop on one thread (asyncio's TLS, not a socket shared by
    two threads). ``handshakes`` counts clients that completed the TLS
    handshake: a client that refused the certificate never reaches upstream.
    """

    def __init__(self, context: ssl.SSLContext, upstream: tuple[str, int]) -> None:
        self.context, self.upstream = context, upstream
        self.port = free_port()
        self.handshakes = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="tls-proxy", daemon=True)

    def start(self) -> TlsProxy:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        self._server = future.result(10)
        return self

    async def _serve(self) -> asyncio.base_events.Server:
        return await asyncio.start_server(self._handle, "127.0.0.1", self.port, ssl=self.context,
                                          ssl_handshake_timeout=5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.handshakes += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer),
                             return_exceptions=True)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the other side may be gone already
                pass

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
                await asyncio.sleep(0)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
