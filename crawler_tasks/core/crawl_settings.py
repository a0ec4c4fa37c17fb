"""A plugin's own crawl settings, like a Scrapy spider's ``custom_settings``.

A plugin module may define ``custom_settings``, a dict of what its crawls do differently
from the workers' settings::

    custom_settings = {"delay": 0.5, "host_concurrency": 1, "max_depth": 3,
                       "max_pages": 200, "allowed_domains": ["shop.example"],
                       "headers": {"X-Shop-Client": "crawler"}, "revisit": 86400}

Scrapy's names are accepted too (``DOWNLOAD_DELAY``, ``CONCURRENT_REQUESTS_PER_DOMAIN``,
``DEPTH_LIMIT``, ``CLOSESPIDER_PAGECOUNT``, ``DEFAULT_REQUEST_HEADERS``). What a crawl
is given when it starts (``--max-depth``, ``--max-pages``, its seeds' hosts) comes first,
then these, then the workers' settings. The headers stay in the worker's memory: only their
names are ever written to Redis or shown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from .errors import PluginError

#: Scrapy's name for each setting, as a ported spider's ``custom_settings`` holds it.
SCRAPY_NAMES = {
    "DOWNLOAD_DELAY": "delay",
    "CONCURRENT_REQUESTS_PER_DOMAIN": "host_concurrency",
    "DEPTH_LIMIT": "max_depth",
    "CLOSESPIDER_PAGECOUNT": "max_pages",
    "DEFAULT_REQUEST_HEADERS": "headers",
}


@dataclass(frozen=True)
class CrawlSettings:
    """What one plugin's crawls do differently; None (or empty): the workers' own."""

    #: Seconds between two requests to one host, at least (robots.txt may ask for more).
    delay: float | None = None
    #: Requests in flight to one host at once (0: no cap).
    host_concurrency: int | None = None
    #: Domains links may go to, besides the crawl's seed hosts.
    allowed_domains: frozenset[str] = frozenset()
    max_depth: int | None = None
    #: Pages the crawl stores at most (0: no budget).
    max_pages: int | None = None
    #: Headers sent with every request of the crawl (a request's own win).
    headers: tuple[tuple[str, str], ...] = ()
    #: Seconds before a stored page is first due again: the crawl keeps a revisit schedule.
    revisit: float | None = None

    def __bool__(self) -> bool:
        return self != CrawlSettings()

    def over(self, base: CrawlSettings) -> CrawlSettings:
        """These settings laid over ``base``: what is set here wins, domains and headers join."""
        given = {f.name: getattr(self, f.name) for f in fields(self)
                 if getattr(self, f.name) is not None and f.name not in ("allowed_domains", "headers")}
        names = {k.lower() for k, _ in self.headers}
        headers = tuple((k, v) for k, v in base.headers if k.lower() not in names) + self.headers
        return replace(base, allowed_domains=base.allowed_domains | self.allowed_domains,
                       headers=headers, **given)

    def shown(self) -> dict[str, Any]:
        """The settings as ``crawls`` shows them and Redis keeps them: header names only."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)
                               if getattr(self, f.name) is not None
                               and f.name not in ("allowed_domains", "headers")}
        if self.allowed_domains:
            out["allowed_domains"] = sorted(self.allowed_domains)
        if self.headers:
            out["headers"] = [k for k, _ in self.headers]
        return out


def parse_crawl_settings(plugin: str, raw: Any) -> CrawlSettings:
    """``raw`` (a plugin's ``custom_settings``) checked; :class:`PluginError` with one line
    naming the plugin, the setting and what is wrong."""
    if raw is None:
        return CrawlSettings()
    if not isinstance(raw, Mapping):
        raise PluginError(f"{plugin}.custom_settings: a dict is needed, not {type(raw).__name__}")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name = SCRAPY_NAMES.get(key, key) if isinstance(key, str) else ""
        check = _CHECKS.get(name)
        if check is None:
            known = ", ".join(sorted(_CHECKS))
            raise PluginError(f"{plugin}.custom_settings: unknown setting {key!r} (known: {known})")
        try:
            values[name] = check(value)
        except (TypeError, ValueError) as err:
            raise PluginError(f"{plugin}.custom_settings[{key!r}]: {err}") from None
    return CrawlSettings(**values)


def _delay(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"seconds >= 0 are needed, not {value!r}")
    return float(value)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a whole number >= 0 is needed, not {value!r}")
    return value


def _domains(value: Any) -> frozenset[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple, set, frozenset)) or not all(isinstance(d, str) and d for d in items):
        raise ValueError(f"a list of domain names is needed, not {value!r}")
    return frozenset(d.strip().lower().lstrip(".") for d in items)


def _headers(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and k and isinstance(v, str)
                                                 for k, v in value.items()):
        raise ValueError(f"a dict of header names to text values is needed, not {value!r}")
    bad = [k for k, v in value.items() if any(c in k + v for c in "\r\n") or ":" in k]
    if bad:
        raise ValueError(f"header {bad[0]!r} holds a line break or a colon")
    return tuple(value.items())


def _revisit(value: Any) -> float:
    if _delay(value) <= 0:
        raise ValueError(f"seconds > 0 are needed, not {value!r}")
    return float(value)


_CHECKS: dict[str, Callable[[Any], Any]] = {"delay": _delay, "host_concurrency": _count, "allowed_domains": _domains,
           "max_depth": _count, "max_pages": _count, "headers": _headers, "revisit": _revisit}
