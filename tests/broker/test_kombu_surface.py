"""The kombu the Redis transport was written against: every kombu method it overrides or
calls, pinned by signature and by a hash of its source.

``broker/transport.py`` subclasses kombu's Redis ``QoS`` and ``Channel`` and leans on
private methods (``_brpop_start``, ``_brpop_read``, ``_put`` with ``_publish_batch``,
``_do_restore_message``, ``Transport._deliver``, ``Message._raw``...). A kombu release that
changes any of them may break every worker without a word: ``pyproject.toml`` pins kombu
and celery to the minor version tested, and this test names the method that moved when a
release within it (or a new pin) changes one. When it fails: read the new kombu's method
against the transport's use of it, then update its line here.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from kombu.transport import redis as kombu_redis

from crawler_tasks.broker import acks, transport

#: (module, qualified name, signature, first 16 hex digits of the source's SHA-256), kombu 5.7.0.
SURFACE = [
    ("kombu.transport.redis", "QoS.append", "(self, message, delivery_tag)",
     "35c655f6ecc62fe6"),
    ("kombu.transport.redis", "QoS.restore_visible", "(self, start=0, num=10, interval=10)",
     "d4a4a40a3eaf9f23"),
    ("kombu.transport.redis", "QoS.restore_unacked", "(self, client=None)",
     "8954efef014d546e"),
    ("kombu.transport.redis", "QoS.ack", "(self, delivery_tag)",
     "1bc15a4ddf541af6"),
    ("kombu.transport.redis", "QoS.reject", "(self, delivery_tag, requeue=False)",
     "747a02434344d1a6"),
    ("kombu.transport.redis", "QoS.pipe_or_acquire", "(self, pipe=None, client=None)",
     "ad7f549d96c81107"),
    ("kombu.transport.redis", "QoS._remove_from_indices", "(self, delivery_tag, pipe=None)",
     "980a109d54ad9136"),
    ("kombu.transport.redis", "Channel.__init__", "(self, *args, **kwargs)",
     "f189bdebe2436ccd"),
    ("kombu.transport.redis", "Channel._create_client", "(self, asynchronous=False)",
     "dae92bc4075dafb9"),
    ("kombu.transport.redis", "Channel._get_pool", "(self, asynchronous=False)",
     "d6e689f654ffec44"),
    ("kombu.transport.redis", "Channel._connparams", "(self, asynchronous=False)",
     "e9a4295085a8fb90"),
    ("kombu.transport.redis", "Channel.basic_consume", "(self, queue, *args, **kwargs)",
     "34e0da85e689ff98"),
    ("kombu.transport.virtual.base", "Channel.basic_get", "(self, queue, no_ack=False, **kwargs)",
     "ba4884c15b6bed6d"),
    ("kombu.transport.redis", "Channel._q_for_pri", "(self, queue, pri)",
     "f3997660680dd00f"),
    ("kombu.transport.redis", "Channel._brpop_start", "(self, timeout=None)",
     "06723d707ddf2240"),
    ("kombu.transport.redis", "Channel._brpop_read", "(self, **options)",
     "c42518699709f2df"),
    ("kombu.transport.redis", "Channel._get", "(self, queue)",
     "be26a9f1eb4cf8da"),
    ("kombu.transport.redis", "Channel._put", "(self, queue, message, **kwargs)",
     "1c0cf9749576614c"),
    ("kombu.transport.redis", "Channel._do_restore_message", "(self, payload, exchange, routing_key, pipe, leftmost=False)",
     "8b430df94e45b5b0"),
    ("kombu.transport.redis", "Channel._size", "(self, queue)",
     "7cc839b42fdc5e3b"),
    ("kombu.transport.redis", "Channel.conn_or_acquire", "(self, client=None)",
     "25883caca6c4121e"),
    ("kombu.transport.redis", "Channel._flush_brpop_reauth", "(self)",
     "bb4930b4fd3cf8f3"),
    ("kombu.transport.virtual.base", "Channel._lookup", "(self, exchange, routing_key, default=None)",
     "82b0e60149b5e172"),
    ("kombu.transport.virtual.base", "Transport._deliver", "(self, message, queue)",
     "799e242f3ec53863"),
    ("kombu.transport.virtual.base", "Message.__init__", "(self, payload, channel=None, **kwargs)",
     "c90d08ccfa2e3e9a"),
]


def _resolve(module: str, qualname: str) -> object | None:
    target: object = importlib.import_module(module)
    for part in qualname.split("."):
        target = vars(target).get(part) if isinstance(target, type) else getattr(target, part, None)
        if target is None:
            return None
    return target


def changed(surface: list[tuple[str, str, str, str]]) -> list[str]:
    """One line for each pinned method kombu no longer has as pinned, naming it."""
    lines = []
    for module, qualname, signature, digest in surface:
        name = f"{module}.{qualname}"
        found = _resolve(module, qualname)
        if not inspect.isfunction(found):
            lines.append(f"{name}: gone")
            continue
        now = str(inspect.signature(found))
        if now != signature:
            lines.append(f"{name}: signature {now}, was {signature}")
        elif hashlib.sha256(inspect.getsource(found).encode()).hexdigest()[:16] != digest:
            lines.append(f"{name}: source changed (signature {now} kept)")
    return lines


def test_every_kombu_method_the_transport_leans_on_is_as_it_was_written_against():
    assert changed(SURFACE) == [], "kombu changed under broker/transport.py"


def test_every_kombu_method_the_transport_overrides_is_pinned():
    pinned = {qualname.rsplit(".", 1)[1] for _, qualname, _, _ in SURFACE}
    ours = [(acks.QoS, kombu_redis.QoS), (transport.Channel, kombu_redis.Channel),
            (transport.Transport, kombu_redis.Transport)]
    overridden = {name for cls, base in ours for name, value in vars(cls).items()
                  if inspect.isfunction(value) and inspect.isfunction(getattr(base, name, None))}
    assert overridden - pinned == set(), "an override of a kombu method not pinned here"


def test_a_kombu_method_that_changes_is_named(monkeypatch):
    def _q_for_pri(self, queue, pri, sep=None):  # a release that adds a parameter
        return queue

    monkeypatch.setattr(kombu_redis.Channel, "_q_for_pri", _q_for_pri)
    original = kombu_redis.QoS.ack

    def ack(self, delivery_tag):  # same signature, another body
        return original(self, delivery_tag)

    monkeypatch.setattr(kombu_redis.QoS, "ack", ack)
    monkeypatch.delattr(kombu_redis.Channel, "_flush_brpop_reauth")
    assert changed(SURFACE) == [
        "kombu.transport.redis.QoS.ack: source changed (signature (self, delivery_tag) kept)",
        "kombu.transport.redis.Channel._q_for_pri: signature (self, queue, pri, sep=None), was (self, queue, pri)",
        "kombu.transport.redis.Channel._flush_brpop_reauth: gone",
    ]


@pytest.mark.parametrize("package", ["kombu", "celery[redis]"])
def test_kombu_and_celery_are_pinned_to_the_minor_version_tested(package):
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    [requirement] = [r for r in pyproject["project"]["dependencies"] if r.split(">")[0] == package]
    major, low = metadata.version(package.split("[")[0]).split(".")[:2]
    minor = f"{major}.{low}"
    assert requirement == f"{package}>={minor}.0,<{major}.{int(low) + 1}"
