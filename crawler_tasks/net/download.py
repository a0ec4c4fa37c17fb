"""HTTP downloads with requests: pooled session, one deadline per download, a decompressed size cap.

Each download also keeps what an archive (WARC) needs: the request line and
headers as sent, the status line and headers as received (case, order and
repeats), and byte counts from the wire (see :class:`RawExchange`). The body is
kept decoded (``Content-Encoding`` undone, chunking removed): the encoded bytes
are not kept, so an archive holds the decoded payload (see ``backends/warc.py``).

A download that gives no whole response raises the
:class:`~crawler_tasks.core.errors.FetchError` subclass of its kind, told by the
types of what requests, urllib3, the socket and ssl modules and the transport
raised (never by the text of a message).
"""

from __future__ import annotations

import http.client
import http.cookiejar
import io
import socket
import ssl
import time
import urllib.request
from collections.abc import Iterator

import requests
from urllib3.exceptions import NameResolutionError

from ..core.addresses import AddressPolicy
from ..core.errors import (
    AddressRefused,
    BadResponse,
    ConnectionFailed,
    ConnectionRefused,
    ConnectionReset,
    DNSFailure,
    FetchError,
    FetchTimeout,
    HeadersCut,
    PermitTimeout,
    ProxyFailure,
    RequestFailed,
    ResponseIncomplete,
    TLSFailure,
)
from ..core.memory import LARGE_BODY, Permit
from ..core.models import CrawlRequest
from ..core.responses import Download, RawExchange
from . import transport

CHUNK = 64 * 1024


def make_session(user_agent: str, *, pool_hosts: int = 8,
                 policy: AddressPolicy | None = None) -> requests.Session:
    """A session reused by every fetch of one worker thread, keeping an idle keep-alive
    connection to each of its ``pool_hosts`` most recent hosts (closed past that).

    ``policy`` says which addresses it may connect to (default: no private ones).
    """
    session = requests.Session()
    # No cookie jar shared between the requests of a thread (and so between crawls): a
    # request sends the Cookie header it carries, and what a site sets is not kept.
    session.cookies = requests.cookies.RequestsCookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
    # Without proxy variables (HTTP_PROXY...) set, skip requests' per-request
    # look-up of the environment; with them, requests applies them (NO_PROXY too).
    session.trust_env = bool(urllib.request.getproxies())
    adapter = transport.GuardedAdapter(policy=policy, pool_hosts=pool_hosts)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = user_agent
    return session


def download(session: requests.Session, req: CrawlRequest, *, timeout: float,
             maxsize: int, proxy: str | None = None, permit: Permit | None = None) -> Download:
    """Fetch ``req`` without following redirects; raise :class:`FetchError` when no whole response came.

    ``proxy`` (a URL, credentials included) is the proxy to go through; None = direct.

    ``timeout`` bounds the whole download (connect, headers and body), however
    slowly the server sends. The body is decompressed as it streams and cut at
    ``maxsize`` decompressed bytes (``truncated`` says so). A body growing past
    :data:`~crawler_tasks.core.memory.LARGE_BODY` bytes first takes ``permit``'s slot (the
    caller gives it back), the timeout paused while it waits.
    """
    started = time.monotonic()
    with transport.deadline(started + timeout) as limit:
        try:
            resp = _send(session, req, timeout, proxy)
            with resp:
                body, truncated = _read_capped(resp, req, maxsize, permit)
        except requests.exceptions.RequestException as exc:
            raise _request_error(exc, timeout, expired=limit.expired) from None
        if limit.expired and not truncated and _short(resp, body):
            raise _timeout(timeout)
    headers = {k.lower(): v for k, v in resp.headers.items()}
    wire: transport.Wire | None = getattr(resp.raw, "wire", None)
    raw = RawExchange.parse(wire.request_head, wire.response_head) if wire is not None else None
    if raw is not None and wire is not None:  # a parsed exchange comes from the wire's heads
        request_size = len(wire.request_head) + len(_bytes(resp.request.body))
        response_size = len(wire.response_head) + resp.raw.tell()
    else:
        request_size, response_size = _request_size(resp.request), _response_size(resp, body)
    return Download(
        url=req.url, status=resp.status_code, headers=headers, body=body, truncated=truncated,
        request_size=request_size, response_size=response_size,
        elapsed=time.monotonic() - started, raw=raw,
        sent_at=wire.sent_at if wire is not None and wire.sent_at else started,
    )


