"""Elasticsearch errors read: the type and reason of an error body, a client exception in one line.

Every message says what went wrong without the credentials: a 401 names how the
store authenticated, a TLS failure hints at ``?ca_certs=``, a server of another
major version than the client's is named as such.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import elasticsearch
from elasticsearch import ApiError

from .uri import Target


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut at ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def error_of(body: Any) -> tuple[str, str]:
    """(type, reason) of an Elasticsearch error body or bulk item error."""
    error = body.get("error", body) if isinstance(body, Mapping) else body
    if isinstance(error, Mapping):
        return str(error.get("type", "error")), str(error.get("reason", ""))
    return "error", "no details" if error is None else str(error)  # None: the answer to a HEAD


def describe(exc: Exception, target: Target, timeout: float) -> str:
    """One line saying what went wrong, without credentials."""
    if isinstance(exc, elasticsearch.AuthenticationException):
        return f"the credentials were refused (401 Unauthorized): the store sent {target.auth}"
    if isinstance(exc, elasticsearch.AuthorizationException):
        return f"permission denied (403): {one_line(error_of(exc.body)[1])}"
    if isinstance(exc, elasticsearch.UnsupportedProductError):
        return "the server does not say it is Elasticsearch (no X-elastic-product header)"
    if isinstance(exc, ApiError):
        return _describe_api_error(exc)
    if isinstance(exc, elasticsearch.ConnectionTimeout):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, elasticsearch.SSLError):
        short = _short(exc)
        hint = "; name its CA with ?ca_certs=/path/ca.pem" if "CERTIFICATE_VERIFY_FAILED" in short else ""
        return f"TLS failed: {short}{hint}"
    if isinstance(exc, elasticsearch.ConnectionError):
        return f"cannot connect: {_short(exc)}"
    return one_line(f"{type(exc).__name__}: {exc}")


def _describe_api_error(exc: ApiError) -> str:
    type_, reason = error_of(exc.body)
    if type_ == "media_type_header_exception":
        major = elasticsearch.__versionstr__.split(".")[0]
        return (f"the server refused the compatible-with={major} headers of elasticsearch-py "
                f"{elasticsearch.__versionstr__}, which talks to Elasticsearch {major} servers only "
                f"(for an older cluster install the client of its major version)")
    return f"{exc.status_code} {type_}: {one_line(reason)}"


def _short(exc: Exception) -> str:
    """A transport error's message without the client's nested wrappers."""
    message = getattr(exc, "message", None) or str(exc)
    message = re.sub(r"^\w*Connection\([^)]*\):\s*", "", str(message))
    return one_line(message, 200)
