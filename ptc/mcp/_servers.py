"""Where an MCP server is: started over stdio, or reached over streamable HTTP, and the
transport that connects to each (ptc's own for stdio, the SDK's for HTTP with its response
bodies bounded), behind :func:`ptc.mcp._wire.guarded`."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import TextIO

import httpx2
from mcp.client.streamable_http import streamable_http_client

# The SDK's HTTP client timeouts (they suit long SSE streams); not re-exported from a
# public module, so imported from where they are defined.
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.message import SessionMessage

import ptc

from ._stdio import stdio_transport
from ._wire import Exchange, ReadStream, WriteStream, guarded

__all__ = ("HttpServer", "MountError", "StdioServer", "connection", "http", "stdio")


class MountError(ptc.PtcError, ConnectionError):
    """The MCP server could not be started, reached or listed (the message says which
    server and why). Bad schemas and name clashes are ``ValueError`` s instead."""


@dataclass(frozen=True, slots=True)
class StdioServer:
    """An MCP server started as a subprocess and spoken to over its stdin/stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    """Extra environment variables (over the SDK's safe default set: PATH, HOME, ...)."""
    cwd: str | None = None
    stderr: TextIO | None = None
    """Where the server's stderr goes (a real file; default: this process's stderr)."""

    @property
    def label(self) -> str:
        return shlex.join([self.command, *self.args])


@dataclass(frozen=True, slots=True)
class HttpServer:
    """An MCP server reached over streamable HTTP."""

    url: str
    headers: Mapping[str, str] | None = field(default=None)

    @property
    def label(self) -> str:
        return self.url


def stdio(
    command: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stderr: TextIO | None = None,
) -> StdioServer:
    """``stdio("mcp-server-git", "--repository", path)``: a server to start over stdio."""
    if not isinstance(command, str) or not command:
        raise ptc.UsageError("stdio() needs the server's command")
    if not all(isinstance(a, str) for a in args):
        raise ptc.UsageError("stdio() arguments must be strings")
    return StdioServer(command, tuple(args), env, cwd, stderr)


def http(url: str, *, headers: Mapping[str, str] | None = None) -> HttpServer:
    """``http("http://127.0.0.1:8000/mcp")``: a server to reach over streamable HTTP."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ptc.UsageError(f"http() needs an http:// or https:// URL, got {url!r}")
    return HttpServer(url, headers)


@asynccontextmanager
async def connection(
    server: StdioServer | HttpServer, exchange: Exchange, lost: Callable[[str], None]
) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """``(read, write)`` streams for a ``ClientSession`` with ``server``, every message
    passing :func:`ptc.mcp._wire.guarded`. ``lost(reason)``: the stdio transport gave up
    on the server's output (the session then sees the connection end)."""
    async with AsyncExitStack() as stack:
        streams: tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]
        if isinstance(server, StdioServer):
            streams = await stack.enter_async_context(
                stdio_transport(
                    server.command,
                    list(server.args),
                    env=dict(server.env) if server.env is not None else None,
                    cwd=server.cwd,
                    errlog=server.stderr or sys.stderr,
                    exchange=exchange,
                    lost=lost,
                )
            )
        else:
            client = httpx2.AsyncClient(
                headers=dict(server.headers) if server.headers else None,
                # The SDK's defaults: 30 s to connect or write, 300 s to read (SSE streams).
                timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
                transport=_CappedTransport(httpx2.AsyncHTTPTransport(), exchange),
            )
            await stack.enter_async_context(client)
            streams = await stack.enter_async_context(
                # Per-event SSE bound: the largest message; a call's whole reply stream is
                # bounded by _CappedTransport.
                streamable_http_client(
                    server.url, http_client=client, max_sse_event_size=exchange.limit(None)
                )
            )
        yield await stack.enter_async_context(guarded(*streams, exchange))


class _TooLarge(httpx2.SSEError, httpx2.StreamError):
    """A response body over its limit. Both an ``SSEError`` and a ``StreamError``: the SDK's
    HTTP transport turns either into an error reply for the request (naming this text)."""


class _CappedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport whose response bodies are bounded: a ``tools/call`` POST's at
    ``max_reply_bytes``, any other POST's at the largest message; a GET (the server's
    notification stream) only per SSE event, by the SDK."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, exchange: Exchange) -> None:
        self._inner = inner
        self._exchange = exchange

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method != "POST":
            return response
        method = request_id = None
        with suppress(ValueError, TypeError, httpx2.RequestNotRead):
            body = json.loads(request.content)
            method, request_id = body.get("method"), body.get("id")
        if method is None or request_id is None:
            return response
        limit = self._exchange.limits.max_reply_bytes if method == "tools/call" else None
        stream = _CappedStream(
            response.stream,  # type: ignore[arg-type]
            limit or self._exchange.limit(None),
            lambda size: self._exchange.too_large(request_id, size, more=True),
        )
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=stream,
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(
        self, inner: httpx2.AsyncByteStream, limit: int, why: Callable[[int], str]
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._why = why

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._limit:
                raise _TooLarge(self._why(self._limit))
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
