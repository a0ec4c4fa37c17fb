"""WARC archive store: ``warc:///dir`` writes WARC/1.1 request and response records.

Write-only: a WARC archive is for the tools web archivists use (warcio,
pywb, OpenWayback), not read back by the crawler: :meth:`WARCStore.records`
raises :class:`WriteOnlyStore`, ``get`` finds nothing (a recrawl revalidates
nothing from it) and ``count`` is 0. Read the files with warcio
(``warcio index DIR/*.warc.gz``, ``warcio check``, ``warcio extract``).

Each worker process appends to its own file,
``crawl-<utc>-<host>-<pid>-<n>.warc.gz`` (one gzip member per record), opened
on the first write and rotated once it passes ``max_bytes``; the threads of a
process share it under a lock. Every ``upsert`` ends with an ``fsync``, so a
record acknowledged after it is on disk. Appending cannot replace: a
redelivered store message archives the page again (readers keep the later
capture or both; neither is wrong in an archive).

What is archived, from the record (see :func:`crawler_tasks.core.policy.response_record`):

- the request line and headers as sent, and the status line and headers as
  received (case, order and repeats);
- the payload is the body as the crawler holds it: decompressed and
  de-chunked. So ``Content-Encoding`` and ``Transfer-Encoding`` are renamed
  ``X-Archive-Orig-…`` (pywb's convention) and ``Content-Length`` says the
  length written (the one sent is kept as ``X-Archive-Orig-Content-Length``
  when it differs), as many crawlers that archive decoded payloads do;
- text types (HTML, ``text/*``, JSON, XML) come from the record's ``body`` text
  encoded again with its ``encoding``: not kept twice in every record. That
  gives the served bytes back unless decoding replaced invalid bytes or
  dropped a BOM; the record's ``payload_digest`` tells, and a mismatch is
  logged (the archive then holds the re-encoded text, with its own valid
  digests). Other types come from ``body_base64``;
- a body cut at ``CRAWLER_DOWNLOAD_MAXSIZE`` is marked ``WARC-Truncated: length``;
  a response whose body the record does not hold (``CRAWLER_STORE_BODY=0``,
  3xx and failure bodies) is archived with its headers and an empty payload,
  marked ``WARC-Truncated: unspecified``;
- the items a parse rule extracted follow as a ``metadata`` record
  (``Content-Type: application/json``, ``{"rule": ..., "items": [...]}``, with
  ``"rendered"`` for a page rendered in a browser), ``WARC-Concurrent-To`` the
  response, as the request record is;
- a rendered page's DOM follows as a ``conversion`` record (``text/html; charset=utf-8``)
  whose ``WARC-Refers-To`` is the response: the response stays the exchange as served;
- records without a response (connection errors, robots.txt skips) write nothing.
"""

from __future__ import annotations

import base64
import hashlib
import http
import io
import itertools
import json
import logging
import os
import socket
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from ..core.errors import StoreUnavailable, UnknownStore
from ..core.models import PageRecord
from .base import RecordFailure, WriteOnly

log = logging.getLogger(__name__)

MAX_BYTES = 1 << 30  # a file is rotated once it passes this size (bytes)
#: Response headers that describe the bytes on the wire, not the decoded payload archived.
_WIRE_HEADERS = frozenset({"content-encoding", "transfer-encoding"})
_ORIG = "X-Archive-Orig-"


class _RawHeaders(StatusAndHeaders):
    """warcio's headers, but written as latin-1 (the bytes received) instead of
    %-encoding any non-ASCII value."""

    def compute_headers_buffer(self, header_filter: Any = None) -> None:
        self.headers_buff = self.to_bytes(header_filter, encoding="latin-1")


