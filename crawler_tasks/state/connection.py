"""Redis and broker connections, checked when they are made; TLS options; URLs safe to show.

TLS (``rediss://``, ``amqps://``) verifies the server's certificate and host
name by default, against the system's trust store (``SSL_CERT_FILE`` changes
that for a process). A private CA goes into the URL itself, the same way for
every URL: ``?ssl_ca_certs=/path/ca.pem``. redis-py reads such URLs as they
are; kombu does not (a ``rediss://`` broker URL without ``ssl_*`` parameters
would *not* be verified, and py-amqp refuses the parameters), so
:func:`broker_params` turns them into Celery's ``broker_use_ssl``.
"""

from __future__ import annotations

import ssl
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import redis
from kombu import Connection

from ..core.errors import BrokerRefused, BrokerUnavailable, SettingsError
from .pool import LeanPool

CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")

#: The Redis errors that mean the server is away or not serving yet.
OUTAGES: tuple[type[Exception], ...] = (
    redis.exceptions.ConnectionError,  # refused, reset, LOADING (BusyLoadingError)
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,  # a replica answering during a fail-over
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.MasterDownError,
    redis.exceptions.OutOfMemoryError,  # maxmemory reached: writes refused until it frees
)
#: Error replies of a Redis that refuses writes for now: out of memory, a failed snapshot,
#: too few replicas, busy with a script, loading, fail-over.
REFUSING_FOR_NOW = ("OOM ", "MISCONF ", "NOREPLICAS ", "BUSY ", "LOADING ", "READONLY ", "MASTERDOWN ",
                    "TRYAGAIN ", "CLUSTERDOWN ")


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` means the state Redis is away or refuses writes for now (wait for it
    and try again). Every other :class:`redis.RedisError` (WRONGTYPE, a script's error...)
    is a bug: trying again cannot help."""
    if isinstance(exc, OUTAGES):
        return True
    if not isinstance(exc, redis.exceptions.ResponseError):
        return False
    text = str(exc)  # a script's failed call carries the reply inside: "... @user_script:49: -OOM ..."
    return text.startswith(REFUSING_FOR_NOW) or any(f"-{code}" in text for code in REFUSING_FOR_NOW)

#: ``ssl_*`` URL parameters of an ``amqps://`` broker and the py-amqp option each becomes.
AMQPS_PARAMS = {"ssl_ca_certs": "ca_certs", "ssl_certfile": "certfile", "ssl_keyfile": "keyfile",
                "ssl_cert_reqs": "cert_reqs", "ssl_check_hostname": "check_hostname"}
CERT_REQS = {"required": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}
MALFORMED = ("is not a valid URL (in the user name and password, percent-encode "
             "any of : / ? # @ [ ] %)")
TLS_HINT = " (to trust a private CA, add ?ssl_ca_certs=/path/ca.pem to the URL)"


def redis_from_url(url: str, *, check: bool = True, max_connections: int | None = None) -> redis.Redis:
    """A Redis client for ``url``; pings it first when ``check`` so a dead server fails early.

    ``redis+cluster://host:port`` (or ``rediss+cluster://``) names any node of a
    Redis Cluster; the client discovers the others. ``rediss://`` verifies the
    server's certificate (redis-py's default; ``?ssl_ca_certs=`` names a CA file).
    """
    check_well_formed(url, "Redis URL")
    options = {"socket_connect_timeout": 3, "health_check_interval": 30}
    if max_connections:
        options["max_connections"] = max_connections
    try:
        if url.startswith(CLUSTER_SCHEMES):
            from redis.cluster import RedisCluster

            # Not a redis.Redis subclass, but it serves every command the state components send.
            # Each master's pool is a LeanPool too: the cluster client takes a connection
            # from it for every command.
            client: redis.Redis = RedisCluster.from_url(
                url.replace("+cluster", "", 1), connection_pool_class=LeanPool, **options)
        else:
            client = redis.Redis.from_pool(LeanPool.from_url(url, **options))
    except (ValueError, TypeError):
        raise SettingsError(f"Redis URL {safe_url(url)} {MALFORMED}") from None
    except (redis.RedisError, OSError) as exc:
        raise _unavailable(f"Redis at {safe_url(url)}", exc, url) from None
    if check:
        try:
            client.ping()
        except (redis.RedisError, OSError) as exc:
            raise _unavailable(f"Redis at {safe_url(url)}", exc, url) from None
    return client


def check_broker(url: str, timeout: float = 3.0) -> None:
    """Raise :class:`BrokerUnavailable` unless the broker at ``url`` accepts a connection.

    It connects with the TLS options the workers use (:func:`broker_params`).
    """
    kombu_url, use_ssl = broker_params(url)
    try:
        with Connection(kombu_url, ssl=use_ssl or False, connect_timeout=timeout) as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
    except ValueError:  # e.g. a port that is not a number: the URL was cut in the wrong place
        raise SettingsError(f"broker URL {safe_url(url)} {MALFORMED}") from None
    except Exception as exc:  # kombu raises transport-specific errors
        raise _unavailable(f"broker at {safe_url(url)}", exc, url) from None


def broker_params(url: str) -> tuple[str, dict[str, Any] | None]:
    """``(url for kombu, broker_use_ssl)`` for the broker ``url``.

    For ``rediss://`` and ``amqps://`` the ``ssl_*`` query parameters leave the
    URL and become ``broker_use_ssl``, with certificate verification on unless
    the URL says ``ssl_cert_reqs=none``: kombu alone would not verify a
    ``rediss://`` URL without them, and would hand py-amqp options it refuses.
    Other URLs are returned as they are, with ``None``.
    """
    check_well_formed(url, "broker URL")
    scheme = url.partition("://")[0].lower()
    if scheme not in ("rediss", "amqps"):
        return url, None
    base, _, query = url.partition("?")
    params = parse_qsl(query, keep_blank_values=True)
    tls = {k: v for k, v in params if k.startswith("ssl_")}
    rest = [(k, v) for k, v in params if not k.startswith("ssl_")]
    kombu_url = f"{base}?{urlencode(rest)}" if rest else base
    where = f"broker URL {safe_url(url)}"
    reqs = tls.get("ssl_cert_reqs", "required")
    if reqs.lower().removeprefix("cert_") not in CERT_REQS:
        raise SettingsError(f"{where}: ssl_cert_reqs={reqs!r} is not one of required, optional, none")
    cert_reqs = CERT_REQS[reqs.lower().removeprefix("cert_")]
    # redis-py's reading of a false value, so the broker and the state Redis agree.
    check_hostname = tls.get("ssl_check_hostname", "true").lower() not in ("0", "f", "false", "n", "no")
    if scheme == "rediss":
        # redis-py's SSLConnection options, as kombu passes them on.
        use_ssl: dict[str, Any] = {**tls, "ssl_cert_reqs": cert_reqs, "ssl_check_hostname": check_hostname}
        return kombu_url, use_ssl
    unknown = sorted(set(tls) - set(AMQPS_PARAMS))
    if unknown:
        raise SettingsError(f"{where}: {', '.join(unknown)} not supported for amqps:// "
                            f"(use {', '.join(AMQPS_PARAMS)})")
    # py-amqp's options (ssl.SSLContext.wrap_socket and friends). Without a
    # server_hostname it would check the chain but not the host name.
    use_ssl = {AMQPS_PARAMS[k]: v for k, v in tls.items()
               if k not in ("ssl_cert_reqs", "ssl_check_hostname")}
    use_ssl["cert_reqs"] = cert_reqs
    if cert_reqs != ssl.CERT_NONE and check_hostname:
        use_ssl["server_hostname"] = _hostname(url) or "localhost"
    return kombu_url, use_ssl


def check_well_formed(url: str, what: str) -> None:
    """Refuse a URL whose password holds an unencoded ``/``, ``?`` or ``#``.

    URL parsers cut such a URL inside the password, and a piece of it becomes
    the host, the port or the path, to be connected to and shown in errors.
    """
    _, userinfo, _ = _split_userinfo(url)
    if not userinfo or not any(c in userinfo for c in "/?#"):
        return
    try:
        host = urlsplit(url).hostname
    except ValueError:
        host = None
    if not host:  # the '@' is not in the host part: it was in the password
        raise SettingsError(f"{what} {safe_url(url)} {MALFORMED}")


def _hostname(url: str) -> str | None:
    from kombu.utils.url import url_to_parts

    try:
        return url_to_parts(url).hostname
    except ValueError:
        raise SettingsError(f"broker URL {safe_url(url)} {MALFORMED}") from None


#: Words of an error that mean the server answered and refused us, not that nothing is there.
_REFUSAL = ("CERTIFICATE_VERIFY_FAILED", "WRONGPASS", "NOAUTH", "ACCESS_REFUSED", "invalid password",
            "invalid username-password", "Authentication", "SSL", "certificate")


def _unavailable(what: str, exc: BaseException, url: str) -> BrokerUnavailable:
    """The one-line error: ``what`` does not answer (or refused us), and why, password masked."""
    reason = _scrub(str(exc), url)
    hint = TLS_HINT if "CERTIFICATE_VERIFY_FAILED" in reason and "ssl_ca_certs" not in url else ""
    if isinstance(exc, (ssl.SSLError, redis.AuthenticationError)) or any(w in reason for w in _REFUSAL):
        return BrokerRefused(f"{what} refused the connection: {reason}{hint}")
    return BrokerUnavailable(f"{what} does not answer: {reason}{hint}")


def _split_userinfo(url: str) -> tuple[str, str, str]:
    """``(scheme://, userinfo, host and the rest)``, split at the last ``@``, never raising.

    No URL parser is trusted here: one misreads an unencoded ``/``, ``?`` or ``#``
    in a password (part of it would become the host or the port).
    """
    scheme, sep, rest = url.partition("://")
    userinfo, at, hostpart = rest.rpartition("@")
    if not sep:
        return "", "", url
    if not at:
        return f"{scheme}{sep}", "", rest
    return f"{scheme}{sep}", userinfo, hostpart


def _password(url: str) -> str | None:
    """The password in ``url`` as written (percent-encoded or not), or None."""
    _, userinfo, _ = _split_userinfo(url)
    return userinfo.partition(":")[2] or (userinfo if userinfo and ":" not in userinfo else None)


def _scrub(text: str, url: str) -> str:
    """``text`` with the password of ``url`` (as written and decoded) masked."""
    password = _password(url)
    if password:
        for form in sorted({password, unquote(password), quote(unquote(password), safe="")},
                           key=len, reverse=True):
            if form:
                text = text.replace(form, "**")
    return text


def safe_url(url: str) -> str:
    """``url`` with any password masked and the query left out, for messages; never raises.

    ``rediss://:secret@host:6380/0?ssl_ca_certs=...`` → ``rediss://:**@host:6380/0``.
    """
    prefix, userinfo, hostpart = _split_userinfo(url)
    if not prefix:
        return url
    hostpart = hostpart.split("?", 1)[0]
    if not userinfo:
        return f"{prefix}{hostpart}"
    user, colon, _ = userinfo.partition(":")
    shown = f"{user}:**" if colon and not any(c in user for c in "/?#") else "**"
    return f"{prefix}{shown}@{hostpart}"
