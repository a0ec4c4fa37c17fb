"""What user code hands back to the crawler: the requests it asks for, and the failures
it is told of.

A :class:`Request` names its callback and errback by dotted name (a function is
turned into its name), so it travels in messages as JSON; :func:`as_child` and
:func:`in_place_of` make it a :class:`~crawler_tasks.core.models.CrawlRequest` of
the page that asked for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urljoin

from .errors import BadInput
from .models import CrawlRequest, inherited_notify

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class Request:
    """A request a rule asks for: it goes through the gate and the priority bands like
    any link found on a page (``dont_filter``: past the gate's seen filter; ``render``:
    rendered in a browser by the ``crawl.render`` workers).

    ``callback`` parses its page in place of the URL rules, called as
    ``callback(page, **cb_kwargs)``; ``errback`` is called with the
    :class:`Failure` when it fails (the download failed for good, or its status is
    4xx/5xx and not in ``handle_status``). Both are module-level functions of a
    plugin, given as the function or its dotted name: they travel by name, never as
    code. ``handle_status``: statuses besides 2xx whose page reaches the callback
    (neither retried nor a failure).
    """

    url: str
    priority: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    method: str = "GET"
    headers: dict[str, str] = field(default_factory=dict)
    dont_filter: bool = False
    render: bool = False
    callback: Callable[..., Any] | str | None = None
    errback: Callable[..., Any] | str | None = None
    cb_kwargs: dict[str, Any] = field(default_factory=dict)
    handle_status: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("callback", "errback"):
            object.__setattr__(self, name, function_name(getattr(self, name), name))
        object.__setattr__(self, "handle_status", tuple(self.handle_status))


def function_name(func: Callable[..., Any] | str | None, what: str = "callback") -> str | None:
    """The dotted name ``func`` travels as (``module.function``);
    :class:`~crawler_tasks.core.errors.BadInput` for one that cannot be found again by
    name (a lambda, a nested function) or a string that is no dotted name."""
    if func is None:
        return None
    if isinstance(func, str):
        name = func.strip()
    elif callable(func) and isinstance(getattr(func, "__qualname__", None), str):
        name = f"{func.__module__}.{func.__qualname__}"
    else:
        raise BadInput(f"{what}: expected a function or its dotted name, got {func!r:.80}")
    if not _DOTTED.fullmatch(name) or "." not in name:
        raise BadInput(f"{what}: {name!r:.80} is not a module-level function: a {what} travels by "
                       f"name, so it must be defined at the top of a plugin module")
    return name


def as_child(wanted: Request, parent: CrawlRequest, *, url: str, depth: int) -> CrawlRequest:
    """``wanted`` as a request of ``parent``'s crawl, at ``url`` (made absolute by the caller)
    and ``depth``; :class:`~crawler_tasks.core.errors.BadInput` (an
    :class:`~crawler_tasks.core.errors.InvalidURL`...) when it cannot be one."""
    return CrawlRequest(url=url, method=wanted.method, headers=dict(wanted.headers), meta=dict(wanted.meta),
                        priority=int(wanted.priority), depth=depth, crawl_id=parent.crawl_id,
                        dont_filter=bool(wanted.dont_filter), notify=inherited_notify(parent),
                        render=bool(wanted.render), callback=function_name(wanted.callback),
                        errback=function_name(wanted.errback, "errback"), cb_kwargs=dict(wanted.cb_kwargs),
                        handle_status=wanted.handle_status)


class Scope(Protocol):
    """The crawl's offsite rule (:class:`~crawler_tasks.core.limits.Limits` has it)."""

    def allows(self, url: str, *, origin: str) -> bool: ...


def in_place_of(wanted: Request, parent: CrawlRequest, scope: Scope) -> CrawlRequest | None:
    """``wanted`` (relative to ``parent``'s URL) as a request at ``parent``'s depth, taking
    its place (a middleware's or the error handler's request); None when the crawl's
    domains do not allow it. :class:`~crawler_tasks.core.errors.BadInput` when it cannot
    be a request."""
    url = urljoin(parent.url, wanted.url)
    if not scope.allows(url, origin=parent.url):
        return None
    return as_child(wanted, parent, url=url, depth=parent.depth)


@dataclass(frozen=True)
class Failure:
    """What an errback and the error handler are told of one failure.

    ``kind``: ``download`` (retries used up, an error not worth a retry, a redirect
    not followed), ``http`` (a 4xx/5xx page its request did not accept), ``middleware``,
    ``rule``, ``callback``, ``pipeline`` or ``store`` (a record its store refused, or
    whose store stayed down); ``reason``: a short stable name (``timeout``, ``http_503``,
    ``http_404``, ``dns``, ``ban_page``, the exception class of user code,
    ``refused``/``failed`` for stores); ``description``: the line the record keeps.
    """

    kind: str
    reason: str
    description: str
    url: str
    crawl_id: str
    depth: int
    request: Request
    status: int | None = None