def _send(session: requests.Session, req: CrawlRequest, timeout: float, proxy: str | None) -> requests.Response:
    """Send ``req`` through ``session``'s adapter, its response's body left to stream.

    The request is prepared as ``Session.request`` would (the session's headers under the
    request's, header values checked, credentials in the URL sent as Basic auth), without
    the cookie jar and the redirect look-ahead a crawler has no use for. With proxy
    variables in the environment, ``Session.request`` itself applies them (``NO_PROXY`` too).
    """
    proxies = {"http": proxy, "https": proxy} if proxy else {}
    if session.trust_env:
        return session.request(req.method, req.url, headers=req.headers or None, timeout=(timeout, timeout),
                               allow_redirects=False, stream=True, proxies=proxies or None)
    prepared = requests.PreparedRequest()
    prepared.prepare_method(req.method)
    prepared.prepare_url(req.url, None)
    headers = session.headers
    if req.headers:
        headers = requests.structures.CaseInsensitiveDict(session.headers)
        headers.update(req.headers)
        for name in [k for k, v in headers.items() if v is None]:  # None unsets a session header
            del headers[name]
    prepared.prepare_headers(headers)
    prepared.prepare_body(None, None)
    if "@" in req.url:
        prepared.prepare_auth(None, req.url)
    prepared.hooks = {"response": []}
    adapter = session.get_adapter(req.url)
    return adapter.send(prepared, stream=True, timeout=(timeout, timeout), verify=session.verify,
                        cert=session.cert, proxies=proxies)


def _bytes(body: object) -> bytes:
    """A request body's bytes (requests allows streamed bodies too; the crawler sends none)."""
    if isinstance(body, str):
        return body.encode()
    return body if isinstance(body, bytes) else b""


def _read_capped(resp: requests.Response, req: CrawlRequest, maxsize: int,
                 permit: Permit | None = None) -> tuple[bytes, bool]:
    """The decompressed body up to ``maxsize`` bytes, and whether there was more."""
    if req.method == "HEAD":
        return b"", False
    body = io.BytesIO()  # grows in place, and its value is not copied again (a join would)
    size = 0
    for chunk in resp.iter_content(CHUNK):
        if permit is not None and min(size + len(chunk), maxsize) > LARGE_BODY and not permit.held:
            with transport.paused():
                if not permit.take():
                    raise PermitTimeout(f"no large-body permit free within {permit.wait_s:.0f}s")
        if size + len(chunk) >= maxsize:
            body.write(memoryview(chunk)[:maxsize - size])
            more = len(chunk) > maxsize - size or _more_to_read(resp)
            return body.getvalue(), more
        body.write(chunk)
        size += len(chunk)
    return body.getvalue(), False


def _more_to_read(resp: requests.Response) -> bool:
    """After exactly ``maxsize`` decompressed bytes: does the body go on?"""
    try:
        return any(resp.iter_content(1))
    except requests.exceptions.RequestException:
        return True


def _short(resp: requests.Response, body: bytes) -> bool:
    """A body ended by the watchdog: no length to check it against, or shorter than declared."""
    length = resp.headers.get("content-length", "")
    return not length.isdigit() or "content-encoding" in resp.headers or len(body) < int(length)


def _timeout(timeout: float) -> FetchTimeout:
    return FetchTimeout(f"timeout after {timeout}s")


