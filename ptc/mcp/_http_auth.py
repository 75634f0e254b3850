"""Who may reach a scope served over streamable HTTP (DESIGN section 9, "Serving over HTTP
lets in only who belongs").

A served scope is a code-execution endpoint with the host's tools behind it. Off loopback
``serve`` needs a bearer token (:class:`BearerToken`, compared in constant time) or any of
the SDK's ``TokenVerifier`` s; the Host and Origin checks live in :mod:`._http_hosts`.
:class:`BearerGate` answers a missing or wrong token with 401 from the request's headers,
before any MCP processing; :class:`CloseOnUnreadBody` then closes the connection instead of
letting the server read the body the client may still be sending. :class:`DisconnectWatch`
lets a call learn that its HTTP client went away.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from pathlib import Path
from typing import Any, Final

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken, TokenVerifier
from starlette.authentication import AuthCredentials
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import ptc

__all__ = (
    "DISCONNECTED",
    "BearerGate",
    "BearerToken",
    "CloseOnUnreadBody",
    "DisconnectWatch",
)

logger = logging.getLogger("ptc.mcp")

DISCONNECTED: Final = "ptc.disconnected"
"""The ASGI scope key of an ``anyio.Event`` set when the request's client disconnects."""
MIN_TOKEN_CHARS: Final = 16


class BearerToken:
    """A shared secret a client sends as ``Authorization: Bearer <token>`` (an SDK
    ``TokenVerifier``). Compared in constant time; at least 16 printable ASCII characters
    (an HTTP header carries no other text faithfully)."""

    def __init__(self, token: str) -> None:
        if not isinstance(token, str):
            raise ptc.UsageError("BearerToken takes the token as a str")
        token = token.strip()
        if (
            len(token) < MIN_TOKEN_CHARS
            or not (token.isascii() and token.isprintable())
            or " " in token
        ):
            raise ptc.ConfigurationError(
                f"a bearer token must be at least {MIN_TOKEN_CHARS} printable ASCII characters"
                " without spaces (e.g. the output of `openssl rand -hex 32`)"
            )
        self._digest = hashlib.sha256(token.encode()).digest()

    @classmethod
    def from_file(cls, path: str | Path) -> BearerToken:
        """The token in ``path`` (surrounding whitespace ignored), e.g. a mounted secret."""
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ptc.ConfigurationError(
                f"cannot read the token file {str(path)!r}: {exc}"
            ) from exc
        # Not decode(): its error's text, chained or as the context, shows bytes of the secret.
        text = data.decode("utf-8", "replace")
        if "\ufffd" in text:
            raise ptc.ConfigurationError(
                f"cannot read the token file {str(path)!r}: it is not UTF-8 text"
            )
        return cls(text)

    def __repr__(self) -> str:
        return "<ptc.mcp.BearerToken>"  # never the secret

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's check of a request's bearer token: an ``AccessToken`` when it is this
        one (compared in constant time), ``None`` otherwise."""
        # Digests of equal length: the comparison's time says nothing of the token.
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        if not hmac.compare_digest(digest, self._digest):
            return None
        return AccessToken(token=token, client_id="bearer", scopes=[])


class BearerGate:
    """ASGI middleware: an HTTP request without a token ``verifier`` accepts gets 401 from
    its headers (its body is never read) and is never seen by the app; an accepted one
    carries the SDK's authenticated user (so its MCP sessions are bound to that principal).
    Scopes other than HTTP and the lifespan (a WebSocket) never reach the app."""

    def __init__(self, app: ASGIApp, verifier: TokenVerifier) -> None:
        self._app = app
        self._verifier = verifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # the server refuses a WebSocket its app did not accept
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
    """The token of the one ``Authorization: Bearer`` header (two headers: none)."""
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    given = [value for name, value in headers if name.lower() == b"authorization"]
    if len(given) != 1:
        return None
    scheme, _, token = given[0].decode("latin-1").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


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


class CloseOnUnreadBody:
    """ASGI middleware: a response that starts before the request's body was read to its
    end (a 401, 421 or 413 decided from the headers) says ``Connection: close``, so the
    server closes the connection after it. Without it uvicorn keeps the connection alive by
    reading, and discarding, the rest of the body: a refused client could make it read a
    1 GiB body sent as slowly as it likes."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        unread = _declares_body(scope)

        async def reading() -> Message:
            nonlocal unread
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                unread = False
            return message

        async def closing(message: Message) -> None:
            if message["type"] == "http.response.start" and unread:
                headers = [*message.get("headers", []), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, reading, closing)


def _declares_body(scope: Scope) -> bool:
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for name, value in headers:
        name = name.lower()
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


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
