"""How the value of a setting is read from its environment variable: the parsers of the
settings table (:data:`crawler_tasks.core.setting_specs.SPECS`).

Each takes the variable's text and gives the value, raising ValueError for a value of
the wrong kind or :class:`~crawler_tasks.core.errors.SettingsError` with its own one-line
message.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from .addresses import parse_allowlist
from .errors import BadInput, SettingsError
from .program import parse_ordered, parse_plugins
from .render import wait_of


def _bool(raw: str) -> bool:
    """``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off``, in any case."""
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


def _events(raw: str) -> str:
    """``auto``, or a boolean spelled as :func:`_bool` reads it, as ``on`` / ``off``."""
    value = raw.strip().lower()
    return "auto" if value == "auto" else ("on" if _bool(value) else "off")


def _number(raw: str) -> float:
    """A finite float ('nan' and 'inf' are refused)."""
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(raw)
    return value


def _csv(raw: str) -> tuple[str, ...]:
    """A comma list, lower-cased (host names, resource types)."""
    return tuple(part.strip().lower() for part in raw.split(",") if part.strip())


def _render_wait(raw: str) -> str:
    """A wait condition of a rendered page (checked by :func:`~crawler_tasks.core.render.wait_of`)."""
    try:
        return wait_of(raw)
    except BadInput as exc:
        raise SettingsError(f"CRAWLER_RENDER_WAIT: {exc}") from None


def _proxies(raw: str) -> tuple[str, ...]:
    """A comma list of proxy URLs, or ``@path``: a file of them, one per line (``#`` comments)."""
    if raw.startswith("@"):
        try:
            with open(raw[1:], encoding="utf-8") as f:
                raw = ",".join(line.split("#", 1)[0].strip() for line in f)
        except OSError as exc:
            raise SettingsError(f"CRAWLER_PROXIES: cannot read {raw[1:]!r}: {exc.strerror}") from None
    urls = _list(raw)
    for url in urls:
        scheme, sep, rest = url.partition("://")
        if scheme.lower() not in ("http", "https") or not sep or not rest.strip("/"):
            shown = url.rsplit("@", 1)[-1]  # never echo credentials
            raise SettingsError(f"CRAWLER_PROXIES: {shown!r} is not an http:// or https:// proxy URL")
    return urls


def _allowlist(raw: str) -> tuple[str, ...]:
    """A comma list of host names, addresses and CIDRs, in normal form."""
    try:
        return parse_allowlist(_list(raw))
    except ValueError as exc:
        raise SettingsError(f"CRAWLER_PRIVATE_ALLOWLIST: {str(exc)!r} is not a host name, "
                            "an address or a CIDR") from None


def _pattern(raw: str) -> str:
    """A regular expression (checked here, compiled where it is used)."""
    try:
        re.compile(raw)
    except re.error as exc:
        raise SettingsError(f"CRAWLER_BAN_PATTERN: {raw!r} is not a valid regular expression: {exc}") from None
    return raw


def _plugins(raw: str) -> tuple[str, ...]:
    """A comma list of dotted module names."""
    try:
        return parse_plugins(raw)
    except BadInput as exc:
        raise SettingsError(str(exc)) from None


def _ordered(setting: str) -> Callable[[str], tuple[str, ...]]:
    """A parser of ``dotted.path:priority`` entries, checked here, ordered where they are loaded."""
    def parse(raw: str) -> tuple[str, ...]:
        try:
            return tuple(f"{path}:{prio}" for path, prio in parse_ordered(raw, setting))
        except BadInput as exc:
            raise SettingsError(str(exc)) from None
    return parse


def _list(raw: str) -> tuple[str, ...]:
    """A comma list kept as written (URLs are case-sensitive past the host)."""
    return tuple(part.strip() for part in raw.split(",") if part.strip())

