"""Redis and broker connections, checked when they are made."""

from __future__ import annotations

import redis
from kombu import Connection

from .errors import BrokerUnavailable


CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")


def redis_from_url(url: str, *, check: bool = True, max_connections: int | None = None) -> redis.Redis:
    """A Redis client for ``url``; pings it first when ``check`` so a dead server fails early.

    ``redis+cluster://host:port`` (or ``rediss+cluster://``) names any node of a
    Redis Cluster; the client discovers the others.
    """
    options = {"socket_connect_timeout": 3, "health_check_interval": 30}
    if max_connections:
        options["max_connections"] = max_connections
    try:
        if url.startswith(CLUSTER_SCHEMES):
            from redis.cluster import RedisCluster

            client = RedisCluster.from_url(url.replace("+cluster", "", 1), **options)
        else:
            client = redis.Redis.from_url(url, **options)
    except (redis.RedisError, OSError) as exc:
        raise BrokerUnavailable(f"Redis at {safe_url(url)} does not answer: {exc}") from None
    if check:
        try:
            client.ping()
        except (redis.RedisError, OSError) as exc:
            raise BrokerUnavailable(f"Redis at {safe_url(url)} does not answer: {exc}") from None
    return client


def check_broker(url: str, timeout: float = 3.0) -> None:
    """Raise :class:`BrokerUnavailable` unless the broker at ``url`` accepts a connection."""
    try:
        with Connection(url, connect_timeout=timeout) as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:  # kombu raises transport-specific errors
        raise BrokerUnavailable(f"broker at {safe_url(url)} does not answer: {exc}") from None


def safe_url(url: str) -> str:
    """``url`` with any password masked, for messages."""
    from kombu.utils.url import maybe_sanitize_url

    return maybe_sanitize_url(url)
