"""Publishing: the only code that sends crawl messages, always with route and priority.

Seeds go through :func:`fetches`; a task ends through :func:`complete`, which
gates its children, counts the task once, publishes what was admitted and only
then lets the task leave its crawl's outstanding set. On a Redis broker a task's
children are written straight onto the bands (:mod:`crawler_tasks.broker.fetch_queue`);
everything else goes through Celery.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import redis
from kombu.exceptions import OperationalError

from ..broker.messages import shown_crawl
from ..broker.queues import waiting_fetches
from ..core import counters, routing
from ..core.errors import BrokerUnavailable, QueueFull
from ..core.models import CrawlRequest, PageRecord
from ..state.connection import safe_url
from ..state.gate import Candidate, Verdict
from ..state.store_queue import StoreEntry

if TYPE_CHECKING:
    from ..broker.fetch_queue import FetchQueue
    from ..core.limits import Limits
    from .deps import EnqueueDeps, MoverDeps

log = logging.getLogger(__name__)


def ensure_room(rt: EnqueueDeps) -> None:
    """Raise :class:`QueueFull` while more fetches wait than ``CRAWLER_MAX_QUEUED`` (0 = no cap)."""
    cap = rt.settings.max_queued
    if not cap:
        return
    waiting = waiting_fetches(rt.app, rt.settings)
    if waiting > cap:
        raise QueueFull(f"{waiting} fetches wait in the broker, more than CRAWLER_MAX_QUEUED={cap}; "
                        "try again when the workers have caught up")


def fetches(rt: EnqueueDeps, requests: Sequence[CrawlRequest]) -> int:
    """Gate seed ``requests`` (all of one crawl) in one round trip and publish the admitted ones.

    Returns how many were published. If publishing fails part-way, what was not
    published is not marked seen (an exact gate forgets it), or, as a Bloom gate
    cannot forget, it is kept in the crawl's ``unpublished`` list and published
    by the crawl's next seed call; :class:`BrokerUnavailable` says so either way.
    """
    if not requests:
        return 0
    crawl_id = requests[0].crawl_id
    requests, repeats = _unique(requests)
    taken = _take_unpublished(rt, crawl_id)
    requests = taken + requests
    candidates = rt.gate.candidates(requests)
    try:
        call = rt.seed_calls.begin(crawl_id, [(c.task_id, r) for c, r in zip(candidates, requests)])
    except Exception:
        _keep(rt, crawl_id, taken)
        raise
    try:
        return _admit_and_publish(rt, crawl_id, requests, candidates, taken, repeats)
    finally:  # published, or handled here; only a call killed half-way stays journaled
        rt.seed_calls.end(call)


def _admit_and_publish(rt: EnqueueDeps, crawl_id: str, requests: list[CrawlRequest],
                       candidates: list[Candidate], taken: list[CrawlRequest], repeats: int) -> int:
    try:
        task_ids = rt.gate.admit(crawl_id, candidates, max_pages=rt.limits(crawl_id).max_pages,
                                 counts={counters.DUPLICATES: repeats})
    except Exception:
        _keep(rt, crawl_id, taken)
        raise
    admitted = [(r, c, t) for r, c, t in zip(requests, candidates, task_ids) if t is not None]
    step = SEND_CHUNK if rt.fetch_queue is not None else 1  # a Redis broker takes a chunk a round trip
    for i in range(0, len(admitted), step):
        try:
            _send(rt, [(request, task_id) for request, _, task_id in admitted[i:i + step]])
        except Exception as exc:
            _unpublished(rt, crawl_id, admitted[i:], taken=taken)
            if isinstance(exc, OperationalError):
                raise BrokerUnavailable(f"broker at {safe_url(rt.settings.broker_url)} did not take "
                                        f"the seeds ({i} of {len(admitted)} enqueued): {exc}") from None
            raise
    return len(admitted)


def recover_seed_calls(rt: EnqueueDeps) -> int:
    """Publish again the seeds of seed calls that died between the gate and the broker
    (:class:`~crawler_tasks.state.unpublished.SeedCalls`): those still outstanding. How many."""
    total = 0
    for crawl_id, seeds in rt.seed_calls.take_dead():
        pending = rt.gate.pending(crawl_id, [tid for tid, _ in seeds])
        sent = 0
        left = [seed for seed, still in zip(seeds, pending) if still]
        for i, (task_id, request) in enumerate(left):
            try:
                publish_fetch(rt, request, task_id)
            except Exception:
                rt.seed_calls.begin(crawl_id, left[i:])  # the rest, for a later look
                raise
            sent += 1
        if sent:
            log.warning("published %s seed(s) of crawl %s again: the call that gated them died before "
                        "publishing them", sent, crawl_id)
        total += sent
    return total


#: Seeds sent to a Redis broker in one round trip, and unpublished seeds taken back per seed call.
SEND_CHUNK = UNPUBLISHED_BATCH = 500


def _take_unpublished(rt: EnqueueDeps, crawl_id: str) -> list[CrawlRequest]:
    """Seeds a Bloom gate admitted earlier but the broker did not take (removed as taken)."""
    if rt.gate.seen.can_forget:
        return []
    return rt.unpublished.take(crawl_id, UNPUBLISHED_BATCH)


def _unpublished(rt: EnqueueDeps, crawl_id: str, rest: Sequence[tuple[CrawlRequest, Candidate, str]],
                 taken: Sequence[CrawlRequest]) -> None:
    """Undo the admissions of ``rest``; keep what the gate cannot forget for the next seed call
    (kept seeds bypass the gate when taken back: they passed it already)."""
    forgot = rt.gate.forget(crawl_id, [c.fingerprint for _, c, _ in rest if not c.dont_filter],
                            [t for _, _, t in rest])
    again = {id(r) for r in taken}
    _keep(rt, crawl_id, [r for r, c, _ in rest if id(r) in again or (not forgot and not c.dont_filter)])


def _keep(rt: EnqueueDeps, crawl_id: str, requests: Sequence[CrawlRequest]) -> None:
    """Put ``requests`` (back) on the crawl's unpublished list, to bypass the gate when taken."""
    rt.unpublished.keep(crawl_id, [r.replace(dont_filter=True) for r in requests])


