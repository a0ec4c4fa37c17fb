"""Queue depth per band, read from the broker."""

from __future__ import annotations

from typing import TYPE_CHECKING

import redis

from ..core import routing
from ..core.settings import Settings
from .lists import BAND_SEP, redis_list

if TYPE_CHECKING:
    from celery import Celery


def queue_depths(app: Celery, settings: Settings,
                 queues: tuple[str, ...] = routing.ALL_QUEUES) -> dict[str, dict[str, int]]:
    """``{queue: {"band N": waiting, ..., "total": waiting}}`` for each of ``queues`` (every
    queue unless told).

    On Redis each band is its own list, so the split is exact. On RabbitMQ a
    queue reports one count; only ``total`` is given.
    """
    if settings.broker_is_redis:
        return _redis_depths(settings.broker_url, queues)
    return _amqp_depths(app, queues)


def waiting_fetches(app: Celery, settings: Settings) -> int:
    """Fetch messages waiting in the broker, plain and to render (not those a worker has taken)."""
    depths = queue_depths(app, settings, routing.BANDED_QUEUES)
    return sum(depth["total"] for depth in depths.values())


#: Where kombu's Redis transport keeps the bindings of the event exchange: a monitor
#: (Flower, ``celery events``) binds its queue there with the routing key ``#``.
EVENT_BINDINGS = "_kombu.binding.celeryev"


def monitor_listening(settings: Settings) -> bool:
    """Whether a monitor's queue is bound to the task events now (Redis broker only).

    A worker's gossip binds ``worker.#``, a monitor ``#``; a monitor killed outright
    leaves its binding behind, so this can say yes for one that is gone.
    """
    client = redis.Redis.from_url(settings.broker_url, socket_timeout=5)
    try:
        members = client.smembers(EVENT_BINDINGS)
    finally:
        client.close()
    seps = (BAND_SEP, "\x06\x16")
    names = (m.decode(errors="replace") if isinstance(m, bytes) else m for m in members)
    return any(name.startswith(tuple(f"#{sep}" for sep in seps)) for name in names)


def _redis_depths(url: str, queues: tuple[str, ...]) -> dict[str, dict[str, int]]:
    client = redis.Redis.from_url(url)
    pipe = client.pipeline(transaction=False)
    for queue in queues:
        for prio in range(routing.MAX_BAND + 1):
            pipe.llen(redis_list(queue, prio))
    counts = iter(pipe.execute())
    out: dict[str, dict[str, int]] = {}
    for queue in queues:
        bands = {f"band {routing.MAX_BAND - prio}": next(counts) for prio in range(routing.MAX_BAND + 1)}
        out[queue] = {**dict(sorted(bands.items(), reverse=True)), "total": sum(bands.values())}
    return out


def _amqp_depths(app: Celery, queues: tuple[str, ...]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in queues:
            try:
                out[queue] = {"total": channel.queue_declare(queue, passive=True).message_count}
            except Exception:  # not declared yet: nothing waits in it
                channel = conn.channel()
                out[queue] = {"total": 0}
    return out
