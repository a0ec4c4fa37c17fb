"""Seeds: turn URLs or seed messages into gated fetches. ``submit()`` lives here.

A seed is a URL string or an object in the upstream seed format::

    {"url": "https://example.com/", "method": "HEAD",
     "meta": {"url_id": "42", "NotExtract": true}, "_encoding": "utf-8"}

Every seed is validated before any is enqueued, so one bad URL enqueues nothing.

Other programs may also push seeds onto the Redis key ``CRAWLER_START_URLS_KEY``
(default ``<prefix>:start_urls``; a list, a set or a sorted set; one URL or
JSON seed object per entry, which may name its ``crawl_id``); :func:`feed`
drains it (Beat runs ``crawl.feed`` every ``CRAWLER_START_URLS_INTERVAL``
seconds). Each entry is judged on its own: a malformed one goes to
``<key>:rejected`` with its one-line reason, the rest are gated and enqueued.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from . import enqueue
from .errors import BadInput
from .models import DEFAULT_CRAWL_ID, CrawlRequest
from .runtime import Runtime, current
from .urls import host_of


def build_requests(seeds: str | dict[str, Any] | Iterable[str | dict[str, Any]], *,
                   priority: int = 0, meta: dict[str, Any] | None = None,
                   crawl_id: str | None = None, dont_filter: bool = False) -> list[CrawlRequest]:
    """Validated requests for ``seeds``; raises :class:`~crawler_tasks.errors.BadInput`."""
    if isinstance(seeds, (str, dict)):
        seeds = [seeds]
    elif not isinstance(seeds, Iterable):
        raise BadInput(f"seeds: expected a URL, a seed object or a list of them, got {seeds!r:.80}")
    if meta is not None and not isinstance(meta, dict):
        raise BadInput("meta: must be a JSON object")
    defaults = {"priority": priority, "meta": dict(meta or {}),
                "crawl_id": crawl_id or DEFAULT_CRAWL_ID, "dont_filter": dont_filter}
    return [CrawlRequest.from_seed(s, **defaults) for s in seeds]


def submit_requests(rt: Runtime, requests: list[CrawlRequest], *, max_depth: int | None = None,
                    max_pages: int | None = None, store: str | None = None) -> int:
    """Register each crawl (seed hosts become its allowed domains), gate and publish.

    Raises :class:`~crawler_tasks.errors.QueueFull` first when the broker holds
    more fetches than ``CRAWLER_MAX_QUEUED``.
    """
    enqueue.ensure_room(rt)
    by_crawl: dict[str, list[CrawlRequest]] = defaultdict(list)
    for req in requests:
        by_crawl[req.crawl_id].append(req)
    accepted = 0
    for crawl_id, reqs in by_crawl.items():
        rt.crawls.register(crawl_id, domains={host_of(r.url) for r in reqs},
                           max_depth=max_depth, max_pages=max_pages, store=store)
        accepted += enqueue.fetches(rt, reqs)
    return accepted


def submit_to(rt: Runtime, seeds: Any, **options: Any) -> int:
    """:func:`submit` on an explicit runtime."""
    return submit_requests(rt, build_requests(seeds, **options))


def submit(url_or_urls: str | dict[str, Any] | Iterable[str | dict[str, Any]], *,
           priority: int = 0, meta: dict[str, Any] | None = None,
           crawl_id: str | None = None, dont_filter: bool = False) -> int:
    """Enqueue seeds for crawling; returns how many the gate accepted and enqueued.

    ``priority``: higher is sooner (0 normal). ``dont_filter``: bypass the gate
    (recrawl a URL already seen). Raises
    :class:`~crawler_tasks.errors.InvalidURL` before enqueuing anything when a
    seed is not an http(s) URL.
    """
    from .celery_app import app

    requests = build_requests(url_or_urls, priority=priority, meta=meta,
                              crawl_id=crawl_id, dont_filter=dont_filter)
    return submit_requests(current(app), requests)


#: Rejected start-URL items kept for a user to look at.
REJECTED_KEPT = 1000
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


def feed(rt: Runtime, batch: int | None = None, lock_ttl: int = 60) -> tuple[int, int]:
    """Move up to ``batch`` entries of the start-URL key into the crawl; (enqueued, rejected).

    The key (``CRAWLER_START_URLS_KEY``) may be a list (taken from the head), a
    set or a sorted set (lowest scores first). Entries leave it only after they
    were submitted (at least once: a worker dying half-way makes the next feed
    submit them again, and the gate refuses the repeats). One feeder at a time
    holds the lock.
    """
    key, client = rt.settings.start_urls_key, rt.redis
    batch = batch or rt.settings.start_urls_batch
    token = uuid.uuid4().hex
    if not client.set(f"{key}:lock", token, nx=True, ex=lock_ttl):
        return 0, 0
    try:
        kind = client.type(key).decode()
        if kind not in _TAKE:
            return 0, 0  # missing (nothing pushed yet), or of a type we do not read
        items = _TAKE[kind](client, key, batch)
        accepted, rejected = _feed_items(rt, items)
        with rt.pipeline() as pipe:
            for entry in rejected:
                pipe.lpush(f"{key}:rejected", entry)
            pipe.ltrim(f"{key}:rejected", 0, REJECTED_KEPT - 1)
            _DONE[kind](pipe, key, items)
            pipe.execute()
        return accepted, len(rejected)
    finally:
        client.eval(_RELEASE, 1, f"{key}:lock", token)


_TAKE = {
    "list": lambda client, key, n: client.lrange(key, 0, n - 1),
    "set": lambda client, key, n: client.srandmember(key, n),
    "zset": lambda client, key, n: client.zrange(key, 0, n - 1),
}
_DONE = {
    "list": lambda pipe, key, items: pipe.ltrim(key, len(items), -1),
    "set": lambda pipe, key, items: items and pipe.srem(key, *items),
    "zset": lambda pipe, key, items: items and pipe.zrem(key, *items),
}


def _feed_items(rt: Runtime, items: list[bytes]) -> tuple[int, list[str]]:
    requests, rejected = [], []
    for raw in items:
        text = raw.decode("utf-8", errors="replace").strip()
        try:
            requests.append(_start_url_request(text))
        except BadInput as exc:
            rejected.append(json.dumps({"item": text[:500], "error": str(exc)}, ensure_ascii=False))
    return (submit_requests(rt, requests) if requests else 0), rejected


def _start_url_request(text: str) -> CrawlRequest:
    """The request for one start-URL item; :class:`BadInput` when it is not a usable seed."""
    [request] = build_requests([parse_seed_line(text)])  # an object may name its crawl_id
    return request


def parse_seed_line(line: str) -> str | dict[str, Any]:
    """One line of a seed file or start-URL entry: a JSON seed object (``{...}``) or a URL."""
    if not line.startswith("{"):
        return line
    try:
        seed = json.loads(line)
    except ValueError:
        raise BadInput("not a JSON seed object") from None
    if not isinstance(seed, dict):
        raise BadInput("not a JSON seed object")
    return seed
