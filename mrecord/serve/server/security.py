"""The server's security rules, as small pure functions (docs/SERVE.md, "Security model").

- :func:`check_bind`: a non-loopback address needs a token.
- :func:`token_ok`: ``Authorization: Bearer TOKEN`` compared in constant time.
- :func:`host_ok`: without a token the API only answers requests addressed to a
  loopback name (:func:`loopback_hosts`: and the loopback address it is bound to), so a
  web page elsewhere cannot reach it by DNS rebinding.
"""

from __future__ import annotations

import hmac

from mrecord.errors import ArgumentError
from mrecord.serve.protocol.local import is_loopback

__all__ = [
    "LOOPBACK_HOSTS",
    "check_bind",
    "host_ok",
    "is_loopback",
    "loopback_hosts",
    "token_matches",
    "token_ok",
]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def loopback_hosts(bound: str | None = None) -> frozenset[str]:
    """The ``Host`` names answered without a token: the loopback names, and ``bound`` (the
    address the server listens on) when it is a loopback address too (``127.0.0.2``)."""
    if bound is None or not is_loopback(bound) or bound.lower() in LOOPBACK_HOSTS:
        return LOOPBACK_HOSTS
    name = bound.lower().strip("[]")
    return LOOPBACK_HOSTS | {f"[{name}]" if ":" in name else name}


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen on a non-loopback address without a token (ArgumentError)."""
    if token is not None and not token:
        raise ArgumentError("--token must not be empty")
    if not is_loopback(host) and not token:
        raise ArgumentError(
            f"refusing to serve on {host!r} without --token: anyone who can reach that "
            "address could read the datasets. Pass --token (or MRECORD_SERVE_TOKEN), or bind "
            "127.0.0.1"
        )


def token_ok(authorization: str | None, token: str) -> bool:
    """True when the ``Authorization`` header carries ``Bearer <token>`` (constant-time)."""
    if not authorization:
        return False
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return token_matches(given.strip(), token)


def token_matches(given: object, token: str) -> bool:
    """True when ``given`` is the string ``token`` (compared in constant time)."""
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))


def host_ok(host_header: str | None, allowed: frozenset[str]) -> bool:
    """True when the request's ``Host`` (port stripped) is one of ``allowed``."""
    if not host_header:
        return False
    host = host_header
    if host.startswith("["):
        host = host[: host.find("]") + 1]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.lower() in allowed
