"""robots.txt: fetched once per origin for the whole cluster, cached in Redis, parsed by protego.

An origin (``scheme://host:port``) has one HASH (``keys.robots``) with a
``state``:

``rules``        the file answered 2xx: its rules apply for ``CRAWLER_USER_AGENT`` and its
                 ``Crawl-delay`` raises the host's delay; kept ``CRAWLER_ROBOTSTXT_TTL``.
                 ``packed`` holds the lines that bear on a verdict (comments, blank lines,
                 ``Sitemap`` and ``Host`` left out), zlib-compressed, at most
                 :data:`KEPT_BYTES`: lines past what fits are dropped, as lines past
                 :data:`MAX_BYTES` of the file are.
``allow``        it answered 4xx (404, 403...): everything is allowed (RFC 9309 2.3.1.3).
``wait``         it answered 5xx, timed out or the connection failed: the host's fetches wait
                 (``until``, Redis time) and robots.txt is tried again with back-off
                 (RFC 9309 2.3.1.4); after ``CRAWLER_MAX_RETRIES`` more attempts the
                 origin is ``unreachable``. A host the private-network guard refuses is
                 ``unreachable`` at once.
``unreachable``  treated as a complete disallow (RFC 9309 2.3.1.4), for
                 ``CRAWLER_RETRY_BACKOFF_MAX``; then it is fetched again.

One fetch per origin downloads it (a ``SET NX`` lock), through the host
limiter like any request; fetches of the origin that come meanwhile wait for
it. Up to five redirects are followed (RFC 9309 2.3.1.2). Each worker process
keeps parsed files for up to :data:`LOCAL_S` seconds, at most :data:`LOCAL_BYTES`
of them, so a page costs no Redis round trip for its robots check.
"""

from __future__ import annotations

import logging
import re
import time
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from protego import Protego

from ..core import counters
from ..core.classify import host_feedback
from ..core.errors import AddressRefused, FetchError, InvalidURL, TooManyRedirects
from ..core.lru import ByteLRU, text_weight
from ..core.models import CrawlRequest
from ..core.politeness import ALLOW, RobotsVerdict, host_key
from ..core.responses import REDIRECT_STATUSES, Download
from ..core.timing import backoff
from ..state import scripts
from .download import download

if TYPE_CHECKING:
    from collections.abc import Callable

    import redis
    import requests

    from ..core.settings import Settings
    from ..state.hosts import HostLimiter
    from ..state.keys import Keys

log = logging.getLogger(__name__)

#: Seconds a worker process trusts its parsed copy of an origin's robots.txt.
LOCAL_S = 60.0
#: Bytes of robots.txt parsed at most (RFC 9309 2.5: at least 500 KiB).
MAX_BYTES = 512 * 1024
#: Redirect hops followed for robots.txt (RFC 9309 2.3.1.2: at least five).
MAX_HOPS = 5
#: Seconds a fetch waits for another fetch downloading its origin's robots.txt.
LOCK_WAIT_S = 0.25
#: Bytes of one origin's robots.txt kept in Redis at most (its rule lines, compressed:
#: rule lists compress five to ten times, so files of several hundred KiB fit whole).
KEPT_BYTES = 64 * 1024
#: Bytes of parsed robots.txt files one worker process keeps at most.
LOCAL_BYTES = 64 * 1024 * 1024
#: Bytes a parsed file costs per character of its rules (protego's rule objects; measured).
PARSED_FACTOR = 24
#: Lines that apply to the whole site (protego reads them as Sitemap or Host): no verdict
#: depends on them.
_SITE_WIDE = re.compile(r"(?:sitemaps?|site-map|host)\s*:", re.IGNORECASE | re.ASCII)


def rule_lines(text: str) -> str:
    """The lines of a robots.txt that bear on a verdict, as protego reads them: comments,
    blank lines and the site-wide ``Sitemap`` and ``Host`` lines dropped."""
    kept = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not _SITE_WIDE.match(line):
            kept.append(line)
    return "\n".join(kept)


def pack(text: str, limit: int = KEPT_BYTES) -> bytes:
    """:func:`rule_lines` of ``text`` compressed, cut after the last line that fits ``limit`` bytes."""
    lines = rule_lines(text).split("\n")
    packed = zlib.compress("\n".join(lines).encode(), 6)
    if len(packed) <= limit:
        return packed
    fits, over = 0, len(lines)  # fits lines fit, over lines do not
    while over - fits > 1:
        mid = (fits + over) // 2
        if len(zlib.compress("\n".join(lines[:mid]).encode(), 6)) <= limit:
            fits = mid
        else:
            over = mid
    log.warning("robots.txt rules past line %s of %s dropped: over %s bytes compressed",
                fits, len(lines), limit)
    return zlib.compress("\n".join(lines[:fits]).encode(), 6)


