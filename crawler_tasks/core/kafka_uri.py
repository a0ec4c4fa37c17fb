"""Kafka URIs, for the Kafka store and the Kafka seed feed: read into a :class:`KafkaTarget`.

``kafka://[user:password@]host[:9092][,host[:9092]...]/topic[,topic...][?option=value&...]``
(plain TCP) and ``kafkas://…`` (TLS, the broker's certificate verified; ``ca_certs=/path``
names a private CA). With ``user:password`` the client authenticates with SASL
(``sasl_mechanism``: ``PLAIN``, the default, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``), over
TLS with ``kafkas://``. Several bootstrap servers are separated by commas; the store takes
one topic, the feed one or more. The password is masked wherever the URI is shown
(:func:`crawler_tasks.core.store_uris.mask`).

Options:

``group``              the feed's consumer group (default ``crawler-seeds``)
``compression``        the store's compression: ``none``, ``gzip``, ``snappy``, ``lz4``
                       (default) or ``zstd``
``max_message_bytes``  the largest message the store sends (default 1000000, under Kafka's
                       default topic limit of 1048588 bytes): a record over it goes without
                       its body, and one over it even so is refused (dead letters)
``timeout``            seconds the store waits for Kafka to take a batch (default 30)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

from .errors import BadInput
from .store_uris import mask

SCHEMES = ("kafka", "kafkas")
DEFAULT_PORT = 9092
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
OPTIONS = ("group", "compression", "max_message_bytes", "timeout", "sasl_mechanism", "ca_certs", "only")
#: What a Kafka store may keep to (``only=``): every record (""), or the change events.
ONLY = ("", "changes")
DEFAULT_GROUP = "crawler-seeds"
DEFAULT_MAX_MESSAGE_BYTES = 1_000_000
DEFAULT_TIMEOUT = 30.0
#: Kafka's rule for topic names.
_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


class BadKafkaURI(BadInput):
    """A Kafka URI that cannot be used (one line, password masked)."""


@dataclass(frozen=True)
class KafkaTarget:
    """A Kafka cluster, its topics and how to reach it, as a URI names them."""

    servers: tuple[str, ...]
    topics: tuple[str, ...]
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    sasl_mechanism: str = "PLAIN"
    ca_certs: str | None = None
    group: str = DEFAULT_GROUP
    compression: str = "lz4"
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    timeout: float = DEFAULT_TIMEOUT
    #: ``changes``: a store of change events, not records (``only=changes``).
    only: str = ""

    @property
    def display(self) -> str:
        """The URI for messages and logs: the password never shown."""
        user = f"{self.username}:***@" if self.username is not None else ""
        return f"{'kafkas' if self.tls else 'kafka'}://{user}{','.join(self.servers)}/{','.join(self.topics)}"

    def client_config(self) -> dict[str, Any]:
        """What every librdkafka client of this cluster is configured with."""
        sasl = self.username is not None
        protocol = {(False, False): "PLAINTEXT", (True, False): "SSL",
                    (False, True): "SASL_PLAINTEXT", (True, True): "SASL_SSL"}[(self.tls, sasl)]
        config: dict[str, Any] = {"bootstrap.servers": ",".join(self.servers), "security.protocol": protocol}
        if sasl:
            config.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.username,
                           "sasl.password": self.password})
        if self.ca_certs:
            config["ssl.ca.location"] = self.ca_certs
        return config


def parse_kafka_uri(uri: str, *, what: str = "kafka") -> KafkaTarget:
    """The :class:`KafkaTarget` of ``uri``; :class:`BadKafkaURI` (one line, naming ``what``
    and the URI with its password masked) when it cannot be used."""
    shown = mask(uri)

    def bad(problem: str) -> BadKafkaURI:
        return BadKafkaURI(f"{what} {shown!r}: {problem}")

    scheme, sep, rest = uri.partition("://")
    if scheme.lower() not in SCHEMES or not sep:
        raise bad("the scheme must be kafka:// or kafkas:// (TLS)")
    rest, _, query = rest.partition("?")
    if "#" in rest or "#" in query:
        raise bad("a Kafka URI has no '#' part")
    userinfo, at, hostpart = rest.rpartition("@")
    servers_text, slash, topics_text = hostpart.partition("/")
    servers = tuple(_server(s, bad) for s in servers_text.split(","))
    topics = tuple(unquote(t) for t in topics_text.strip("/").split(",") if t)
    if not slash or not topics:
        raise bad("no topic: name it as the path (kafka://host:9092/pages)")
    for topic in topics:
        if len(topic) > 249 or set(topic) - _TOPIC_CHARS or topic in (".", ".."):
            raise bad(f"topic {topic!r} is not a Kafka topic name (letters, digits, '.', '_', '-'; "
                      "at most 249)")
    username, password = _credentials(userinfo if at else None, bad)
    tls = scheme.lower() == "kafkas"
    return KafkaTarget(servers=servers, topics=topics, tls=tls, username=username, password=password,
                       **_options(query, tls, bad))


def error_text(exc: BaseException) -> str:
    """The one line a librdkafka error says (a ``KafkaException`` holds a ``KafkaError``,
    whose ``str()`` is the message alone), or the exception's own text."""
    error = exc.args[0] if exc.args else exc
    said = getattr(error, "str", None)
    return said() if callable(said) else str(error)


