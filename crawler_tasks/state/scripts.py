"""The Lua scripts this package runs on Redis, read from the ``.lua`` files in ``lua/``.

Each script is a file shipped with the package; its header comment lists its
``KEYS`` and ``ARGV`` (each with its meaning) and what it returns. A fragment
several scripts share (``now.lua``: Redis' clock; ``recent.lua``, ``limits.lua``, ``room.lua``
of the host limiter; ``keys.lua``: key names from :func:`~.keys.template`; ``consts.lua``,
generated from :mod:`crawler_tasks.core.politeness` by :func:`host_constants`) is
written once and pulled in by a line of its own::

    -- include: now.lua

An include may name a slot, ``-- include: {seen}``, that the caller fills in
(the gate's script takes the seen filter's fragment there). What Redis gets is
the file with its includes resolved and its comment lines left out (a header
costs nothing on the wire, which matters for a script sent with ``EVAL`` in a
pipeline). A file is read once per process; :func:`register` wraps the text in
redis-py's :class:`~redis.commands.core.Script`, which runs it by ``EVALSHA``
and loads it on the first ``NOSCRIPT``.

Scripts must not use Lua long strings or block comments (``[[ ]]``,
``--[[ ]]``): lines are read one by one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

import redis

from ..core import politeness
from .round_trip import ELSEWHERE, is_cluster

_INCLUDE = re.compile(r"^--\s*include:\s*(\S+)\s*$")
_COMMENT = re.compile(r"^\s*--")


@functools.cache
def _read(name: str) -> str:
    if name in GENERATED:
        return GENERATED[name]()
    return resources.files(__package__).joinpath("lua").joinpath(name).read_text(encoding="utf-8")


def host_constants() -> str:
    """``consts.lua``: the host limiter's constants and answer kinds, as
    :mod:`crawler_tasks.core.politeness` (their Python twin) names them."""
    lines = ["-- Fragment, generated from crawler_tasks.core.politeness (state/scripts.py): the host",
             "-- limiter's constants and the kinds of answer. Needs no KEYS or ARGV."]
    lines += [f"local {name} = {value!r}" for name, value in (
        ("BACKOFF_START", politeness.BACKOFF_START), ("BACKOFF_MIN", politeness.BACKOFF_MIN),
        ("TIMEOUT_STRIKES", politeness.TIMEOUT_STRIKES), ("GOOD_TO_RESTORE", politeness.GOOD_TO_RESTORE))]
    lines += [f"local KIND_{kind.name} = '{kind.value}'" for kind in politeness.FeedbackKind]
    return "\n".join(lines) + "\n"


#: Fragments written from Python values at load time, not shipped as files.
GENERATED: dict[str, Callable[[], str]] = {"consts.lua": host_constants}


def names() -> list[str]:
    """Every ``.lua`` file shipped (scripts and fragments)."""
    folder = resources.files(__package__).joinpath("lua")
    return sorted(f.name for f in folder.iterdir() if f.name.endswith(".lua"))


@functools.cache
def source(name: str, **slots: str) -> str:
    """The text Redis runs for script ``name``: includes resolved (``{slot}`` names filled
    from ``slots``), comment lines and blank lines left out."""
    return "".join(_resolve(name, slots, ()))


def _resolve(name: str, slots: dict[str, str], within: tuple[str, ...]) -> list[str]:
    if name in within:
        raise ValueError(f"{name} includes itself: {' -> '.join((*within, name))}")
    out: list[str] = []
    for line in _read(name).splitlines(keepends=True):
        include = _INCLUDE.match(line.strip())
        if include:
            target = include.group(1)
            if target.startswith("{") and target.endswith("}"):
                target = slots[target[1:-1]]
            out += _resolve(target, slots, (*within, name))
        elif line.strip() and not _COMMENT.match(line):
            out.append(line if line.endswith("\n") else line + "\n")
    return out


def header(name: str) -> str:
    """The comment lines a file starts with (what it takes and returns)."""
    lines = []
    for line in _read(name).splitlines():
        if not _COMMENT.match(line):
            break
        lines.append(line)
    return "\n".join(lines)


def register(client: Any, name: str, **slots: str) -> Any:
    """Script ``name`` registered on ``client`` (a Redis or RedisCluster client, or a
    pipeline's): call it with ``keys=`` and ``args=``; its text is ``.script``. On a Redis
    Cluster it is a :class:`NodeScript`."""
    script = client.register_script(source(name, **slots))
    return NodeScript(client, script) if is_cluster(client) else script


class NodeScript:
    """A script on a Redis Cluster, run by its digest straight on the master of its first
    key, through that master's own client: the cluster client would work out the keys,
    slot and node of each call anew. A master that answers NOSCRIPT (restarted, flushed),
    MOVED or ASK (a resharding) gets the call again through the cluster client, which
    loads the script or follows the key. ``client=`` (a pipeline) goes the usual way."""

    def __init__(self, cluster: Any, script: Any) -> None:
        self.cluster = cluster
        self.inner = script
        self.script = script.script
        self.sha = script.sha

    def __call__(self, keys: Any = (), args: Any = (), client: Any = None) -> Any:
        if client is not None or not keys:
            return self.inner(keys=keys, args=args, client=client)
        node = self.cluster.get_node_from_key(keys[0])
        try:
            return self.cluster.get_redis_connection(node).evalsha(self.sha, len(keys), *keys, *args)
        except (redis.exceptions.NoScriptError, *ELSEWHERE):
            return self.inner(keys=keys, args=args)
