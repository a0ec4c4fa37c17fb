"""The crawler's configuration: :class:`Settings`, read from the environment.

Only :meth:`Settings.from_env` reads the environment. Components take a
:class:`Settings` (or plain values from it), never ``os.environ``. Each setting is
declared once, in :data:`~crawler_tasks.core.setting_specs.SPECS` (its variable,
default, meaning and bounds); this module re-exports that table and its constants.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import SettingsError
from .setting_specs import (
    DEDUP_MODES,
    DEFAULT_BROKER_URL,
    DEFAULT_STORE,
    DOWNLOAD_TIMEOUT,
    EVENT_MODES,
    PIPELINES,
    POOL_CONCURRENCY,
    POOLS,
    RETRY_BACKOFF_MAX,
    SPECS,
    Spec,
)
from .setting_types import _allowlist, _bool, _number
from .shards import CLUSTER_SHARDS

__all__ = ["DEDUP_MODES", "DEFAULT_BROKER_URL", "DEFAULT_STORE", "DOWNLOAD_TIMEOUT", "EVENT_MODES", "PIPELINES",
           "POOLS", "POOL_CONCURRENCY", "POOL_PACKAGES", "RETRY_BACKOFF_MAX", "SPECS", "Settings", "Spec",
           "pool_missing"]

_DEFAULTS: dict[str, Any] = {spec.attr: spec.default for spec in SPECS}


@dataclass(frozen=True)
class Settings:
    """The crawler's configuration; build it with :meth:`from_env` or directly in tests."""

    broker_url: str = _DEFAULTS["broker_url"]
    redis_url: str = _DEFAULTS["redis_url"]
    store: str = _DEFAULTS["store"]
    es_api_key: str = _DEFAULTS["es_api_key"]
    warc_max_bytes: int = _DEFAULTS["warc_max_bytes"]
    store_body: bool = _DEFAULTS["store_body"]
    stats_flush_s: float = _DEFAULTS["stats_flush_s"]
    log_pages: bool = _DEFAULTS["log_pages"]
    log_stats_s: float = _DEFAULTS["log_stats_s"]
    download_timeout: float = _DEFAULTS["download_timeout"]  # None: derived, see __post_init__
    max_depth: int = _DEFAULTS["max_depth"]
    max_retries: int = _DEFAULTS["max_retries"]
    download_maxsize: int = _DEFAULTS["download_maxsize"]
    download_large_bodies: int = _DEFAULTS["download_large_bodies"]
    allowed_domains: tuple[str, ...] = _DEFAULTS["allowed_domains"]
    visibility_timeout: int = _DEFAULTS["visibility_timeout"]
    user_agent: str = _DEFAULTS["user_agent"]
    download_delay: float = _DEFAULTS["download_delay"]
    host_concurrency: int = _DEFAULTS["host_concurrency"]
    host_shards: int = _DEFAULTS["host_shards"]  # None: by the state Redis, see __post_init__
    robotstxt_obey: bool = _DEFAULTS["robotstxt_obey"]
    robotstxt_ttl: float = _DEFAULTS["robotstxt_ttl"]
    autothrottle: bool = _DEFAULTS["autothrottle"]
    autothrottle_target_concurrency: float = _DEFAULTS["autothrottle_target_concurrency"]
    autothrottle_start_delay: float = _DEFAULTS["autothrottle_start_delay"]
    autothrottle_max_delay: float = _DEFAULTS["autothrottle_max_delay"]
    proxies: tuple[str, ...] = dataclasses.field(default=_DEFAULTS["proxies"], repr=False)
    ban_pattern: str = _DEFAULTS["ban_pattern"]
    ban_threshold: int = _DEFAULTS["ban_threshold"]
    proxy_bench_s: float = _DEFAULTS["proxy_bench_s"]
    redirect_max_times: int = _DEFAULTS["redirect_max_times"]
    redirect_priority_adjust: int = _DEFAULTS["redirect_priority_adjust"]
    retry_priority_adjust: int = _DEFAULTS["retry_priority_adjust"]
    retry_backoff: float = _DEFAULTS["retry_backoff"]
    retry_backoff_max: float = _DEFAULTS["retry_backoff_max"]  # None: derived
    store_max_retries: int = _DEFAULTS["store_max_retries"]
    dead_letters_max: int = _DEFAULTS["dead_letters_max"]
    store_batch: int = _DEFAULTS["store_batch"]
    store_batch_bytes: int = _DEFAULTS["store_batch_bytes"]
    store_flush_s: float = _DEFAULTS["store_flush_s"]
    store_lease_s: float = _DEFAULTS["store_lease_s"]
    store_writers: int = _DEFAULTS["store_writers"]
    store_shards: int = _DEFAULTS["store_shards"]  # None: by the state Redis, see __post_init__
    max_links_per_page: int = _DEFAULTS["max_links_per_page"]
    plugins: tuple[str, ...] = _DEFAULTS["plugins"]
    item_pipelines: tuple[str, ...] = _DEFAULTS["item_pipelines"]
    middlewares: tuple[str, ...] = _DEFAULTS["middlewares"]
    error_handler: str = _DEFAULTS["error_handler"]
    result_backend: str = dataclasses.field(default=_DEFAULTS["result_backend"], repr=False)
    max_items_per_page: int = _DEFAULTS["max_items_per_page"]
    max_url_length: int = _DEFAULTS["max_url_length"]
    max_idle_connections: int = _DEFAULTS["max_idle_connections"]
    deny_private_networks: bool = _DEFAULTS["deny_private_networks"]
    private_allowlist: tuple[str, ...] = _DEFAULTS["private_allowlist"]
    render_hosts: tuple[str, ...] = _DEFAULTS["render_hosts"]
    render_browser: str = _DEFAULTS["render_browser"]
    render_wait: str = _DEFAULTS["render_wait"]
    render_timeout_s: float = _DEFAULTS["render_timeout_s"]
    render_block: tuple[str, ...] = _DEFAULTS["render_block"]
    render_max_requests: int = _DEFAULTS["render_max_requests"]
    render_pages_per_browser: int = _DEFAULTS["render_pages_per_browser"]
    render_browser_max_mib: int = _DEFAULTS["render_browser_max_mib"]
    start_urls_key: str = _DEFAULTS["start_urls_key"]
    start_urls_batch: int = _DEFAULTS["start_urls_batch"]
    start_urls_interval: float = _DEFAULTS["start_urls_interval"]
    dedup: str = _DEFAULTS["dedup"]
    gate_shards: int = _DEFAULTS["gate_shards"]  # None: by the state Redis, see __post_init__
    bloom_capacity: int = _DEFAULTS["bloom_capacity"]
    bloom_error_rate: float = _DEFAULTS["bloom_error_rate"]
    recrawl_after: float = _DEFAULTS["recrawl_after"]
    revisit_min_s: float = _DEFAULTS["revisit_min_s"]
    revisit_max_s: float = _DEFAULTS["revisit_max_s"]
    revisit_growth: float = _DEFAULTS["revisit_growth"]
    revisit_tick_s: float = _DEFAULTS["revisit_tick_s"]
    revisit_batch: int = _DEFAULTS["revisit_batch"]
    revisit_store_unchanged: bool = _DEFAULTS["revisit_store_unchanged"]
    near_duplicates: str = _DEFAULTS["near_duplicates"]
    near_duplicate_distance: int = _DEFAULTS["near_duplicate_distance"]
    max_queued: int = _DEFAULTS["max_queued"]
    seed_file: str = _DEFAULTS["seed_file"]
    kafka_seeds: str = _DEFAULTS["kafka_seeds"]
    crawl_refresh_s: float = _DEFAULTS["crawl_refresh_s"]
    known_links: int = _DEFAULTS["known_links"]
    seed_interval: float = _DEFAULTS["seed_interval"]
    sitemap_urls: tuple[str, ...] = _DEFAULTS["sitemap_urls"]
    sitemap_lastmod_max: int = _DEFAULTS["sitemap_lastmod_max"]
    seed_crawl_id: str = _DEFAULTS["seed_crawl_id"]
    text_maxsize: int = _DEFAULTS["text_maxsize"]
    claim_ttl: int = _DEFAULTS["claim_ttl"]
    key_prefix: str = _DEFAULTS["key_prefix"]
    task_events: str = _DEFAULTS["task_events"]
    worker_pool: str = _DEFAULTS["worker_pool"]
    worker_concurrency: int = _DEFAULTS["worker_concurrency"]  # None: by pool, see __post_init__
    worker_max_memory: int = _DEFAULTS["worker_max_memory"]
    malloc_arenas: int = _DEFAULTS["malloc_arenas"]
    pipeline: str = _DEFAULTS["pipeline"]
    state_max_retries: int = _DEFAULTS["state_max_retries"]
    stall_timeout: float = _DEFAULTS["stall_timeout"]
    _derived: tuple[str, ...] = dataclasses.field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        allowlist = self.private_allowlist
        object.__setattr__(self, "private_allowlist",
                           _allowlist(allowlist if isinstance(allowlist, str) else ",".join(allowlist)))
        if not self.redis_url:
            fallback = self.broker_url if self.broker_is_redis else DEFAULT_BROKER_URL
            object.__setattr__(self, "redis_url", fallback)
        self._derive_from_visibility_timeout()
        if self.worker_concurrency is None:  # (an unknown pool is refused below)
            object.__setattr__(self, "worker_concurrency", POOL_CONCURRENCY.get(self.worker_pool, 1))
            object.__setattr__(self, "_derived", (*self._derived, "worker_concurrency"))
        for name in ("host_shards", "gate_shards", "store_shards"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, CLUSTER_SHARDS if self.state_is_cluster else 1)
                object.__setattr__(self, "_derived", (*self._derived, name))
        if not self.start_urls_key:
            object.__setattr__(self, "start_urls_key", f"{self.key_prefix}:start_urls")
            object.__setattr__(self, "_derived", (*self._derived, "start_urls_key"))
        for spec in SPECS:
            problem = spec.problem(getattr(self, spec.attr))
            if problem:
                raise SettingsError(f"{spec.attr}: {problem}")
        if self.broker_is_redis and self.retry_backoff_max >= self.visibility_timeout:
            # A retry waiting on its countdown is an unacked message: past the
            # visibility timeout the broker hands it to another worker as well.
            # Only a value the user set gets here: the default is derived below it.
            raise SettingsError("retry_backoff_max: must be below visibility_timeout "
                                f"({self.retry_backoff_max} >= {self.visibility_timeout}); "
                                "unset CRAWLER_RETRY_BACKOFF_MAX to derive it")

    def _derive_from_visibility_timeout(self) -> None:
        """Defaults that must fit inside the visibility timeout, where the user left them unset.

        A task (its download included) and a retry's countdown must end well
        before a Redis broker hands the message to another worker.
        """
        vt = self.visibility_timeout
        half = vt / 2 if isinstance(vt, (int, float)) and vt > 0 else math.inf  # else refused below
        derived = []
        for name, ceiling in (("download_timeout", DOWNLOAD_TIMEOUT),
                              ("retry_backoff_max", RETRY_BACKOFF_MAX)):
            if getattr(self, name) is None:
                object.__setattr__(self, name, min(ceiling, half))
                derived.append(name)
        object.__setattr__(self, "_derived", tuple(derived))

    @property
    def replay_ttl(self) -> int:
        """Seconds a task's admitted children are remembered for its redelivery."""
        return self.visibility_timeout + int(self.retry_backoff_max) + 600

    @property
    def state_hold_s(self) -> float:
        """Seconds a task waits for a failed state Redis while holding its message: below
        the time after which the broker hands an unacked message to another worker (half
        the visibility timeout on Redis; RabbitMQ's default consumer timeout is 30 min)."""
        return self.visibility_timeout / 2 if self.broker_is_redis else 900.0

    @property
    def redis_max_connections(self) -> int:
        """Connections each process may open to the state Redis (threads share them)."""
        return self.worker_concurrency + 16

    @property
    def idle_connections_per_thread(self) -> int:
        """Hosts whose idle connection each worker thread's session keeps open."""
        return max(1, self.max_idle_connections // self.worker_concurrency)

    @property
    def state_is_cluster(self) -> bool:
        """Whether the state Redis is a Redis Cluster (``redis+cluster://``)."""
        return self.redis_url.startswith(("redis+cluster://", "rediss+cluster://"))

    @property
    def broker_is_redis(self) -> bool:
        return self.broker_url.startswith(("redis://", "rediss://", "redis+socket://"))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read every ``CRAWLER_*`` variable (unset or empty = default); ``overrides`` win."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for spec in SPECS:
            raw = environ.get(spec.env, "").strip()
            if not raw:
                continue
            try:
                values[spec.attr] = spec.parse(raw)
            except ValueError:
                kind = {int: "integer", _number: "number", _bool: "boolean (1/0)"}.get(spec.parse, "value")
                raise SettingsError(f"{spec.env}: {raw!r} is not a valid {kind}") from None
        values.update(overrides)
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes``; defaults that were derived are derived again."""
        rederive: dict[str, Any] = {name: None for name in self._derived if name not in changes}
        return dataclasses.replace(self, **rederive, **changes)

    def to_env(self) -> dict[str, str]:
        """The environment that makes :meth:`from_env` rebuild these settings (for child processes)."""
        env = {}
        for spec in SPECS:
            value = getattr(self, spec.attr)
            if spec.attr in self._derived:
                value = ""  # derived again on the other side
            elif isinstance(value, tuple):
                value = ",".join(value)
            elif isinstance(value, bool):
                value = "1" if value else "0"
            env[spec.env] = str(value)
        return env


#: Pools that need a package of their own, and the extra that installs it.
POOL_PACKAGES = {"gevent": "gevent"}


def pool_missing(pool: str, find: Callable[[str], object] = importlib.util.find_spec) -> str | None:
    """What is missing for worker pool ``pool`` (one line), or None when it can start."""
    package = POOL_PACKAGES.get(pool)
    if package is None or find(package) is not None:
        return None
    return f"CRAWLER_WORKER_POOL={pool} needs {package}, which is not installed: pip install 'crawler-tasks[{package}]'"
