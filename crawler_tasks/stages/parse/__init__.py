"""Parse stage: decode an HTML page, extract title, visible text and links, follow them.

* :mod:`~crawler_tasks.stages.parse.page`: the stage itself (a page's record
  filled, its links followed; the split pipeline's ``crawl.parse`` step), and
  the choice of parser by body size;
* :mod:`~crawler_tasks.stages.parse.tree`: small pages, parsed into an lxml tree;
* :mod:`~crawler_tasks.stages.parse.stream`: large pages, read as parser events
  with bounded memory;
* :mod:`~crawler_tasks.stages.parse.links`: links collected within the caps and
  made absolute, and the requests a page may follow;
* :mod:`~crawler_tasks.stages.parse.base`: what both parsers share (the charset,
  the result, the invisible elements, robots ``nofollow``).
"""

from __future__ import annotations

from .base import Parsed, decode_html, detect_encoding
from .links import follow
from .page import TREE_BYTES, parse_claim, parse_html, parse_page
from .stream import FEED

__all__ = ["FEED", "TREE_BYTES", "Parsed", "decode_html", "detect_encoding", "follow", "parse_claim",
           "parse_html", "parse_page"]
