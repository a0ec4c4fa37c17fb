"""One round trip to Redis carrying the commands of several state components.

A page's last step settles its task in its crawl, queues its record for the store and
frees its host's slot (:func:`crawler_tasks.stages.enqueue.complete`): the components
(:class:`~crawler_tasks.state.gate.Gate`, :class:`~crawler_tasks.state.store_queue.StoreQueue`,
:class:`~crawler_tasks.state.hosts.HostLimiter`) each queue their commands onto the
pipeline :class:`RoundTrip` opens, and it goes out once, at the end of the ``with``.

A script joins the round trip by its digest (:func:`queue_script`), not its text: a
Redis that does not know it (restarted, flushed) answers NOSCRIPT for that command
alone, the rest of the round trip is applied, and the script is then run on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis


def is_cluster(client: Any) -> bool:
    """Whether ``client`` talks to a Redis Cluster (no multi-slot transactions)."""
    return type(client).__name__ == "RedisCluster"


class RoundTrip:
    """Opens pipelines on the state Redis; knows whether it is a Redis Cluster."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        #: Whether the state Redis is a Redis Cluster (no multi-slot transactions).
        self.cluster = is_cluster(client)

    @contextmanager
    def __call__(self, *, atomic: bool = False) -> Iterator[Any]:
        """A pipeline to queue commands on, executed when the ``with`` block ends without an
        error (``atomic``: as a MULTI/EXEC transaction, all or nothing)."""
        with self.client.pipeline(transaction=atomic) as pipe:
            fallbacks: dict[int, Callable[[], Any]] = {}
            pipe.crawler_scripts = fallbacks
            yield pipe
            results = pipe.execute(raise_on_error=False)
            for i, result in enumerate(results):
                if isinstance(result, redis.exceptions.NoScriptError) and i in fallbacks:
                    fallbacks[i]()  # not run at all: run it now, on its own
                elif isinstance(result, Exception):
                    raise result


def queue_script(pipe: Any, script: Any, keys: list[Any], args: list[Any]) -> None:
    """Queue redis-py ``script`` on a :class:`RoundTrip` pipeline by its digest (EVALSHA):
    its text is not sent with every call, and Redis is not asked first whether it knows
    it (what a pipeline does for a Script); if it does not, it runs after the round trip."""
    fallbacks = getattr(pipe, "crawler_scripts", None)
    if fallbacks is None:  # not a RoundTrip pipeline: send the text
        pipe.eval(script.script, len(keys), *keys, *args)
        return
    fallbacks[len(pipe.command_stack)] = lambda: script(keys=keys, args=args)
    pipe.evalsha(script.sha, len(keys), *keys, *args)


#: What a master answers for a key it no longer serves (a cluster resharding): the cluster
#: client sends the command again where the key now lives.
ELSEWHERE = (redis.exceptions.AskError, redis.exceptions.TryAgainError)


class NodePipeline:
    """A pipeline (not atomic) on a Redis Cluster that sends each master's commands through
    that master's own plain pipeline, one round trip per master, the answers in order.

    redis-py's cluster pipeline works out each command's keys, slot and node anew and
    costs about as much CPU as the round trip itself; here a command's node is that of its
    first argument, its key (only commands whose first argument is their one key are
    queued this way: ``srem``, ``delete``, ``hdel``, ``smismember``...). A command a master
    answers MOVED or ASK (a resharding) is sent again through the cluster client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., NodePipeline]:
        def queue(*args: Any, **kwargs: Any) -> NodePipeline:
            self.calls.append((name, args, kwargs))
            return self
        return queue

    def __enter__(self) -> NodePipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.calls = []

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        groups: dict[str, tuple[Any, list[int]]] = {}
        for n, (_, args, _) in enumerate(self.calls):
            node = self.client.get_node_from_key(args[0])
            groups.setdefault(node.name, (self.client.get_redis_connection(node), []))[1].append(n)
        results: list[Any] = [None] * len(self.calls)
        for conn, ns in groups.values():
            with conn.pipeline(transaction=False) as pipe:
                for n in ns:
                    name, args, kwargs = self.calls[n]
                    getattr(pipe, name)(*args, **kwargs)
                raw = pipe.execute(raise_on_error=False)
            for n, result in zip(ns, raw):
                if isinstance(result, ELSEWHERE):
                    name, args, kwargs = self.calls[n]
                    result = getattr(self.client, name)(*args, **kwargs)
                elif isinstance(result, Exception) and raise_on_error:
                    raise result
                results[n] = result
        self.calls = []
        return results


def pipeline(client: Any) -> Any:
    """A pipeline (not atomic) on ``client``: a :class:`NodePipeline` on a Redis Cluster,
    for commands whose first argument is their one key."""
    return NodePipeline(client) if is_cluster(client) else client.pipeline(transaction=False)


def run_scripts(client: Any, calls: list[tuple[Any, list[Any], list[Any]]]) -> list[Any]:
    """Run script ``calls`` (a redis-py script, its keys, its args) by digest in one pipeline,
    or on a Redis Cluster in one pipeline per master (its client refuses EVALSHA in a
    pipeline): the answers in order. A call Redis answers NOSCRIPT (restarted, flushed) is
    run again on its own, which loads the script; one a master answers MOVED or ASK, through
    the cluster client, which follows it."""
    groups: dict[str, tuple[Any, list[int]]] = {}
    cluster = is_cluster(client)
    for n, (_, keys, _) in enumerate(calls):
        if cluster:
            node = client.get_node_from_key(keys[0])
            groups.setdefault(node.name, (client.get_redis_connection(node), []))[1].append(n)
        else:
            groups.setdefault("", (client, []))[1].append(n)
    results: list[Any] = [None] * len(calls)
    for conn, ns in groups.values():
        with conn.pipeline(transaction=False) as pipe:
            for n in ns:
                script, keys, args = calls[n]
                pipe.evalsha(script.sha, len(keys), *keys, *args)
            raw = pipe.execute(raise_on_error=False)
        for n, result in zip(ns, raw):
            if isinstance(result, (redis.exceptions.NoScriptError, *ELSEWHERE)):  # run alone: loads it, follows it
                script, keys, args = calls[n]
                result = script(keys=keys, args=args)
            elif isinstance(result, Exception):
                raise result
            results[n] = result
    return results