@dataclass(frozen=True)
class TaskEnd:
    """How a task ends: what it found, counted and kept.

    ``children`` go through the gate; ``counts`` are counted once. ``record`` goes to
    the store queue; its token (:func:`store_token`) stays outstanding in the crawl
    until a batch writes it, and ``counts`` (but duplicates, which the gate counts)
    ride with it, added to the crawl's when the token leaves. ``stage``
    (``crawl.parse``) is the split pipeline's next step for the page ``claim_id``
    (default: the task's own id).
    """

    children: Sequence[CrawlRequest] = ()
    counts: Mapping[str, int] = field(default_factory=dict)
    record: PageRecord | None = None
    stage: str | None = None
    claim_id: str | None = None
    #: The requests of links kept back as known to the gate, made only for a replay.
    kept_back: Callable[[], Sequence[CrawlRequest]] | None = None


def complete(rt: EnqueueDeps, req: CrawlRequest, task_id: str, end: TaskEnd, *,
             last: Callable[[Any], None] | None = None, limits: Limits | None = None) -> bool:
    """End task ``task_id`` as ``end`` says: gate its children, count its counts once,
    publish, queue its record, leave the crawl.

    The admitted children go to
    the broker in that last round trip when the broker is the state Redis
    (:class:`~crawler_tasks.broker.fetch_queue.FetchQueue`), in one of their own before
    it otherwise. ``last`` adds more commands (the host slot's release) to the
    final round trip; it is not called on a Redis Cluster or for a late duplicate.
    Returns False when the task had already been accounted for (a late duplicate
    delivery): nothing is published then. ``limits``: the crawl's, when the caller
    resolved them (looked up here otherwise).
    """
    crawl_id, counts, record, stage = req.crawl_id, end.counts, end.record, end.stage
    claim_id = end.claim_id
    if limits is None:
        limits = rt.limits(crawl_id)
    children, repeats = _unique(end.children)
    page_counts: dict[str, int] | None = None
    if record is not None:  # the page's counters ride with its record, the gate's stay here
        page_counts = {k: v for k, v in counts.items() if v and k != counters.DUPLICATES}
        counts = {k: v for k, v in counts.items() if k == counters.DUPLICATES}
    counts = {**counts, counters.DUPLICATES: counts.get(counters.DUPLICATES, 0) + repeats}
    candidates = rt.gate.candidates(children)
    if stage is not None:
        stage_id = stage_task_id(claim_id or task_id, stage)
        candidates.append(Candidate(f"stage:{stage_id}", stage_id, dont_filter=True, stage=True))
    token = store_token(task_id)
    if record is not None:
        candidates.append(Candidate(f"stage:{token}", token, dont_filter=True, stage=True))
    done = rt.gate.complete(crawl_id, candidates, task_id=task_id, counts=counts,
                            max_pages=limits.max_pages)
    if done.verdict is Verdict.STALE:
        return False
    if done.verdict is Verdict.REPLAY and end.kept_back is not None:  # every first child comes back
        end = replace(end, children=[*end.children, *end.kept_back()], kept_back=None)
        return complete(rt, req, task_id, end, last=last, limits=limits)
    admitted = [(c, i) for c, i in zip(children, done.task_ids) if i]
    joined = _shared(rt) is not None
    if not joined:  # the children go out on their own, before the task leaves its crawl
        _send_children(rt, req, task_id, admitted)
    queued = admitted if joined else []  # they join the last round trip
    if stage is not None:
        publish_stage(rt, stage, claim_id or task_id, req)
    entry = None if record is None else StoreEntry(token, crawl_id, limits.store, record, notify=req.notify,
                                                   counts=page_counts)
    if rt.round_trip.cluster:  # the queue and the crawl live in different slots: push, then finish
        if entry is not None:
            rt.store_queue.push([entry])
        rt.gate.finish(crawl_id, task_id, shards=done.shards, limited=limits.max_pages > 0)
        return _known(rt, crawl_id, children)
    if entry is None and last is None and not queued:
        rt.gate.finish(crawl_id, task_id, shards=done.shards, limited=limits.max_pages > 0)
        return _known(rt, crawl_id, children)
    # One round trip, all or nothing: a push Redis refuses (out of memory) must not
    # let the task leave the crawl, or its children or its record's token would wait forever.
    with rt.round_trip(atomic=entry is not None or bool(queued)) as pipe:
        if queued:
            _queue_children(rt, pipe, queued)
        if entry is not None:
            rt.store_queue.push([entry], pipe)
        rt.gate.finish(crawl_id, task_id, pipe, done.shards, limits.max_pages > 0)
        if last is not None:
            last(pipe)
    return _known(rt, crawl_id, children)


