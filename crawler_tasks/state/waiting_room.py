"""What a fetch waiting for its host is in Redis: an entry of the host's waiting room
(:meth:`~crawler_tasks.state.keys.Keys.host_wait`, kept by :mod:`~crawler_tasks.state.hosts`).

An entry takes one of two forms, both the same bytes for the same fetch (a
redelivered park adds nothing):

- ``task id TAB request JSON`` (:func:`member`), when the broker is not the state
  Redis: the mover publishes the fetch from its request;
- ``task id TAB crawl id TAB band list TAB wake list TAB message head``
  (:func:`carried`), when it is (a :class:`Handover`): the scripts send the message
  themselves, with a delivery tag of its own (``lua/handover.lua``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from ..core.models import CrawlRequest


@dataclass(frozen=True)
class Moved:
    """A waiting fetch the mover took: publish ``request`` as ``task_id``, then :meth:`~crawler_tasks.state.hosts.HostLimiter.moved`."""

    member: str
    task_id: str
    request: CrawlRequest


@dataclass(frozen=True)
class Waiting:
    """A fetch in a host's waiting room: its room's ``host``, its entry, its task and request."""

    host: str
    member: bytes
    task_id: str
    request: dict[str, Any]


class Handoff(NamedTuple):
    """What a fetch needs to go onto the broker from inside a script: its band list, its
    queue's wake list, and its message up to its delivery tag."""

    band: str
    wake: str
    head: bytes


class Handover(Protocol):
    """The broker's side of handing waiting fetches over in Redis (the broker's fetch queue,
    when the broker is this Redis)."""

    #: What closes a message after its delivery tag.
    tail: bytes

    def handoffs(self, fetches: Sequence[tuple[CrawlRequest, str]]) -> list[Handoff]:
        """The :class:`Handoff` of each of ``fetches`` (request, task id)."""


def member(task_id: str, request: CrawlRequest) -> str:
    """The waiting-room entry of a fetch with no handover: its task id and its request's
    JSON, the same text for the same fetch (so a redelivered park does not add it twice)."""
    return f"{task_id}\t{json.dumps(request.to_dict(), sort_keys=True, separators=(',', ':'))}"


def carried(task_id: str, crawl_id: str, handoff: Handoff) -> bytes:
    """The waiting-room entry of a fetch that carries its message (``lua/handover.lua``):
    task id, crawl id, band list, wake list and message head, tab-separated (the same
    bytes for the same fetch: a message's head holds no delivery tag)."""
    return b"\t".join((task_id.encode(), crawl_id.encode(), handoff.band.encode(), handoff.wake.encode(),
                       handoff.head))


_DECODER = json.JSONDecoder()


def read_entry(entry: str) -> tuple[str, str, dict[str, Any]]:
    """The task id, crawl id and request (its dict) of a waiting-room entry of either form.
    A carried message's head is kombu's envelope cut at its delivery tag; its first member,
    ``body``, is the JSON of the task's arguments, the request first
    (:func:`~crawler_tasks.broker.messages.fetch_head`)."""
    task_id, rest = entry.split("\t", 1)
    if rest.startswith("{"):
        request = json.loads(rest)
        return task_id, request.get("crawl_id", ""), request
    crawl_id, _, _, head = rest.split("\t", 3)
    start = head.index(":", head.index('"body"')) + 1
    while head[start].isspace():
        start += 1
    body, _ = _DECODER.raw_decode(head, start)
    return task_id, crawl_id, json.loads(body)[0][0]
