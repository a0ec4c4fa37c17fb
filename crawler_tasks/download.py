"""HTTP downloads with requests: pooled session, timeouts, a streamed size cap."""

from __future__ import annotations

import email.utils
import time
import urllib.request
from dataclasses import dataclass

import requests
from requests.adapters import HTTPAdapter

from .errors import FetchError
from .models import CrawlRequest

RETRY_STATUSES = frozenset({408, 429})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
CHUNK = 64 * 1024


@dataclass
class Download:
    """A response as the crawler keeps it: the body is at most ``maxsize`` bytes."""

    url: str
    status: int
    headers: dict[str, str]
    body: bytes
    truncated: bool
    request_size: int
    response_size: int
    elapsed: float = 0.0

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()


def make_session(user_agent: str, pool_size: int = 32) -> requests.Session:
    """A session with a connection pool, reused by every fetch of one worker process."""
    session = requests.Session()
    # Without proxy variables (HTTP_PROXY...) set, skip requests' per-request
    # look-up of the environment; with them, requests applies them (NO_PROXY too).
    session.trust_env = bool(urllib.request.getproxies())
    adapter = HTTPAdapter(pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = user_agent
    return session


def download(session: requests.Session, req: CrawlRequest, *, timeout: float,
             maxsize: int) -> Download:
    """Fetch ``req`` without following redirects; raise :class:`FetchError` when no response came.

    The body is streamed and cut at ``maxsize`` bytes (``truncated`` says so);
    ``timeout`` bounds the connect, each read and the whole body.
    """
    started = time.monotonic()
    try:
        resp = session.request(req.method, req.url, headers=req.headers or None,
                               timeout=(timeout, timeout), allow_redirects=False, stream=True)
    except requests.exceptions.Timeout:
        raise FetchError(f"timeout after {timeout}s", retryable=True, reason="timeout") from None
    except requests.exceptions.ConnectionError as exc:
        raise _connection_error(exc) from None
    except requests.exceptions.RequestException as exc:
        raise FetchError(f"request failed: {exc}", retryable=False, reason="request") from None
    with resp:
        body, truncated = _read_capped(resp, req, started=started, timeout=timeout, maxsize=maxsize)
    headers = {k.lower(): v for k, v in resp.headers.items()}
    return Download(
        url=req.url, status=resp.status_code, headers=headers, body=body, truncated=truncated,
        request_size=_request_size(resp.request), response_size=_response_size(resp, body),
        elapsed=time.monotonic() - started,
    )


def _read_capped(resp: requests.Response, req: CrawlRequest, *, started: float,
                 timeout: float, maxsize: int) -> tuple[bytes, bool]:
    if req.method == "HEAD":
        return b"", False
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in resp.iter_content(CHUNK):
            chunks.append(chunk)
            size += len(chunk)
            if size >= maxsize:
                return b"".join(chunks)[:maxsize], size > maxsize or _more_to_read(resp, maxsize)
            if time.monotonic() - started > timeout:
                raise FetchError(f"timeout after {timeout}s", retryable=True, reason="timeout")
    except requests.exceptions.RequestException as exc:
        if "timed out" in str(exc).lower():
            raise FetchError(f"timeout after {timeout}s", retryable=True, reason="timeout") from None
        raise _connection_error(exc) from None
    return b"".join(chunks), False


def _more_to_read(resp: requests.Response, maxsize: int) -> bool:
    length = resp.headers.get("content-length", "")
    return not length.isdigit() or int(length) > maxsize


def _connection_error(exc: Exception) -> FetchError:
    """A retryable :class:`FetchError` naming what went wrong with the connection."""
    text = str(exc)
    if "refused" in text.lower():
        return FetchError("connection refused", retryable=True, reason="connection_refused")
    if any(s in text for s in ("Name or service not known", "nodename nor servname",
                               "Temporary failure in name resolution", "No address associated")):
        return FetchError("DNS lookup failed", retryable=True, reason="dns")
    if "reset" in text.lower():
        return FetchError("connection reset", retryable=True, reason="connection_reset")
    return FetchError(f"connection error: {text[:200]}", retryable=True, reason="connection")


def _request_size(prepared: requests.PreparedRequest) -> int:
    line = len(prepared.method or "") + len(prepared.path_url) + 12
    headers = sum(len(k) + len(v) + 4 for k, v in prepared.headers.items())
    return line + headers + 2 + len(prepared.body or b"")


def _response_size(resp: requests.Response, body: bytes) -> int:
    headers = sum(len(k) + len(v) + 4 for k, v in resp.headers.items())
    return 15 + len(resp.reason or "") + headers + 2 + len(body)


def status_error(dl: Download) -> FetchError | None:
    """A retryable :class:`FetchError` for 408, 429 and 5xx responses, else None."""
    if dl.status in RETRY_STATUSES or dl.status >= 500:
        return FetchError(f"HTTP {dl.status}", retryable=True, status=dl.status,
                          retry_after=retry_after_seconds(dl.headers.get("retry-after")))
    return None


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)