def _known(rt: EnqueueDeps, crawl_id: str, children: Sequence[CrawlRequest]) -> bool:
    """Note the links the gate answered for, the task's end written (True)."""
    rt.known_links.add(crawl_id, [c.url for c in children if not c.dont_filter and c.method == "GET"])
    return True


def _shared(rt: EnqueueDeps) -> FetchQueue | None:
    """The fetch queue when the broker is the state Redis: pushes join the state's round trips."""
    return rt.fetch_queue if rt.fetch_queue is not None and rt.fetch_queue.shared else None


def _queue_children(rt: EnqueueDeps, pipe: Any, children: Sequence[tuple[CrawlRequest, str]]) -> None:
    """Queue the admitted ``children`` on the page's last round trip (the broker is the
    state Redis): onto their bands, or, when politeness may hold a fetch back, each to the
    broker or its host's waiting room, whichever its host allows now."""
    queue = _shared(rt)
    assert queue is not None
    if not rt.hosts.holds:
        queue.queue(pipe, children)
        return
    if rt.settings.robotstxt_obey:
        # What robots.txt refuses goes straight to the broker, to be skipped there: it never
        # waits in its host's room, where each one would hold the host's next fetch back.
        refused: list[tuple[CrawlRequest, str]] = []
        kept: list[tuple[CrawlRequest, str]] = []
        for child in children:
            (refused if rt.robots.refused_here(child[0].url) else kept).append(child)
        if refused:
            queue.queue(pipe, refused)
        children = kept
    if children:
        rt.hosts.route(pipe, children)


def publish_moved(rt: MoverDeps, fetches: Sequence[tuple[CrawlRequest, str]],
                  members: Sequence[tuple[str, str]]) -> None:
    """Publish fetches the host mover took (request, task id), then forget them in the
    waiting room (``members``: moving entry, crawl id): in one transaction when the broker
    is the state Redis."""
    queue = _shared(rt)
    if queue is not None:
        with rt.round_trip(atomic=True) as pipe:
            queue.queue(pipe, fetches)
            rt.hosts.moved(members, pipe)
        return
    _send(rt, fetches)
    rt.hosts.moved(members)


def _send_children(rt: EnqueueDeps, req: CrawlRequest, task_id: str,
                   children: Sequence[tuple[CrawlRequest, str]]) -> None:
    """Publish the admitted ``children`` now (see :func:`_send`); through Celery, a child
    that fails for another reason than the broker ends the task here."""
    if rt.fetch_queue is None:
        _publish_children(rt, req, task_id, children)
    else:
        _send(rt, children)


