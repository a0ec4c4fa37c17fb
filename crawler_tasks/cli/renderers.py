"""The render worker of a local crawl: started once a page to render waits for one."""

from __future__ import annotations

import time
from typing import Any

import redis
from kombu.exceptions import OperationalError

from ..core import routing
from ..core.errors import BadInput, CrawlerError
from ..core.settings import Settings
from .local import Workers

#: Pages one render worker of ``crawler-tasks crawl`` renders at once (one browser).
RENDER_CONCURRENCY = 4


class Renderers:
    """The crawl's render worker: started once a page to render waits for one (at once with
    ``--render``), never otherwise. It must find its browser, or the crawl stops there
    (resumable with ``--crawl-id``)."""

    #: Seconds between two looks at the render queue.
    LOOK_S = 1.0

    def __init__(self, settings: Settings, app: Any, crawl_id: str, say: Any = print,
                 log_path: str | None = None) -> None:
        self.settings, self.app, self.crawl_id, self.say = settings, app, crawl_id, say
        self.log_path = log_path
        self.workers: Workers | None = None
        self._looked = 0.0

    def start(self) -> None:
        from ..net.render import browser_problem

        problem = browser_problem(self.settings)
        if problem:
            raise BadInput(f"pages to render, but {problem}")
        self.workers = Workers(self.settings, name=f"{self.crawl_id}-render@%h", queues=(routing.RENDER_QUEUE,),
                               pool="threads", concurrency=RENDER_CONCURRENCY, log_path=self.log_path).start()
        self.say("starting a render worker (Chromium) for the pages to render")

    def __call__(self) -> None:
        if self.workers is not None:
            if not self.workers.alive():
                raise CrawlerError("the render worker exited before the crawl drained")
            return
        now = time.monotonic()
        if now - self._looked < self.LOOK_S:
            return
        self._looked = now
        from ..broker.queues import queue_depths

        try:
            waiting = queue_depths(self.app, self.settings, (routing.RENDER_QUEUE,))[routing.RENDER_QUEUE]["total"]
        except (redis.RedisError, OperationalError, OSError):  # the broker away a while: the watch says so
            return
        if waiting:
            self.start()

    def stop(self, timeout: float) -> None:
        if self.workers is not None:
            self.workers.stop(timeout=timeout)
