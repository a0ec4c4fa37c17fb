"""The JSON messages that travel between tasks: a request and a page record.

Both are dataclasses with ``to_dict``/``from_dict``; a request is validated when
it is built, so an invalid URL never reaches the broker.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import re
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import Any

from .errors import BadInput, InvalidURL
from .memory import LARGE_BODY
from .urls import fingerprint, validate_url

DEFAULT_CRAWL_ID = "default"
METHODS = ("GET", "HEAD")
_CRAWL_ID_FORBIDDEN = frozenset(":{}")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
#: Longest crawl id: it is part of every key of its crawl and of every message.
MAX_CRAWL_ID = 128
#: Meta keys the retry policy turns into numbers.
_INTEGER_META = ("max_retry_times", "retry_priority_adjust")
#: Characters of a long string escaped at a time by :func:`json_bytes`.
_SLICE = 1 << 16


def _is_int(value: Any) -> bool:
    """True for an int that is not a bool (JSON true is no priority)."""
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class CrawlRequest:
    """One URL to fetch, with everything that decides how and when.

    ``priority`` follows Scrapy: higher is sooner, 0 is normal. ``meta`` is
    free-form JSON; the key ``NotExtract`` stores the page without following
    its links.
    """

    url: str
    method: str = "GET"
    headers: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    depth: int = 0
    retries: int = 0
    redirects: int = 0
    crawl_id: str = DEFAULT_CRAWL_ID
    dont_filter: bool = False
    #: Who hears of the page once it is stored: ``{"on_page": <callback>, "follow": bool}``
    #: (``follow``: the pages found from it too); see :func:`callback`.
    notify: dict[str, Any] | None = None
    #: Fetched by a ``crawl.render`` task: its document rendered in a browser before parsing.
    render: bool = False
    #: The plugin function that parses the page (``module.function``) in place of the URL rules.
    callback: str | None = None
    #: The plugin function told when the request fails (``module.function``).
    errback: str | None = None
    #: Keyword arguments of the callback (JSON).
    cb_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Statuses besides 2xx whose page reaches the callback (and are neither retried nor failures).
    handle_status: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", validate_url(self.url))
        if self.notify is not None:
            object.__setattr__(self, "notify", _notify(self.notify))
        method = str(self.method).upper()
        if method not in METHODS:
            raise BadInput(f"method: {self.method!r} is not GET or HEAD")
        object.__setattr__(self, "method", method)
        if not isinstance(self.meta, dict):
            raise BadInput("meta: must be a JSON object")
        for key in _INTEGER_META:  # read by the retry policy, in the worker
            if key in self.meta and not _is_int(self.meta[key]):
                raise BadInput(f"meta: {key} must be an integer")
        if not isinstance(self.headers, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.headers.items()):
            raise BadInput("headers: must be a JSON object of strings")
        crawl_id = self.crawl_id
        if (not isinstance(crawl_id, str) or not crawl_id or not crawl_id.isprintable()
                or not _CRAWL_ID_FORBIDDEN.isdisjoint(crawl_id) or len(crawl_id) > MAX_CRAWL_ID):
            # ':' separates key parts, '{' and '}' would break the Redis Cluster hash tag.
            raise BadInput(f"crawl_id: {crawl_id!r:.80} must be a non-empty printable string "
                           f"of at most {MAX_CRAWL_ID} characters without ':', '{{' or '}}'")
        for name in ("priority", "depth", "retries", "redirects"):
            value = getattr(self, name)
            if not _is_int(value):
                raise BadInput(f"{name}: must be an integer")
            if name != "priority" and value < 0:
                raise BadInput(f"{name}: must be 0 or more")
        if not isinstance(self.dont_filter, bool):
            raise BadInput("dont_filter: must be true or false")
        if not isinstance(self.render, bool):
            raise BadInput("render: must be true or false")
        if self.callback is not None or self.errback is not None or self.cb_kwargs != {} or self.handle_status != ():
            self._check_parser_fields()  # most requests (every link found) have none of these

    def _check_parser_fields(self) -> None:
        for name in ("callback", "errback"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and _DOTTED.fullmatch(value)):
                raise BadInput(f"{name}: {value!r:.80} is not a dotted function name")
        if not isinstance(self.cb_kwargs, dict) or not all(isinstance(k, str) for k in self.cb_kwargs):
            raise BadInput("cb_kwargs: must be a JSON object")
        statuses = self.handle_status
        if not isinstance(statuses, (list, tuple)) or not all(
                _is_int(s) and 100 <= s <= 599 for s in statuses):
            raise BadInput("handle_status: must be a list of HTTP statuses (100-599)")
        object.__setattr__(self, "handle_status", tuple(statuses))

    @functools.cached_property
    def fingerprint(self) -> str:
        """Identity for the gate (computed once per request)."""
        return fingerprint(self.url, self.method)

    @property
    def extract_links(self) -> bool:
        return not self.meta.get("NotExtract")

    def replace(self, **changes: Any) -> CrawlRequest:
        return dataclasses.replace(self, **changes)

    def followed(self, url: str, *, meta: dict[str, Any], notify: dict[str, Any] | None) -> CrawlRequest:
        """The request for a link found on this request's page, one level deeper in its
        crawl, carrying ``meta`` and ``notify`` (what this request passes on, checked with it):
        equal to ``CrawlRequest(url=url, depth=..., crawl_id=..., meta=meta, notify=notify)``,
        with only the link's URL checked (:class:`InvalidURL`) instead of every field, as a
        page's links are many."""
        child = object.__new__(CrawlRequest)
        child.__dict__.update(_LINK_DEFAULTS, url=validate_url(url), headers={}, cb_kwargs={},
                              depth=self.depth + 1, crawl_id=self.crawl_id, meta=meta, notify=notify)
        return child

    def to_dict(self) -> dict[str, Any]:
        """The message form: fields at their default are left out (smaller broker messages)."""
        values = self.__dict__
        return {name: values[name] for name, default in _REQUEST_DEFAULTS.items()
                if values[name] != default}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CrawlRequest:
        """Build from a message; unknown keys are refused so typos do not pass silently."""
        if not isinstance(data, dict) or "url" not in data:
            raise InvalidURL(f"request: expected an object with a 'url', got {data!r:.80}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise BadInput(f"request: unknown field(s) {', '.join(sorted(map(repr, unknown)))}")
        return cls(**data)

    @classmethod
    def from_seed(cls, seed: str | dict[str, Any], **defaults: Any) -> CrawlRequest:
        """Accept a URL string or a seed message ``{"url", "meta", "method", "render", ...}``.

        ``defaults`` (priority, meta, crawl_id, dont_filter) apply where the seed
        does not say otherwise; a seed's ``meta`` is merged over them.
        """
        if isinstance(seed, str):
            return cls(url=seed, **defaults)
        if not isinstance(seed, dict) or "url" not in seed:
            raise InvalidURL(f"seed: expected a URL or an object with a 'url', got {seed!r:.80}")
        meta = seed.get("meta") or {}
        if not isinstance(meta, dict):
            raise BadInput("meta: must be a JSON object")
        fields = dict(defaults)
        fields["meta"] = {**defaults.get("meta", {}), **meta}
        for key in ("method", "headers", "priority", "crawl_id", "dont_filter", "render", "callback", "errback",
                    "cb_kwargs", "handle_status"):
            if key in seed:
                fields[key] = seed[key]
        return cls(url=seed["url"], **fields)


def callback(spec: Any, what: str = "on_page") -> dict[str, Any]:
    """A callback as messages carry it: a task name, or a Celery signature (its dict form:
    ``task``, ``args``, ``kwargs``, ``options``), checked to be JSON."""
    if isinstance(spec, str):
        spec = {"task": spec}
    if not isinstance(spec, dict) or not isinstance(spec.get("task"), str) or not spec["task"].strip():
        raise BadInput(f"{what}: expected a task name or a Celery signature, got {spec!r:.80}")
    out = {"task": spec["task"].strip(), "args": list(spec.get("args") or ()),
           "kwargs": dict(spec.get("kwargs") or {}), "options": dict(spec.get("options") or {})}
    try:
        json.dumps(out)
    except (TypeError, ValueError):
        raise BadInput(f"{what}: the signature's arguments must be JSON") from None
    return out


def _notify(notify: Any) -> dict[str, Any]:
    """``notify`` checked: the page callback (``on_page``, with ``follow``) and the change
    callback a revisit carries (``on_change``), at least one of them."""
    if not isinstance(notify, dict) or not ({"on_page", "on_change"} & set(notify)):
        raise BadInput("notify: expected {\"on_page\": <callback>, \"follow\": bool} or {\"on_change\": <callback>}")
    out: dict[str, Any] = {name: callback(notify[name], name) for name in ("on_page", "on_change") if name in notify}
    return {**out, "follow": bool(notify.get("follow", False))}


def inherited_notify(parent: CrawlRequest) -> dict[str, Any] | None:
    """What a page found from ``parent`` carries: its callback when it asked to follow."""
    notify = parent.notify
    return notify if notify is not None and notify.get("follow") else None


_REQUEST_DEFAULTS: dict[str, Any] = {
    f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    for f in dataclasses.fields(CrawlRequest)}
#: The immutable defaults a followed link starts from (its dicts are made for each).
_LINK_DEFAULTS: dict[str, Any] = {k: v for k, v in _REQUEST_DEFAULTS.items() if not isinstance(v, dict)}


#: Where a record keeps the JSON it was read from (not a field: never in its dict or JSON).
_KEPT_JSON = "_kept_json"


@dataclass
class PageRecord:
    """What the store keeps for one fetched (or failed) URL, keyed by fingerprint."""

    url: str
    fingerprint: str
    crawl_id: str
    depth: int
    fetched_at: str
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str | None = None
    title: str | None = None
    text: str | None = None
    links: list[str] = field(default_factory=list)
    description: str | None = None
    redirect_to: str | None = None
    method: str = "GET"
    size: int = 0
    truncated: bool = False
    encoding: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: The response body as text (HTML and text types), when the store keeps bodies.
    body: str | None = None
    #: What an archive (WARC) needs, as it crossed the wire; None when not captured.
    #: ``HTTP/1.1 200 OK``.
    status_line: str | None = None
    #: The response headers as received: ``[name, value]`` pairs, case, order and repeats kept.
    raw_headers: list[list[str]] | None = None
    #: The request as sent: ``{"line": "GET /p HTTP/1.1", "headers": [[name, value], ...]}``.
    request: dict[str, Any] | None = None
    #: The body of types kept neither as ``body`` text nor parsed (images, PDFs...), base64.
    body_base64: str | None = None
    #: ``sha1:<base32>`` of the body as received (decompressed): an archive writer that
    #: re-encodes ``body`` text checks it got the served bytes back.
    payload_digest: str | None = None
    #: The proxy the request went through (``http://host:port``, never credentials); None = direct.
    proxy: str | None = None
    #: What the page's parse rule extracted (dicts of JSON values), after the item pipelines.
    items: list[dict[str, Any]] = field(default_factory=list)
    #: The class name of each of ``items`` as yielded (``item`` for a dict); empty when all
    #: were dicts.
    item_types: list[str] = field(default_factory=list)
    #: The rule that parsed the page (``module.function``); None: the default extraction.
    rule: str | None = None
    #: How the page was rendered in a browser (a :class:`~crawler_tasks.core.render.RenderReport`
    #: as a dict); None: not rendered.
    rendered: dict[str, Any] | None = None
    #: The rendered page's DOM, serialized after its scripts ran (what was parsed), when the
    #: store keeps bodies; ``body`` keeps the response as served.
    dom: str | None = None
    #: The signature of the page's text (``core/signature.py``), in a crawl with revisits.
    signature: str | None = None
    #: On a revisit: True (the text changed), False (it did not) or ``"not_modified"`` (a 304).
    changed: bool | str | None = None
    #: On a revisit: when the page was fetched before, and when its text last changed.
    previous_fetched_at: str | None = None
    changed_at: str | None = None
    #: With ``CRAWLER_NEAR_DUPLICATES``: the fingerprint of a stored page this one nearly
    #: duplicates (its text's simhash within ``CRAWLER_NEAR_DUPLICATE_DISTANCE`` bits).
    near_duplicate_of: str | None = None
    #: With ``CRAWLER_NEAR_DUPLICATES``: the stored page whose body this one repeats byte for
    #: byte (same ``payload_digest``): its ``url``, ``fetched_at`` and ``fingerprint``.
    duplicate_of: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict (shallow: its lists and dicts are shared)."""
        out = dict(self.__dict__)
        out.pop(_KEPT_JSON, None)
        return out

    def keep_json(self, data: bytes) -> PageRecord:
        """This record, noting that ``data`` is its JSON (what it was read from): a store
        writes that as it is (:meth:`kept_json`). Only for a record no one changes after."""
        self.__dict__[_KEPT_JSON] = data
        return self

    def kept_json(self) -> bytes | None:
        """The JSON :meth:`keep_json` noted, if any (the record's, as ``codec.dumps`` of
        :meth:`to_dict` gives it)."""
        return self.__dict__.get(_KEPT_JSON)

    @property
    def large(self) -> bool:
        """Whether the record keeps a large body (``body`` or ``body_base64`` over
        :data:`~crawler_tasks.core.memory.LARGE_BODY` characters)."""
        return max(len(self.body or ""), len(self.body_base64 or "")) > LARGE_BODY

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PageRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def change_event(record: PageRecord) -> dict[str, Any]:
    """What a revisit that found ``record``'s page changed tells: the page, when it changed,
    when it was fetched before, and its new signature (small JSON, never the page)."""
    return {"url": record.url, "fingerprint": record.fingerprint, "crawl_id": record.crawl_id,
            "status": record.status, "title": record.title, "changed_at": record.changed_at,
            "previous_fetched_at": record.previous_fetched_at, "signature": record.signature}


def json_bytes(data: dict[str, Any]) -> bytes:
    """``json.dumps(data, ensure_ascii=False).encode()``, without ever holding the JSON
    of a long string value whole as text: it is escaped a slice at a time, straight to
    UTF-8. (A 10 MiB body of NULs is 60 MB of JSON, and one non-Latin-1 character would
    make that text 120 MB.)"""
    out = io.BytesIO()
    out.write(b"{")
    for i, (key, value) in enumerate(data.items()):
        out.write(b", " if i else b"")
        out.write(json.dumps(key, ensure_ascii=False).encode() + b": ")
        if isinstance(value, str) and len(value) > _SLICE:
            out.write(b'"')
            for j in range(0, len(value), _SLICE):
                out.write(encode_basestring(value[j:j + _SLICE])[1:-1].encode())
            out.write(b'"')
        else:
            out.write(json.dumps(value, ensure_ascii=False).encode())
    out.write(b"}")
    return out.getvalue()