def _server(text: str, bad: Any) -> str:
    text = text.strip()
    if text.startswith("["):  # an IPv6 address: [::1]:9092
        end = text.find("]") + 1
        host, port = text[:end], text[end:].removeprefix(":")
        if not end or (text[end:] and not text[end:].startswith(":")):
            raise bad(f"bad server {text!r}")
    else:
        host, _, port = text.partition(":")
    if not host:
        raise bad("no host (kafka://host:9092/topic; several: kafka://a:9092,b:9092/topic)")
    if ":" in text[len(host):] and not (port.isdigit() and 0 < int(port) < 65536):
        raise bad(f"bad port {port!r}: the port must be a number from 1 to 65535")
    return f"{host}:{port or DEFAULT_PORT}"


def _credentials(userinfo: str | None, bad: Any) -> tuple[str | None, str | None]:
    if userinfo is None:
        return None, None
    user, colon, password = userinfo.partition(":")
    if not user or not colon:
        raise bad("credentials must be given as user:password@")
    return unquote(user), unquote(password)


def _options(query: str, tls: bool, bad: Any) -> dict[str, Any]:
    raw = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(raw) - set(OPTIONS))
    if unknown:
        raise bad(f"unknown option {unknown[0]!r} (known: {', '.join(OPTIONS)})")
    out: dict[str, Any] = {}
    if "group" in raw:
        if not raw["group"]:
            raise bad("group must not be empty")
        out["group"] = raw["group"]
    if "compression" in raw:
        if raw["compression"] not in COMPRESSIONS:
            raise bad(f"compression must be one of {', '.join(COMPRESSIONS)}")
        out["compression"] = raw["compression"]
    if "sasl_mechanism" in raw:
        mechanism = raw["sasl_mechanism"].upper()
        if mechanism not in MECHANISMS:
            raise bad(f"sasl_mechanism must be one of {', '.join(MECHANISMS)}")
        out["sasl_mechanism"] = mechanism
    for name, kind, low in (("max_message_bytes", int, 1000), ("timeout", float, 0.1)):
        if name in raw:
            try:
                value = kind(raw[name])
            except ValueError:
                raise bad(f"{name} must be a number") from None
            if value < low:
                raise bad(f"{name} must be at least {low}")
            out[name] = value
    if "only" in raw:
        if raw["only"] not in ONLY:
            raise bad(f"only must be {' or '.join(repr(o) for o in ONLY if o)}")
        out["only"] = raw["only"]
    if "ca_certs" in raw:
        if not tls:
            raise bad("ca_certs needs kafkas:// (TLS)")
        if not os.path.isfile(raw["ca_certs"]):
            raise bad(f"ca_certs: no such file {raw['ca_certs']!r}")
        out["ca_certs"] = raw["ca_certs"]
    return out
