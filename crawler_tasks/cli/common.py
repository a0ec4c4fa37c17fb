"""What several commands share: the runtime of a command that talks to running workers, store paths."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..core.settings import Settings
from ..core.store_uris import split_uris
from ..state.connection import check_broker

if TYPE_CHECKING:
    from ..stages.runtime import Runtime

EXIT_BAD_INPUT, EXIT_UNAVAILABLE, EXIT_ERROR, EXIT_INTERRUPTED = 2, 3, 1, 130


def absolute_store(uri: str) -> str:
    """Plain paths (of one URI or a list) made absolute, so workers started elsewhere write
    the same file."""
    return ",".join(u if "://" in u else os.path.abspath(u) for u in split_uris(uri)) or uri


def state_runtime() -> Runtime:
    """This process's runtime, once the broker answers (one line and exit 3 if not)."""
    from ..service.celery_app import create_app  # Celery and the stages: only once they are used
    from ..stages.runtime import current

    settings = Settings.from_env()
    check_broker(settings.broker_url)
    return current(create_app(settings))
