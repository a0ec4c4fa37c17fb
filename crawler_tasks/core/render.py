"""Rendering's rules, pure: which requests a browser renders, when a rendered page is read,
what the page may load, and what its record says of it.

A request is rendered when it says ``render=True`` (a rule's
:class:`~crawler_tasks.core.asks.Request`, a seed object's field), when the rule its URL
matches was registered with ``render=True``, or when its host is one of
``CRAWLER_RENDER_HOSTS``. Such a request is fetched by a ``crawl.render`` task: its
document is downloaded as any page is (politeness, robots.txt, the private-network guard,
the size cap), then handed to a browser, whose every further request goes through the
same guarded downloader or is refused (:func:`verdict`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .errors import BadInput
from .urls import host_of

#: Page events a rendered page may wait for (Playwright's ``wait_until``).
WAIT_EVENTS = ("load", "domcontentloaded", "networkidle")
#: Longest CSS selector accepted as a wait condition.
MAX_SELECTOR = 500
#: Methods a page may send: the crawler never posts anything on a page's behalf.
METHODS = frozenset({"GET", "HEAD"})
#: Request meta key naming a page's own wait condition.
WAIT_META = "render_wait"

FULFIL, BLOCK, REFUSE = "fulfil", "block", "refuse"


def wait_of(raw: str) -> str:
    """A wait condition: one of :data:`WAIT_EVENTS` (any case), or a CSS selector to wait
    for after ``load``; :class:`BadInput` when empty or unprintable."""
    text = str(raw).strip()
    if text.lower() in WAIT_EVENTS:
        return text.lower()
    if not text or len(text) > MAX_SELECTOR or not text.isprintable():
        raise BadInput(f"{text[:80]!r} is not load, domcontentloaded, networkidle or a CSS selector "
                       f"of at most {MAX_SELECTOR} characters")
    return text


def is_selector(wait: str) -> bool:
    """Whether ``wait`` names an element to wait for (not a page event)."""
    return wait not in WAIT_EVENTS


def page_wait(meta: dict[str, Any], default: str) -> str:
    """The wait condition of a page: its request's ``meta["render_wait"]`` when valid, else ``default``."""
    wanted = meta.get(WAIT_META)
    if isinstance(wanted, str):
        try:
            return wait_of(wanted)
        except BadInput:
            return default
    return default


def host_rendered(host: str, hosts: tuple[str, ...]) -> bool:
    """Whether ``host`` (lower case) is one of ``hosts``, or a subdomain of one; ``*`` is every host."""
    for entry in hosts:
        if entry == "*" or host == entry or host.endswith("." + entry):
            return True
    return False


def wants_render(url: str, *, asked: bool, rule_renders: bool, hosts: tuple[str, ...]) -> bool:
    """Whether the page at ``url`` is rendered: its request ``asked``, its rule renders, or
    its host is in ``hosts`` (``CRAWLER_RENDER_HOSTS``)."""
    if asked or rule_renders:
        return True
    return bool(hosts) and host_rendered(host_of(url), hosts)


def verdict(*, method: str, url: str, resource_type: str, made: int, block: tuple[str, ...],
            max_requests: int) -> tuple[str, str]:
    """What becomes of a request a rendered page makes (not its own document), and why:
    ``(FULFIL, "")`` (fetched by the guarded downloader), ``(BLOCK, type)`` (a kind the
    crawl does not load), or ``(REFUSE, reason)``. ``made``: the page's requests so far,
    this one included."""
    if resource_type in block:
        return BLOCK, resource_type
    if urlsplit(url).scheme.lower() not in ("http", "https"):
        return REFUSE, "scheme"
    if method.upper() not in METHODS:
        return REFUSE, "method"
    if made > max_requests:
        return REFUSE, "over_cap"
    return FULFIL, ""


@dataclass
class RenderReport:
    """What a rendered page's record says of its rendering (``PageRecord.rendered``)."""

    wait: str
    #: Whether the wait condition was reached within the time limit.
    settled: bool = True
    #: Requests the page made, its document included.
    requests: int = 0
    #: Requests of blocked kinds (``CRAWLER_RENDER_BLOCK``).
    blocked: int = 0
    #: Requests refused: a private or metadata address, a method other than GET/HEAD, a
    #: scheme other than http(s), past ``CRAWLER_RENDER_MAX_REQUESTS``, navigation away.
    refused: int = 0
    #: Requests that failed (timeouts, refused connections...).
    failed: int = 0
    #: Scripts and stylesheets served from the browser's cache (fetched for an earlier page).
    cached: int = 0
    #: Milliseconds from the start of the page to its DOM read.
    ms: int = 0
    #: Where the page's scripts tried to send the browser (not followed); None: nowhere.
    navigated: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def unsettled(report: RenderReport, timeout: float) -> str:
    """The record's description of a page that did not reach its wait condition, whose DOM
    was read as it stood: the time limit came first, or its scripts navigated away."""
    if report.navigated:
        return f"render: the page's scripts navigated to {report.navigated[:300]} (not followed); the DOM as it stood"
    return f"render: {_waited(report.wait)} not reached within {timeout:g}s; the DOM as it stood"


def stuck(wait: str, timeout: float) -> str:
    """The description of a page whose scripts held the browser past the time limit (no DOM)."""
    return f"render: the page's scripts did not let it reach {_waited(wait)} within {timeout:g}s, nor give its DOM"


def _waited(wait: str) -> str:
    return f"the selector {wait!r}" if is_selector(wait) else f"the {wait} event" if wait != "networkidle" \
        else "network idle"
