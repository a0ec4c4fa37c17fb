"""crawler_tasks: a distributed web crawler built on Celery.

``celery -A crawler_tasks worker`` finds :data:`app`; other apps call
:func:`submit` (or ``send_task("crawl.submit", ...)``). Plugin modules
(``CRAWLER_PLUGINS``) program the crawl with :func:`rule`, :class:`Request`,
:class:`Page` and :class:`DropItem`; middlewares (``CRAWLER_MIDDLEWARES``) raise
:class:`DropRequest` or :class:`RetryRequest`.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["app", "submit", "CrawlRequest", "PageRecord", "errors", "rule", "Request", "Failure", "Page", "DropItem",
           "DropRequest", "RetryRequest", "crawl_page",
           "list_crawls", "pause", "resume", "cancel", "purge"]
__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())


def __getattr__(name: str) -> Any:
    # Lazy, so the CLI can choose the broker (env) before the app is built.
    if name == "app":
        from .service.celery_app import default_app

        return default_app()
    if name == "submit":
        from .service.client import submit

        return submit
    if name in ("CrawlRequest", "PageRecord"):
        from .core import models

        return getattr(models, name)
    if name == "rule":
        from .core.program import rule

        return rule
    if name in ("Request", "Failure"):
        from .core import asks

        return getattr(asks, name)
    if name == "Page":
        from .stages.parse.view import Page

        return Page
    if name in ("DropItem", "DropRequest", "RetryRequest"):
        from .core import errors

        return getattr(errors, name)
    if name in ("list_crawls", "pause", "resume", "cancel", "purge"):
        from .service import control

        return getattr(control, name)
    if name == "crawl_page":
        from .service.tasks import crawl_page

        return crawl_page
    if name == "errors":
        from .core import errors

        return errors
    raise AttributeError(f"module 'crawler_tasks' has no attribute {name!r}")