def _request_error(exc: requests.exceptions.RequestException, timeout: float, *,
                   expired: bool) -> FetchError:
    """The :class:`FetchError` for what requests raised, named by the type of its root cause."""
    cause = _root_cause(exc)
    if expired or isinstance(exc, requests.exceptions.Timeout) or isinstance(cause, TimeoutError):
        return _timeout(timeout)
    if isinstance(cause, transport.BlockedAddress):  # before the proxy: not the proxy's fault
        return AddressRefused(f"refused: {cause}")
    if isinstance(exc, requests.exceptions.ProxyError):  # never the proxy URL: it may hold a password
        return ProxyFailure("proxy failed")
    if isinstance(exc, requests.exceptions.SSLError):
        return TLSFailure(f"TLS error: {_ssl_reason(exc)}")
    if isinstance(cause, transport.HeadersCutOff):
        return HeadersCut("response cut off inside its headers")
    if isinstance(cause, http.client.IncompleteRead):  # urllib3's too: ``partial`` an int there
        got = cause.partial if isinstance(cause.partial, int) else len(cause.partial or b"")
        return ResponseIncomplete(f"response ended early: {got} bytes read, {cause.expected} more expected")
    if isinstance(cause, http.client.HTTPException) and not isinstance(cause, http.client.RemoteDisconnected):
        return BadResponse(f"malformed response: {cause}")  # LineTooLong, too many headers, bad status line
    if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError,
                        requests.exceptions.ContentDecodingError)):
        return _connection_error(exc)
    return RequestFailed(f"request failed: {str(exc)[:200]}")


def _links(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions one wraps: in its args, its ``reason`` (urllib3), cause and context."""
    yield from (a for a in getattr(exc, "args", ()) if isinstance(a, BaseException))
    for inner in (getattr(exc, "reason", None), exc.__cause__, exc.__context__):
        if isinstance(inner, BaseException):
            yield inner


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost exception that requests and urllib3 wrapped (in args, cause or context)."""
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = next((a for a in getattr(exc, "args", ()) if isinstance(a, BaseException)), None)
        inner = inner or getattr(exc, "reason", None) or exc.__cause__ or exc.__context__
        if not isinstance(inner, BaseException):
            break
        exc = inner
    return exc


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception it wraps, however deep (each once)."""
    found: dict[int, BaseException] = {}
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) not in found:
            found[id(e)] = e
            todo.extend(_links(e))
    return list(found.values())


def _wraps(exc: BaseException, kinds: type[BaseException] | tuple[type[BaseException], ...],
           *, but: tuple[type[BaseException], ...] = ()) -> bool:
    """Whether ``exc`` is, or wraps, one of ``kinds`` (and none of ``but``)."""
    return any(isinstance(e, kinds) and not isinstance(e, but) for e in _chain(exc))


def _ssl_reason(exc: BaseException) -> str:
    if _wraps(exc, ssl.SSLCertVerificationError):  # OpenSSL's CERTIFICATE_VERIFY_FAILED
        return "certificate verify failed"
    return str(_root_cause(exc))[:200]


def _connection_error(exc: Exception) -> ConnectionFailed:
    """The :class:`ConnectionFailed` of the kind the socket error that ``exc`` wraps says."""
    if _wraps(exc, ConnectionRefusedError):
        return ConnectionRefused("connection refused")
    if _wraps(exc, (socket.gaierror, NameResolutionError)):
        return DNSFailure("DNS lookup failed")
    # http.client's RemoteDisconnected (closed with no response) is a ConnectionResetError
    # that no reset sent: not a blocking sign.
    if _wraps(exc, ConnectionResetError, but=(http.client.RemoteDisconnected,)):
        return ConnectionReset("connection reset")
    return ConnectionFailed(f"connection error: {str(exc)[:200]}")


def _request_size(prepared: requests.PreparedRequest) -> int:
    line = len(prepared.method or "") + len(prepared.path_url) + 12
    headers = sum(len(k) + len(v) + 4 for k, v in prepared.headers.items())
    return line + headers + 2 + len(_bytes(prepared.body))


def _response_size(resp: requests.Response, body: bytes) -> int:
    headers = sum(len(k) + len(v) + 4 for k, v in resp.headers.items())
    return 15 + len(resp.reason or "") + headers + 2 + len(body)
