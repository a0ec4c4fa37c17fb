"""A fetch's Celery message as kombu's Redis transport keeps it, built in one step.

Celery's ``send_task`` builds a protocol-2 message and kombu wraps it for Redis:
every header Celery knows (most of them null), the task's argument summary
twice (headers and properties), a ``reply_to`` no crawl task answers, and the
body base64-encoded: about 1.1 KB for a request of 60 bytes, stored twice (the
list, then kombu's copy of every message a worker holds), and half a
millisecond of CPU to build. :func:`fetch_message` writes what a worker reads:
the task's name and id, its arguments as plain JSON (kombu reads a body with no
``body_encoding`` as it is, in UTF-8 when no encoding is named), the URL for
Flower and the logs, the tracked header, and the delivery properties kombu's
Redis transport and Celery use (delivery tag, priority, exchange and routing
key). The same worker code runs it: Celery fills what is absent with its
defaults (no retries yet, no time limits, no parent).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kombu.serialization import registry
from kombu.utils import json as kombu_json

from ..core.codec import dumps
from ..core.codec import loads as codec_loads
from ..core.routing import TRACKED_HEADER, fetch_route

#: The embedded options of a task with no callbacks, chain or chord.
_NO_EMBED: Mapping[str, Any] = {}


def shown_crawl(crawl_id: str) -> str:
    """What Flower shows as a crawl task's keyword arguments: its crawl (the request itself
    travels as the one positional argument)."""
    return repr({"crawl": crawl_id})


def fetch_message(request: Mapping[str, Any], task_id: str, *, url: str, priority: int,
                  delivery_tag: str | None = None) -> bytes:
    """The JSON of a ``crawl.fetch`` message (``crawl.render`` when it says ``render``) for
    ``request`` (its dict) as task ``task_id``, tracked, with broker ``priority`` (the Redis
    step, :func:`~crawler_tasks.core.routing.broker_priority`)."""
    task, queue = fetch_route(bool(request.get("render")))
    return task_message(task, [request], {}, task_id, queue=queue, priority=priority, argsrepr=repr([url]),
                        kwargsrepr=shown_crawl(str(request.get("crawl_id", ""))), headers={TRACKED_HEADER: 1},
                        delivery_tag=delivery_tag)


#: What follows a message's delivery tag: :func:`fetch_head` + tag + this is a message.
TAG_TAIL = b'"}}'
_MARK = "-"


def fetch_head(request: Mapping[str, Any], task_id: str, *, url: str, priority: int) -> bytes:
    """The message :func:`fetch_message` writes, up to its delivery tag: a message kept
    waiting in Redis gets its tag when it is sent (``head + tag + TAG_TAIL``), a new one
    each time, as kombu's own publish gives each delivery its own."""
    message = fetch_message(request, task_id, url=url, priority=priority, delivery_tag=_MARK)
    return message[:-len(_MARK) - len(TAG_TAIL)]


def task_message(task: str, args: list[Any], kwargs: Mapping[str, Any], task_id: str, *, queue: str,
                 priority: int = 0, argsrepr: str | None = None, kwargsrepr: str | None = None,
                 headers: Mapping[str, Any] | None = None, delivery_tag: str | None = None) -> bytes:
    """The JSON of a message of ``task`` (any app's, by name) with ``args`` and ``kwargs``
    as task ``task_id`` on ``queue``, as :func:`fetch_message` writes it (the module
    docstring): what ``send_task`` would put on a Redis broker, less what Celery fills in."""
    return dumps({
        "body": dumps([args, kwargs, _NO_EMBED]).decode(),
        "content-type": "application/json",
        "headers": {"task": task, "id": task_id, "argsrepr": repr(args) if argsrepr is None else argsrepr,
                    "kwargsrepr": repr(kwargs) if kwargsrepr is None else kwargsrepr, **(headers or {})},
        "properties": {"correlation_id": task_id, "priority": priority,
                       "delivery_info": {"exchange": "", "routing_key": queue},
                       "delivery_tag": delivery_tag or uuid.uuid4().hex},
    })


_MARKER = ('"__type__"', b'"__type__"')


def loads(data: str | bytes | bytearray | memoryview) -> Any:
    """kombu's JSON decoder (``kombu.utils.json.loads``), through orjson where that gives
    the same value (:func:`~crawler_tasks.core.codec.loads`, kombu's decoder its fallback):
    JSON with no ``"__type__"`` key (kombu's marker of a date, a UUID, a decimal or bytes).
    Every message a worker reads is decoded twice, its envelope and its body, and the
    standard library's decoder with kombu's hook per object cost 1 % of a worker's CPU."""
    if isinstance(data, memoryview):
        data = bytes(data)
    if _MARKER[isinstance(data, (bytes, bytearray))] in data:  # type: ignore[operator]
        return kombu_json.loads(data)
    return codec_loads(data, fallback=kombu_json.loads)

def register_json() -> None:
    """Make :func:`loads` kombu's decoder of ``application/json`` in this process (its
    encoder stays kombu's)."""
    registry.register("json", kombu_json.dumps, loads, content_type="application/json",
                      content_encoding="utf-8")