class WARCStore(WriteOnly):
    """Appends each record's request and response to this process's WARC file."""

    def __init__(self, directory: str, *, max_bytes: int = MAX_BYTES) -> None:
        path = Path(directory)
        if not path.is_absolute():
            raise UnknownStore(f"warc store {directory!r}: the directory must be an absolute path")
        if path.exists() and not path.is_dir():
            raise UnknownStore(f"warc store {directory!r}: not a directory")
        if max_bytes <= 0:
            raise UnknownStore(f"warc store {directory!r}: max_bytes must be positive")
        self.directory = path
        self.shown = f"warc store {str(path)!r}"
        self.read_with = "read it with warcio (warcio index DIR/*.warc.gz)"
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._writer: WARCWriter | None = None
        self._pid = os.getpid()
        self._serial = itertools.count(1)

    @classmethod
    def from_uri(cls, uri: str, max_bytes: int = MAX_BYTES) -> WARCStore:
        """The store ``warc:///dir`` names; :class:`UnknownStore` if malformed."""
        parts = urlsplit(uri)
        if parts.scheme.lower() != "warc" or parts.netloc or not parts.path.startswith("/") \
                or parts.query or parts.fragment:
            raise UnknownStore(f"warc store {uri!r}: expected warc:///absolute/directory")
        return cls(parts.path, max_bytes=max_bytes)

    # -- the Store protocol ------------------------------------------------

    def upsert(self, records: Sequence[PageRecord]) -> list[RecordFailure]:
        """Append the records that hold a response, then fsync; refused ones come back."""
        failures: list[RecordFailure] = []
        with self._lock:
            try:
                for record in records:
                    if record.status is None:
                        continue  # no response: nothing an archive replays
                    try:
                        built = self._build(record)
                    except (ValueError, TypeError, UnicodeError) as exc:
                        failures.append(RecordFailure(record.fingerprint, f"warc: {exc}"))
                        continue
                    self._write(*built)
                if self._file is not None:
                    self._file.flush()
                    os.fsync(self._file.fileno())
            except OSError as exc:
                self._drop_file()
                raise StoreUnavailable(f"warc store {str(self.directory)!r}: {exc}") from None
        return failures

    def close(self) -> None:
        with self._lock:
            if self._file is not None and self._pid == os.getpid():
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
            self._file = self._writer = None

    # -- writing -----------------------------------------------------------

    def _build(self, record: PageRecord) -> tuple[Any, list[Any]]:
        """The response warcio record of ``record`` (a ``revisit`` record, identical payload
        digest, when its body repeats a page archived before: ``duplicate_of``), and those
        that go with it: the request,
        a ``metadata`` record of the items a parse rule extracted (JSON), and a rendered
        page's DOM as a ``conversion`` record."""
        writer = WARCWriter(io.BytesIO(), gzip=True, warc_version="1.1")  # builds, never writes
        date = _warc_date(record.fetched_at)
        status_line = record.status_line or _status_line(record.status or 0)
        # A 304 of a recrawl keeps the stored page in the record; on the wire it had no body.
        payload = b"" if _code(status_line) == "304" else _payload(record)
        truncated = "length" if record.truncated else None
        if record.size and payload is None:
            truncated = "unspecified"
        payload = payload or b""
        protocol, status = (status_line.split(" ", 1) + [""])[:2]
        headers = _archived_headers(record, len(payload))
        http_headers = _RawHeaders(status, headers, protocol=protocol)
        warc_headers = {"WARC-Date": date}
        if truncated:
            warc_headers["WARC-Truncated"] = truncated
        same = record.duplicate_of
        if same and record.payload_digest and not truncated:  # the body is archived with that page
            response = writer.create_revisit_record(
                record.url, record.payload_digest, same["url"], _warc_date(same["fetched_at"]),
                http_headers=http_headers, warc_headers_dict=warc_headers)
        else:
            response = writer.create_warc_record(
                record.url, "response", payload=io.BytesIO(payload), length=len(payload),
                warc_headers_dict=warc_headers, http_headers=http_headers)
        concurrent = {"WARC-Date": date,
                      "WARC-Concurrent-To": response.rec_headers.get_header("WARC-Record-ID")}
        others = []
        if record.request and record.request.get("line"):
            req_headers = [(str(k), str(v)) for k, v in record.request.get("headers") or []]
            others.append(writer.create_warc_record(
                record.url, "request", payload=io.BytesIO(b""), length=0,
                warc_headers_dict=dict(concurrent),
                http_headers=_RawHeaders(record.request["line"], req_headers, is_http_request=True)))
        if record.items or record.rendered:
            about: dict[str, Any] = {"rule": record.rule, "items": record.items}
            if record.rendered:
                about["rendered"] = record.rendered
            data = json.dumps(about, ensure_ascii=False).encode()
            others.append(writer.create_warc_record(
                record.url, "metadata", payload=io.BytesIO(data), length=len(data),
                warc_headers_dict=dict(concurrent), warc_content_type="application/json"))
        if record.dom is not None:
            dom = record.dom.encode("utf-8", "surrogateescape")
            others.append(writer.create_warc_record(
                record.url, "conversion", payload=io.BytesIO(dom), length=len(dom),
                warc_headers_dict={"WARC-Date": date,
                                   "WARC-Refers-To": response.rec_headers.get_header("WARC-Record-ID")},
                warc_content_type="text/html; charset=utf-8"))
        return response, others

    def _write(self, response: Any, others: list[Any]) -> None:
        """Append a response and its companions (same file), rotating after them when the
        file is full."""
        writer = self._open()
        writer.write_record(response)
        for record in others:
            writer.write_record(record)
        assert self._file is not None
        if self._file.tell() >= self.max_bytes:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = self._writer = None

    def _open(self) -> WARCWriter:
        """This process's writer; a new file on first use, after rotation or after a fork."""
        if self._pid != os.getpid():  # a forked child: the parent's file is not ours
            self._pid, self._file, self._writer = os.getpid(), None, None
        if self._writer is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")
            name = f"crawl-{stamp}-{socket.gethostname()}-{os.getpid()}-{next(self._serial)}.warc.gz"
            self._file = open(self.directory / name, "xb")  # noqa: SIM115 (closed by rotation/close)
            self._writer = WARCWriter(self._file, gzip=True, warc_version="1.1")
            self._writer.write_record(self._writer.create_warcinfo_record(name, {
                "software": "crawler-tasks", "format": "WARC File Format 1.1",
                "hostname": socket.gethostname()}))
        return self._writer

    def _drop_file(self) -> None:
        """After a write error: start a new file next time (the old one may end mid-record)."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
        self._file = self._writer = None


def _code(status_line: str) -> str:
    """The status code of ``HTTP/1.1 304 Not Modified``."""
    parts = status_line.split(" ", 2)
    return parts[1] if len(parts) > 1 else ""


def _payload(record: PageRecord) -> bytes | None:
    """The payload bytes the record holds (None when it holds none)."""
    if record.body_base64 is not None:
        return base64.b64decode(record.body_base64)
    if record.body is None:
        return None
    encoding = record.encoding or "utf-8"
    try:
        data = record.body.encode(encoding)
    except LookupError:
        data = record.body.encode("utf-8")
    except UnicodeEncodeError:
        data = record.body.encode(encoding, errors="replace")
    if record.payload_digest and record.payload_digest != _sha1(data):
        log.warning("warc: %s re-encoded as %s differs from the bytes served", record.url, encoding)
    return data


def _archived_headers(record: PageRecord, length: int) -> list[tuple[str, str]]:
    """The response headers as received, made true of the decoded payload archived."""
    if record.raw_headers is not None:
        headers = [(str(k), str(v)) for k, v in record.raw_headers]
    else:  # a record from before raw headers were kept: its (lower-cased) headers
        headers = list(record.headers.items())
    if record.method == "HEAD":
        return headers
    out: list[tuple[str, str]] = []
    declared = None
    for name, value in headers:
        lower = name.lower()
        if lower in _WIRE_HEADERS:
            out.append((_ORIG + name, value))
        elif lower == "content-length":
            declared = (name, value)
        else:
            out.append((name, value))
    if declared is not None and declared[1].strip() == str(length) and len(out) == len(headers) - 1:
        out.append(declared)  # nothing changed the payload: the header as sent
    else:
        if declared is not None:
            out.append((_ORIG + declared[0], declared[1]))
        out.append(("Content-Length", str(length)))
    return out


def _status_line(status: int) -> str:
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    return f"HTTP/1.1 {status} {reason}".rstrip()


def _warc_date(fetched_at: str) -> str:
    try:
        when = datetime.fromisoformat(fetched_at)
    except ValueError:
        when = datetime.now(UTC)
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return datetime_to_iso_date(when, use_micros=bool(when.microsecond))


def _sha1(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()
