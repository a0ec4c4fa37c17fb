"""Exchange bindings in kombu's form, the one every app on a Redis broker reads.

kombu keeps a Redis broker's bindings in sets ``_kombu.binding.<exchange>``, each
member ``routing_key SEP pattern SEP queue`` with kombu's separator ``\\x06\\x16``.
Workers of earlier versions of this package wrote them with ``:``, which a plain
Celery app on the same broker cannot read: its control commands (``celery inspect
ping``) failed on both sides. A worker rewrites such members at start
(:func:`rewrite_bindings`); queued messages are untouched (their lists keep their
names). Stop the workers of an earlier version before starting these.
"""

from __future__ import annotations

from typing import Any

#: kombu's separator of a binding's parts (``kombu.transport.redis.Channel.sep``).
KOMBU_SEP = "\x06\x16"
#: The separator earlier versions of this package wrote bindings with.
OLD_SEP = ":"
BINDING_KEYS = "_kombu.binding.*"


def kombu_form(member: str) -> str | None:
    """``member`` in kombu's form when it was written with ``:`` (three parts, no kombu
    separator); None when it needs nothing."""
    if KOMBU_SEP in member or member.count(OLD_SEP) != 2:
        return None
    return KOMBU_SEP.join(member.split(OLD_SEP))


def rewrite_bindings(client: Any) -> int:
    """Rewrite the binding members written with ``:`` into kombu's form; how many."""
    rewritten = 0
    for key in client.scan_iter(match=BINDING_KEYS, count=1000):
        for raw in client.smembers(key):
            member = raw.decode() if isinstance(raw, bytes) else raw
            new = kombu_form(member)
            if new is None:
                continue
            pipe = client.pipeline(transaction=True)
            pipe.srem(key, raw)
            pipe.sadd(key, new)
            pipe.execute()
            rewritten += 1
    return rewritten