def unpack(packed: bytes) -> str:
    """The rule lines :func:`pack` kept."""
    return zlib.decompress(packed).decode()


def robots_url(url: str) -> str:
    """The robots.txt URL of ``url``'s origin (credentials dropped)."""
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.rsplit('@', 1)[-1]}/robots.txt"


def origin_of(url: str) -> str:
    """``scheme://host:port`` of ``url`` (the port always given)."""
    scheme = urlsplit(url).scheme.lower()
    return f"{scheme}://{host_key(url)}"


@dataclass(frozen=True)
class _Known:
    """An origin's robots.txt as one worker process holds it."""

    state: str
    parser: Protego | None
    until: float  # monotonic: drop this copy then
    detail: str = ""


class Robots:
    """The robots.txt check of one worker process (see the module doc)."""

    def __init__(self, client: redis.Redis, keys: Keys, settings: Settings, hosts: HostLimiter,
                 session: Callable[[], requests.Session]) -> None:
        self.redis = client
        self.keys = keys
        self.settings = settings
        self.hosts = hosts
        #: This thread's HTTP session.
        self.session = session
        self._known: ByteLRU[str, _Known] = ByteLRU(LOCAL_BYTES, max_entry=LOCAL_BYTES // 8)
        self._replace = scripts.register(client, "robots_replace.lua")

    def check(self, req: CrawlRequest, task_id: str) -> RobotsVerdict:
        """May ``req`` be fetched now; downloads its origin's robots.txt when nobody has."""
        origin = origin_of(req.url)
        known = self._local(origin)
        if known is None:
            known, fields = self._shared(origin)
            if known is None:
                fetched = self._fetch(origin, req, task_id, fields)
                if isinstance(fetched, RobotsVerdict):
                    return fetched
                known = fetched
        return self._verdict(known, req.url)

    def refused_here(self, url: str) -> bool:
        """Whether this process's own copy of ``url``'s robots.txt refuses it (no round trip:
        False when it holds no copy, or the copy allows it)."""
        known = self._local(origin_of(url))
        return known is not None and not self._verdict(known, url).allowed

    def state_of(self, host: str) -> str:
        """The robots.txt state of ``host`` (``host:port``) for ``stats``: ``rules``, ``allow``,
        ``wait``, ``unreachable``, or ``unknown`` (not fetched, or expired)."""
        with self.redis.pipeline(transaction=False) as pipe:
            for scheme in ("https", "http"):
                pipe.hget(self.keys.robots(f"{scheme}://{host}"), "state")
            states = [s.decode() for s in pipe.execute() if s]
        return states[0] if states else "unknown"

    def _verdict(self, known: _Known, url: str) -> RobotsVerdict:
        ua = self.settings.user_agent
        if known.state == "rules" and known.parser is not None:
            delay = known.parser.crawl_delay(ua)
            if not known.parser.can_fetch(url, ua):
                return RobotsVerdict(False, reason="disallowed by robots.txt", counter=counters.ROBOTS_DISALLOWED)
            return RobotsVerdict(True, crawl_delay=float(delay) if delay else None)
        if known.state == "unreachable":
            return RobotsVerdict(False, reason=f"robots.txt unreachable ({known.detail}): treated as "
                                 "disallowing everything (RFC 9309)", counter=counters.ROBOTS_UNREACHABLE)
        return ALLOW

    def _local(self, origin: str) -> _Known | None:
        known = self._known.get(origin)
        if known is not None and known.until > time.monotonic():
            return known
        return None

    def _remember(self, origin: str, known: _Known, rules: str = "") -> _Known:
        self._known.put(origin, known, text_weight(origin, known.detail) + PARSED_FACTOR * len(rules))
        return known

    def _shared(self, origin: str) -> tuple[_Known | None, dict[str, bytes]]:
        """The cluster's copy from Redis (None when it must be fetched or waited for) and the
        fields it read."""
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.robots(origin))
            pipe.ttl(self.keys.robots(origin))
            raw, ttl = pipe.execute()
        f = {k.decode(): v for k, v in raw.items()}
        state = f.get("state", b"").decode()
        local_s = min(LOCAL_S, max(ttl, 0))
        if state == "rules":
            rules = _stored_rules(f)
            known = _Known(state, Protego.parse(rules), time.monotonic() + local_s)
            return self._remember(origin, known, rules), f
        if state in ("allow", "unreachable"):
            detail = f.get("detail", b"").decode()
            return self._remember(origin, _Known(state, None, time.monotonic() + local_s, detail)), f
        return None, f  # none yet, or "wait": the caller decides whether it is time to try again

    def _fetch(self, origin: str, req: CrawlRequest, task_id: str,
               fields: dict[str, bytes]) -> _Known | RobotsVerdict:
        """Download robots.txt (one fetch per origin at a time), or say how long to wait;
        ``fields``: what :meth:`_shared` read of its state."""
        now = _redis_now(self.redis)
        until = float(fields.get("until") or 0)
        if fields.get("state") == b"wait" and until > now:
            return RobotsVerdict(wait_until=until)
        lock_s = int(self.settings.download_timeout * (MAX_HOPS + 1)) + 10
        if not self.redis.set(self.keys.robots_lock(origin), task_id, nx=True, ex=lock_s):
            return RobotsVerdict(wait_until=now + LOCK_WAIT_S)
        try:
            known, fields = self._shared(origin)  # the lock's last holder may have just written it
            if known is not None:
                return known
            # The fetch's own slot (a slot the mover reserved for it counts), given back after.
            host = host_key(req.url)
            slot = self.hosts.acquire(host, task_id)
            if not slot.go:
                return RobotsVerdict(wait_until=slot.until)
            if slot.wait:  # handed over just before the host's next time
                time.sleep(slot.wait)
            result = None
            try:
                result = self._download(req)
            finally:
                self.hosts.release(host, task_id, host_feedback(result))
            return self._record(origin, result, int(fields.get("attempts") or 0), now)
        finally:
            self.redis.delete(self.keys.robots_lock(origin))

    def _download(self, req: CrawlRequest) -> Download | FetchError:
        """robots.txt of ``origin``, following up to :data:`MAX_HOPS` redirects."""
        s = self.settings
        url = robots_url(req.url)
        for _ in range(MAX_HOPS + 1):
            try:
                probe = CrawlRequest(url=url, crawl_id=req.crawl_id)
                dl = download(self.session(), probe, timeout=s.download_timeout, maxsize=MAX_BYTES)
            except (FetchError, InvalidURL) as exc:
                return exc if isinstance(exc, FetchError) else FetchError(str(exc))
            location = dl.headers.get("location")
            if dl.status not in REDIRECT_STATUSES or not location:
                return dl
            url = urljoin(url, location)
        return TooManyRedirects(f"more than {MAX_HOPS} redirects")

    def _record(self, origin: str, result: Download | FetchError | None, attempts: int,
                now: float) -> _Known | RobotsVerdict:
        """Keep what the download gave in Redis for the cluster and in this process."""
        s, key = self.settings, self.keys.robots(origin)
        rules = ""
        if isinstance(result, Download) and 200 <= result.status < 300:
            packed = pack(result.body.decode("utf-8", "replace"))
            rules = unpack(packed)  # what every other process will read
            fields = {"state": "rules", "packed": packed, "status": result.status}
            ttl = s.robotstxt_ttl
        elif isinstance(result, Download) and 300 <= result.status < 500 and result.status != 429:
            fields, ttl = {"state": "allow", "status": result.status}, s.robotstxt_ttl
        elif isinstance(result, AddressRefused):
            # The guard refuses the host: asking again cannot help, and its pages are refused too.
            fields = {"state": "unreachable", "detail": result.description}
            ttl = s.retry_backoff_max
        else:
            detail = (f"HTTP {result.status}" if isinstance(result, Download)
                      else getattr(result, "description", "no answer"))
            attempts += 1
            if attempts > s.max_retries:
                log.warning("robots.txt of %s unreachable after %s attempts: %s", origin, attempts, detail)
                fields = {"state": "unreachable", "detail": f"{detail}, {attempts} attempts"}
                ttl = s.retry_backoff_max
            else:
                wait = backoff(s, attempts - 1)
                log.info("robots.txt of %s: %s, the host waits %.1fs", origin, detail, wait)
                self._store(key, {"state": "wait", "until": now + wait, "attempts": attempts,
                                  "detail": detail}, s.robotstxt_ttl)
                return RobotsVerdict(wait_until=now + wait)
        self._store(key, fields, ttl)
        parser = Protego.parse(rules) if fields["state"] == "rules" else None
        return self._remember(origin, _Known(str(fields["state"]), parser,
                                             time.monotonic() + min(LOCAL_S, ttl), str(fields.get("detail", ""))),
                              rules)

    def _store(self, key: str, fields: dict[str, object], ttl: float) -> None:
        """Replace an origin's robots.txt state in Redis, kept ``ttl`` seconds (one script:
        atomic on a Redis Cluster with every redis-py, unlike a cluster MULTI)."""
        pairs = [str(v) if not isinstance(v, (bytes, str)) else v for kv in fields.items() for v in kv]
        self._replace(keys=[key], args=[max(1, int(ttl)), *pairs])


def _stored_rules(fields: dict[str, bytes]) -> str:
    """The rule lines of a ``rules`` state (``body``: the whole file, as older versions kept it)."""
    if "packed" in fields:
        return unpack(fields["packed"])
    return fields.get("body", b"").decode("utf-8", "replace")


def _redis_now(client: redis.Redis) -> float:
    seconds, micros = client.time()
    return seconds + micros / 1e6


