"""Seeds: turn URLs or seed messages into gated fetches (``submit()`` calls this module).

A seed is a URL string or an object in the upstream seed format::

    {"url": "https://example.com/", "method": "HEAD",
     "meta": {"url_id": "42", "NotExtract": true}, "_encoding": "utf-8"}

Every seed is validated before any is enqueued, so one bad URL enqueues nothing.
The feeds Beat runs (the Redis start-URL key, a seed file, sitemaps) live in
:mod:`crawler_tasks.stages.feeds` and submit through :func:`submit_requests`.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, cast

from ..core import counters
from ..core.addresses import AddressPolicy
from ..core.errors import BadInput, BlockedSeed
from ..core.models import DEFAULT_CRAWL_ID, CrawlRequest, callback
from ..core.program import parse_plugins
from ..core.render import wants_render
from ..core.settings import Settings
from ..core.timing import now_iso
from ..core.urls import check_length, host_of, without_credentials
from . import enqueue

if TYPE_CHECKING:
    from .deps import SeedDeps

log = logging.getLogger(__name__)


class SeedDefaults(TypedDict, total=False):
    """What every request of a seed call carries unless its seed object says otherwise."""

    #: Higher is sooner (0: normal).
    priority: int
    #: Merged under each seed object's own ``meta``.
    meta: dict[str, Any] | None
    #: The crawl the seeds start or join (default: ``default``).
    crawl_id: str | None
    #: Bypass the gate (recrawl a URL already seen).
    dont_filter: bool
    #: The page callback every request carries (``CrawlRequest.notify``).
    notify: dict[str, Any] | None


class SubmitOptions(TypedDict, total=False):
    """What a seed call may say besides its seeds: see :func:`crawler_tasks.submit`."""

    priority: int
    meta: dict[str, Any] | None
    crawl_id: str | None
    dont_filter: bool
    plugins: Iterable[str] | None
    on_page: Any
    on_page_follow: bool
    on_done: Any
    revisit: float | None
    on_change: Any


def revisit_seconds(value: Any) -> float | None:
    """``revisit=`` checked: None, or seconds over 0 (:class:`BadInput` otherwise)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
        raise BadInput(f"revisit: {value!r:.40} is not a number of seconds over 0")
    return float(value)


def check_options(options: Mapping[str, Any], shape: type = SubmitOptions) -> None:
    """Raise TypeError (as a call with an unknown keyword does) for a key of ``options``
    that the TypedDict ``shape`` does not name."""
    known = shape.__required_keys__ | shape.__optional_keys__  # type: ignore[attr-defined]
    for name in options:
        if name not in known:
            raise TypeError(f"got an unexpected keyword argument {name!r}")


def build_requests(seeds: str | dict[str, Any] | Iterable[str | dict[str, Any]], *,
                   max_url_length: int = Settings.max_url_length,
                   **defaults: Unpack[SeedDefaults]) -> list[CrawlRequest]:
    """Validated requests for ``seeds``; raises :class:`~crawler_tasks.core.errors.BadInput`
    (:class:`~crawler_tasks.core.errors.URLTooLong` for a URL over ``max_url_length`` bytes)."""
    check_options(defaults, SeedDefaults)
    meta = defaults.get("meta")
    if isinstance(seeds, (str, dict)):
        seeds = [seeds]
    elif not isinstance(seeds, Iterable):
        raise BadInput(f"seeds: expected a URL, a seed object or a list of them, got {seeds!r:.80}")
    if meta is not None and not isinstance(meta, dict):
        raise BadInput("meta: must be a JSON object")
    fields = {"priority": defaults.get("priority", 0), "meta": dict(meta or {}),
              "crawl_id": defaults.get("crawl_id") or DEFAULT_CRAWL_ID,
              "dont_filter": defaults.get("dont_filter", False), "notify": defaults.get("notify")}
    requests = []
    for s in seeds:
        req = CrawlRequest.from_seed(s, **fields)
        url = s.get("url") if isinstance(s, dict) else s
        if isinstance(url, str) and without_credentials(url.strip()) != url.strip():
            log.warning("seed %s: its user name and password were dropped (URLs are shown and stored)", req.url)
        check_length(req.url, max_url_length)
        requests.append(req)
    return requests


class CrawlLimits(TypedDict, total=False):
    """What a crawl is started with besides its seeds (see :meth:`Crawls.register`)."""

    max_depth: int | None
    max_pages: int | None
    store: str | None
    plugins: Iterable[str]
    revisit: float | None
    on_change: dict[str, Any] | None


