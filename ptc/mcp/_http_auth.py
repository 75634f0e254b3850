"""Who may reach a scope served over streamable HTTP (DESIGN section 9, "Serving over HTTP
lets in only who belongs").

A served scope is a code-execution endpoint with the host's tools behind it. On a loopback
address the SDK's DNS-rebinding protection stays on (Host and Origin checked). On any other
address ``serve`` needs a bearer token (:class:`BearerToken`, compared in constant time) or
any of the SDK's ``TokenVerifier`` s, and the Host values to accept; it refuses to start
without them unless told ``insecure_no_auth=True``. :class:`BearerGate` answers a missing
or wrong token with 401 before any MCP processing. :class:`DisconnectWatch` lets a call
learn that its HTTP client went away.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.transport_security import TransportSecuritySettings
from starlette.authentication import AuthCredentials
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import ptc

__all__ = (
    "DISCONNECTED",
    "BearerGate",
    "BearerToken",
    "DisconnectWatch",
    "is_loopback",
    "transport_security",
)

logger = logging.getLogger("ptc.mcp")

DISCONNECTED: Final = "ptc.disconnected"
"""The ASGI scope key of an ``anyio.Event`` set when the request's client disconnects."""
MIN_TOKEN_CHARS: Final = 16
_LOOPBACK_HOSTS: Final = ("127.0.0.1:*", "localhost:*", "[::1]:*")
_LOOPBACK_ORIGINS: Final = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")


class BearerToken:
    """A shared secret a client sends as ``Authorization: Bearer <token>`` (an SDK
    ``TokenVerifier``). Compared in constant time; at least 16 characters."""

    def __init__(self, token: str) -> None:
        if not isinstance(token, str):
            raise ptc.UsageError("BearerToken takes the token as a str")
        token = token.strip()
        if len(token) < MIN_TOKEN_CHARS or not token.isprintable() or " " in token:
            raise ptc.ConfigurationError(
                f"a bearer token must be at least {MIN_TOKEN_CHARS} printable characters"
                " without spaces (e.g. the output of `openssl rand -hex 32`)"
            )
        self._digest = hashlib.sha256(token.encode()).digest()

    @classmethod
    def from_file(cls, path: str | Path) -> BearerToken:
        """The token in ``path`` (surrounding whitespace ignored), e.g. a mounted secret."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ptc.ConfigurationError(
                f"cannot read the token file {str(path)!r}: {exc}"
            ) from exc
        return cls(text)

    def __repr__(self) -> str:
        return "<ptc.mcp.BearerToken>"  # never the secret

    async def verify_token(self, token: str) -> AccessToken | None:
        # Digests of equal length: the comparison's time says nothing of the token.
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        if not hmac.compare_digest(digest, self._digest):
            return None
        return AccessToken(token=token, client_id="bearer", scopes=[])


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def transport_security(
    host: str, allowed_hosts: Sequence[str], allowed_origins: Sequence[str] | None
) -> TransportSecuritySettings | None:
    """The SDK's Host/Origin check for a server bound to ``host``: on loopback, the
    loopback names plus ``allowed_hosts``; elsewhere ``allowed_hosts`` (``None``: no check,
    only with ``insecure_no_auth``). A host without a port is accepted on any port;
    ``allowed_origins`` defaults to ``http(s)://`` each allowed host."""
    hosts: list[str] = []
    for value in allowed_hosts:
        hosts += [value] if _has_port(value) else [value, f"{value}:*"]
    if is_loopback(host):
        hosts = [*_LOOPBACK_HOSTS, f"{_bracketed(host)}:*", *hosts]
    elif not hosts:
        return None
    if allowed_origins is None:
        origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
        if is_loopback(host):
            origins = [*_LOOPBACK_ORIGINS, *origins]
    else:
        origins = list(allowed_origins)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(hosts)),
        allowed_origins=list(dict.fromkeys(origins)),
    )


def _has_port(value: str) -> bool:
    return value.rpartition("]")[2].count(":") == 1 if value.startswith("[") else ":" in value


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class BearerGate:
    """ASGI middleware: an HTTP request without a token ``verifier`` accepts gets 401 and
    is never seen by the app; an accepted one carries the SDK's authenticated user (so
    its MCP sessions are bound to that principal)."""

    def __init__(self, app: ASGIApp, verifier: TokenVerifier) -> None:
        self._app = app
        self._verifier = verifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        access = None
        token = _bearer(scope)
        if token is not None:
            access = await self._verifier.verify_token(token)
        if access is None or (access.expires_at is not None and access.expires_at < time.time()):
            await _unauthorized(send, "a valid bearer token is required")
            return
        authenticated = {
            **scope,
            "user": AuthenticatedUser(access),
            "auth": AuthCredentials(access.scopes),
        }
        await self._app(authenticated, receive, send)


def _bearer(scope: Scope) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                return None
            return token.strip()
    return None


async def _unauthorized(send: Send, description: str) -> None:
    body = json.dumps({"error": "invalid_token", "error_description": description}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer error="invalid_token"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class DisconnectWatch:
    """ASGI middleware: each HTTP request's scope gets an ``anyio.Event`` (under
    :data:`DISCONNECTED`) set when the server hears the client disconnect."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        gone = anyio.Event()

        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
            return message

        watched_scope: dict[str, Any] = {**scope, DISCONNECTED: gone}
        await self._app(watched_scope, watched, send)
