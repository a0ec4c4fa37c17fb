"""What a store batch tells the calling app and the user's program: page callbacks
(``on_page``), the crawls found drained and their ``on_done`` callbacks, and the error
handler's word on a record given up."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

import redis

from ..broker.lists import redis_list, wake
from ..broker.messages import task_message
from ..core import routing
from ..core.errors import BrokerUnavailable, QueueFull
from ..core.models import CrawlRequest, change_event
from ..core.store_uris import masked
from ..core.timing import now_iso
from ..state.store_queue import StoreEntry
from . import enqueue, failures

if TYPE_CHECKING:
    from .deps import StoreDeps

log = logging.getLogger(__name__)


def page_summary(entry: StoreEntry) -> dict[str, Any]:
    """What a page callback receives: small JSON, never the page itself."""
    r = entry.record
    return {"url": r.url, "status": r.status, "fingerprint": r.fingerprint, "crawl_id": r.crawl_id,
            "depth": r.depth, "items": len(r.items), "store": masked(entry.store), "description": r.description}


def change_summary(entry: StoreEntry) -> dict[str, Any]:
    """What a change callback receives: the page that changed, when, and its signature."""
    return {**change_event(entry.record), "store": masked(entry.store)}


def call_back(rt: StoreDeps, crawl_id: str, due: dict[str, dict[str, Any]]) -> set[str]:
    """Send the page callbacks ``due`` (token -> callback and payload), each taken from the
    staged ones as it is sent. When the broker is the state Redis, they go out and are
    taken in one transaction: sent once, whenever a worker dies. Otherwise each is taken
    as soon as it is sent: a worker killed part-way leaves only the callbacks it had not
    sent (and at most the one it was sending) to the next delivery of its batch. One the
    broker refuses is logged (its page is stored all the same). Returns the tokens taken."""
    joined = {t: c for t, c in due.items() if _joinable(rt, c["callback"])}
    taken = _call_back_together(rt, crawl_id, joined) if joined else set()
    for token, call in due.items():
        if token in joined:
            continue
        try:
            enqueue.publish_callback(rt, call["callback"], call["page"], f"{token}.page")
        except Exception as exc:  # noqa: BLE001 - a broker error must not undo the batch
            log.error("page callback %s for %s not sent: %s", call["callback"]["task"], call["page"]["url"], exc)
            continue
        rt.callbacks.take(crawl_id, [token])
        taken.add(token)
    return taken


def _call_back_together(rt: StoreDeps, crawl_id: str, due: dict[str, dict[str, Any]]) -> set[str]:
    """Send ``due`` and take them in one transaction on the Redis that is broker and state;
    the tokens taken (none when Redis refused them: logged, as a refused send is)."""
    try:
        with rt.round_trip(atomic=True) as pipe:
            for token, call in due.items():
                _queue_callback(pipe, call["callback"], call["page"], f"{token}.page")
            rt.callbacks.take(crawl_id, list(due), pipe=pipe)
    except redis.RedisError as exc:
        log.error("%s page callbacks of crawl %s not sent: %s", len(due), crawl_id, exc)
        return set()
    return set(due)


def _joinable(rt: StoreDeps, spec: dict[str, Any]) -> bool:
    """Whether a callback of ``spec`` can join a state round trip: the broker is the state
    Redis, and the signature's options name at most its queue."""
    queue = rt.fetch_queue
    return queue is not None and queue.shared and set(spec.get("options", {})) <= {"queue"}


def _queue_callback(pipe: Any, spec: dict[str, Any], payload: dict[str, Any], task_id: str) -> None:
    """Queue on ``pipe`` (a round trip on the Redis that is also the broker) the message
    :func:`~.enqueue.publish_callback` would send (:func:`~crawler_tasks.core.routing.callback_call`)."""
    task, args, kwargs, options = routing.callback_call(spec, payload)
    queue, priority = options["queue"], options["priority"]
    pipe.lpush(redis_list(queue, priority), task_message(task, args, kwargs, task_id, queue=queue, priority=priority))
    wake(pipe, queue)


def note_finished(rt: StoreDeps) -> int:
    """Note the running crawls found drained (their ``finished`` time); how many."""
    when = now_iso()
    running = rt.crawls.running_ids()
    drained = [cid for cid, n in rt.crawls.outstanding_many(running).items() if n == 0]
    return sum(rt.crawls.finished(cid, when) for cid in drained)


def call_back_done(rt: StoreDeps) -> int:
    """Send the ``on_done`` callback of each crawl that has drained (the worker that takes
    it sends it); how many were sent."""
    sent = 0
    waiting = rt.callbacks.waiting_done()
    for crawl_id, left in rt.crawls.outstanding_many(waiting).items():
        if left:
            continue
        spec = rt.callbacks.take_done(crawl_id)
        if spec is None:
            continue  # another worker took it
        payload = {"crawl_id": crawl_id, "stats": rt.stats.read(crawl_id)}
        try:
            enqueue.publish_callback(rt, spec, payload, f"{crawl_id}.done.{uuid.uuid4().hex[:12]}")
            sent += 1
        except Exception as exc:  # noqa: BLE001 - put back: the next look sends it
            rt.callbacks.await_done(crawl_id, spec)
            log.error("on_done callback %s for crawl %s not sent: %s", spec["task"], crawl_id, exc)
    return sent


def tell(rt: StoreDeps, entry: StoreEntry, reason: str, description: str) -> None:
    """The error handler hears of a record given up; its follow-ups go through the gate."""
    if rt.program.error_handler is None:
        return
    record = entry.record
    req = CrawlRequest(url=record.url, method=record.method, meta=record.meta, depth=record.depth,
                       crawl_id=record.crawl_id)
    follow, counts = failures.tell(rt.program, failures.failure_of("store", reason, description, req, record.status),
                                   req, rt.limits(req.crawl_id))
    try:
        if counts:
            rt.gate.add_counts(req.crawl_id, counts)
        if follow:
            enqueue.fetches(rt, follow)
    except (redis.RedisError, QueueFull, BrokerUnavailable) as exc:
        log.error("the error handler's follow-ups of %s were not sent: %s", record.url, exc)