def submit_requests(rt: SeedDeps, requests: list[CrawlRequest], **limits: Unpack[CrawlLimits]) -> int:
    """Register each crawl (seed hosts become its allowed domains; ``plugins``: the plugins
    whose rules and pipelines apply to it, default all; ``revisit``: its revisit schedule's
    first interval), gate and publish.

    Raises :class:`~crawler_tasks.core.errors.BlockedSeed` before anything is enqueued
    when a seed's host is an address the private-network guard refuses, and
    :class:`~crawler_tasks.core.errors.QueueFull` when the broker holds more fetches
    than ``CRAWLER_MAX_QUEUED``.
    """
    check_options(limits, CrawlLimits)
    given = limits.get("plugins") or ()
    plugins = parse_plugins(given if isinstance(given, str) else ",".join(given), "plugins")
    refuse_blocked(requests, rt.addresses)
    enqueue.ensure_room(rt)
    by_crawl: dict[str, list[CrawlRequest]] = defaultdict(list)
    for req in by_host(requests, rt.settings.render_hosts):
        by_crawl[req.crawl_id].append(req)
    accepted = 0
    for crawl_id, reqs in by_crawl.items():
        rt.crawls.register(crawl_id, domains={host_of(r.url) for r in reqs},
                           max_depth=limits.get("max_depth"), max_pages=limits.get("max_pages"),
                           store=limits.get("store"), plugins=plugins, revisit=limits.get("revisit"),
                           on_change=limits.get("on_change"))
        accepted += enqueue.fetches(rt, reqs)
        rt.crawls.running(crawl_id, now_iso())  # after the seeds: never found drained before them
    return accepted


def by_host(requests: list[CrawlRequest], hosts: tuple[str, ...]) -> list[CrawlRequest]:
    """``requests`` with ``render`` set on those of ``CRAWLER_RENDER_HOSTS`` (``hosts``), which
    then go straight to the render workers (a seed a rule renders goes there from a fetch worker)."""
    if not hosts:
        return requests
    return [r if r.render or not wants_render(r.url, asked=False, rule_renders=False, hosts=hosts)
            else r.replace(render=True) for r in requests]


def refuse_blocked(requests: Iterable[CrawlRequest], policy: AddressPolicy) -> None:
    """Raise :class:`~crawler_tasks.core.errors.BlockedSeed` for the first request whose host is a
    literal address ``policy`` refuses (a host name is judged when a worker connects)."""
    for req in requests:
        reason = policy.seed_refusal(req.url)
        if reason is not None:
            raise BlockedSeed(f"seed {req.url} refused: {reason}")


def submit_to(rt: SeedDeps, seeds: Any, *, each: bool = False, **options: Unpack[SubmitOptions]) -> int:
    """:func:`crawler_tasks.submit` on an explicit runtime. ``each`` (the ``crawl.submit``
    task): a bad seed is logged, counted under ``seeds/invalid`` and left out, and the
    others go on; otherwise the first bad seed refuses them all."""
    check_options(options)
    on_page, on_done = options.get("on_page"), options.get("on_done")
    defaults = cast(SeedDefaults, {k: v for k, v in options.items() if k in SeedDefaults.__optional_keys__})
    defaults["notify"] = None if on_page is None else {"on_page": on_page,
                                                       "follow": bool(options.get("on_page_follow"))}
    done = None if on_done is None else callback(on_done, "on_done")  # checked before anything is sent
    if each:
        requests = _good_seeds(rt, seeds, defaults)
    else:
        requests = build_requests(seeds, max_url_length=rt.settings.max_url_length, **defaults)
    revisit = revisit_seconds(options.get("revisit"))
    change = options.get("on_change")
    change = None if change is None else callback(change, "on_change")
    accepted = (submit_requests(rt, requests, plugins=options.get("plugins") or (), revisit=revisit,
                                on_change=change) if requests else 0)
    if done is not None:  # after the seeds: a crawl that drained already calls back at the next look
        for crawl_id in dict.fromkeys(r.crawl_id for r in requests):
            rt.callbacks.await_done(crawl_id, done)
    return accepted


def _good_seeds(rt: SeedDeps, seeds: Any, defaults: SeedDefaults) -> list[CrawlRequest]:
    """The requests of the seeds that are good, judged one by one; each bad one logged, and
    counted under ``seeds/invalid`` of its crawl when the crawl exists (a batch of nothing
    but junk leaves no trace in Redis)."""
    if isinstance(seeds, (str, dict)) or not isinstance(seeds, Iterable):
        seeds = [seeds]
    good: list[CrawlRequest] = []
    bad = 0
    for s in seeds:
        try:
            [req] = build_requests([s], max_url_length=rt.settings.max_url_length, **defaults)
            refuse_blocked([req], rt.addresses)
        except BadInput as exc:
            log.warning("refused a seed: %s (%.200r)", exc, s)
            bad += 1
            continue
        good.append(req)
    crawl_id = defaults.get("crawl_id") or DEFAULT_CRAWL_ID
    if bad and (good or (isinstance(crawl_id, str) and rt.crawls.registered(crawl_id))):
        rt.gate.add_counts(good[0].crawl_id if good else crawl_id, {counters.SEEDS_INVALID: bad})
    return good


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
