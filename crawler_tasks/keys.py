"""Every Redis key this package writes, one function per key, under one prefix."""

from __future__ import annotations


class Keys:
    """Builds key names under ``prefix`` (``CRAWLER_KEY_PREFIX``)."""

    def __init__(self, prefix: str = "crawler") -> None:
        self.prefix = prefix

    def seen(self, crawl_id: str) -> str:
        """SET of request fingerprints admitted by the gate for one crawl."""
        return f"{self.prefix}:seen:{crawl_id}"

    def replay(self, task_id: str) -> str:
        """HASH fingerprint -> child task id of the links one task admitted.

        Lets a redelivered task publish its children again under the same ids
        instead of losing them to the gate.
        """
        return f"{self.prefix}:replay:{task_id}"

    def outstanding(self, crawl_id: str) -> str:
        """SET of task ids queued, running or waiting on a retry for one crawl."""
        return f"{self.prefix}:outstanding:{crawl_id}"

    def crawl(self, crawl_id: str) -> str:
        """HASH of one crawl's configuration (max depth, max pages, store)."""
        return f"{self.prefix}:crawl:{crawl_id}"

    def domains(self, crawl_id: str) -> str:
        """SET of domains one crawl may follow links to."""
        return f"{self.prefix}:domains:{crawl_id}"

    def crawls(self) -> str:
        """SET of every crawl id seen."""
        return f"{self.prefix}:crawls"

    def stats(self, crawl_id: str | None = None) -> str:
        """HASH of counters: overall, or for one crawl."""
        return f"{self.prefix}:stats" if crawl_id is None else f"{self.prefix}:stats:{crawl_id}"

    def page(self, task_id: str) -> str:
        """HASH claim check of one fetched page: ``record`` (JSON) and ``body`` (zlib)."""
        return f"{self.prefix}:page:{task_id}"
