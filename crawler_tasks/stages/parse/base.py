"""What the tree parser and the stream parser share: the page decoded, the result, the rules both apply.

Encoding follows the browsers' order (w3lib): BOM, HTTP header, ``<meta>``,
then detection (charset-normalizer); GB2312/GBK decode as GB18030 and
Shift_JIS as CP932, as browsers do. Both parsers skip a leading XML
declaration, leave out the text of :data:`INVISIBLE` elements, collapse a
title's spaces, and honour a robots ``<meta>`` that says ``nofollow`` or
``none``; both build a :class:`Parsed`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import charset_normalizer
from w3lib.encoding import html_to_unicode

if TYPE_CHECKING:
    from ...core.settings import Settings

#: Elements whose text a reader does not see.
INVISIBLE = frozenset(("script", "style", "noscript", "template", "svg"))
#: A leading XML declaration, which lxml refuses in a str.
XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Caps:
    """The most a parse keeps of one page: characters of visible text, distinct links and
    bytes of a link's URL (0: no cap), and items a rule yields."""

    text_maxsize: int
    max_links: int = 0
    max_url_length: int = 0
    max_items: int = 0

    @classmethod
    def of(cls, settings: Settings) -> Caps:
        """The caps the settings give."""
        return cls(settings.text_maxsize, settings.max_links_per_page, settings.max_url_length,
                   settings.max_items_per_page)


@dataclass
class Parsed:
    title: str | None
    text: str
    links: list[str] = field(default_factory=list)
    links_over_cap: int = 0
    #: Links longer than ``max_url_length`` bytes: counted, not kept.
    links_too_long: int = 0
    nofollow: bool = False
    encoding: str | None = None
    #: The whole document decoded with ``encoding`` (the record's ``body``).
    html: str = ""


def detect_encoding(body: bytes) -> str | None:
    best = charset_normalizer.from_bytes(body[:65536]).best()
    return best.encoding if best else None


def decode_html(body: bytes, content_type: str | None) -> tuple[str, str]:
    """(encoding, text) of an HTML body."""
    encoding, text = html_to_unicode(content_type, body, auto_detect_fun=detect_encoding)
    return encoding, text


def clean_title(text: str) -> str | None:
    """A title's text with its runs of spaces made one; None if nothing is left."""
    return _SPACE.sub(" ", text).strip() or None


def robots_nofollow(name: str | None, content: str | None) -> bool:
    """Whether a ``<meta name content>`` forbids following the page's links."""
    if (name or "").lower() not in ("robots", "googlebot"):
        return False
    directives = {d.strip() for d in (content or "").lower().split(",")}
    return bool(directives & {"nofollow", "none"})