def _send(rt: EnqueueDeps, fetches: Sequence[tuple[CrawlRequest, str]]) -> None:
    """Publish ``fetches`` (request, task id) now: in one round trip to a Redis broker, else one
    message each through Celery. A broker that refuses raises OperationalError (the message goes back)."""
    if rt.fetch_queue is None:
        for request, task_id in fetches:
            publish_fetch(rt, request, task_id)
        return
    try:
        rt.fetch_queue.push(fetches)
    except redis.RedisError as exc:
        raise OperationalError(f"the broker Redis did not take {len(fetches)} fetches: {exc}") from exc


def _publish_children(rt: EnqueueDeps, req: CrawlRequest, task_id: str,
                      children: Sequence[tuple[CrawlRequest, str]]) -> None:
    """Publish the admitted ``children``. A broker that refuses puts the task's message back
    (its redelivery publishes them again, see the gate's replay); any other error ends
    the task here, with the children not yet published released from the crawl."""
    for i, (child, child_id) in enumerate(children):
        try:
            publish_fetch(rt, child, child_id)
        except OperationalError:
            raise
        except Exception as exc:
            name = type(exc).__name__
            rt.gate.abandon(req.crawl_id, task_id, f"{name}: {exc} ({req.url})",
                            {counters.ERRORS: 1, counters.error(name): 1}, [i for _, i in children[i:]])
            raise


def store_token(task_id: str) -> str:
    """The id under which the record of task ``task_id`` is outstanding until it is stored."""
    return f"{task_id}.write"


def _unique(requests: Sequence[CrawlRequest]) -> tuple[list[CrawlRequest], int]:
    """``requests`` without repeated fingerprints (first one kept), and how many repeats went."""
    seen: set[str] = set()
    out = []
    for r in requests:
        if r.fingerprint not in seen:
            seen.add(r.fingerprint)
            out.append(r)
    return out, len(requests) - len(out)


_TRACKED = {routing.TRACKED_HEADER: 1}


def publish_fetch(rt: EnqueueDeps, request: CrawlRequest, task_id: str, *, countdown: float = 0) -> None:
    """Send one fetch in the band of its priority, on ``crawl.render`` when it is to be
    rendered (the caller has tracked ``task_id``)."""
    task, queue = routing.fetch_route(request.render)
    rt.app.send_task(
        task, args=[request.to_dict()], task_id=task_id, countdown=countdown or None, queue=queue,
        argsrepr=_shown(request), kwargsrepr=shown_crawl(request.crawl_id), headers=_TRACKED,
        priority=routing.broker_priority(request.priority, redis=rt.settings.broker_is_redis),
    )


def publish_callback(rt: EnqueueDeps, spec: dict[str, Any], payload: dict[str, Any], task_id: str) -> None:
    """Send a callback into the calling app as :func:`~crawler_tasks.core.routing.callback_call`
    says: its task with ``payload`` first, on ``crawl.callbacks`` unless it names a queue."""
    task, args, kwargs, options = routing.callback_call(spec, payload)
    rt.app.send_task(task, args=args, kwargs=kwargs, task_id=task_id, **options)


def publish_writer(rt: EnqueueDeps, writer: str) -> None:
    """Send a store task for ``writer`` (its id is the task's, and the consumer's in the store
    queue), ahead of the fetches of a worker that serves both."""
    rt.app.send_task(
        routing.STORE_BATCH_TASK, args=[writer], task_id=writer, **routing.ROUTES[routing.STORE_BATCH_TASK],
        priority=routing.pipeline_priority(redis=rt.settings.broker_is_redis))


def _shown(request: CrawlRequest, *before: str) -> str:
    """What Flower and the logs show as the task's arguments: the URL, not the whole request.

    Celery would otherwise put a repr of every argument into each message's headers.
    """
    return repr([*before, request.url])


def stage_task_id(claim_id: str, task_name: str) -> str:
    """Deterministic id of the parse task of one fetch, so a redelivery reuses it."""
    return f"{claim_id}.{task_name.rsplit('.', 1)[-1]}"


def publish_stage(rt: EnqueueDeps, task_name: str, claim_id: str, request: CrawlRequest) -> None:
    """Send the parse or store step of the page ``claim_id`` (tracked by the caller)."""
    rt.app.send_task(
        task_name, args=[claim_id, request.to_dict()], task_id=stage_task_id(claim_id, task_name),
        **routing.ROUTES[task_name], argsrepr=_shown(request, claim_id), kwargsrepr=shown_crawl(request.crawl_id),
        priority=routing.pipeline_priority(redis=rt.settings.broker_is_redis),
    )
