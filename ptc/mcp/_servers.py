"""Where an MCP server is: started over stdio, or reached over streamable HTTP, and the
transport that connects to each (ptc's own for stdio, the SDK's for HTTP with its response
bodies bounded in bytes and JSON values), behind :func:`ptc.mcp._wire.guarded`."""

from __future__ import annotations

import json
import logging
import shlex
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Final, NamedTuple, TextIO

import anyio.lowlevel
import httpx2
from mcp.client.streamable_http import streamable_http_client

# The SDK's HTTP client timeouts (they suit long SSE streams); not re-exported from a
# public module, so imported from where they are defined.
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.message import SessionMessage

import ptc

from ._stdio import stdio_transport
from ._values import JsonValues, SseValues
from ._wire import REFUSED_PREFIX, Exchange, ReadStream, WriteStream, guarded

__all__ = ("HttpServer", "MountError", "StdioServer", "connection", "http", "stdio")

logger = logging.getLogger("ptc.mcp")


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
        """The command line, as a shell would quote it (for messages)."""
        return shlex.join([self.command, *self.args])


@dataclass(frozen=True, slots=True)
class HttpServer:
    """An MCP server reached over streamable HTTP."""

    url: str
    headers: Mapping[str, str] | None = field(default=None)

    @property
    def label(self) -> str:
        """The URL (for messages)."""
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
                # Uncompressed: the limits count the bytes the SDK parses.
                headers={"Accept-Encoding": "identity", **(server.headers or {})},
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


class _Refused(httpx2.SSEError, httpx2.StreamError):
    """A response body ptc will not hand the SDK (over a limit, or compressed). Both an
    ``SSEError`` and a ``StreamError``: the SDK's HTTP transport turns either into an error
    reply for the request (naming this text)."""


class _CappedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport whose response bodies are bounded in bytes and in JSON values
    (:mod:`ptc.mcp._values`), each chunk checked before the SDK sees it.

    A ``tools/call`` POST's whole response is bounded at ``max_reply_bytes`` and each
    message in it (the JSON body, or each SSE event) at ``max_reply_values``; any other
    POST's at the largest message (:meth:`~ptc.mcp._wire.Exchange.limit`,
    :meth:`~ptc.mcp._wire.Exchange.value_limit`). A GET (the server's event stream, or a
    stream the SDK resumes after a dropped one) is bounded per SSE event: its bytes by the
    SDK, its values as the largest message; a refusal there answers no request, so it is
    logged (the SDK then reconnects, twice at most). The body is read as MCP sends it,
    uncompressed UTF-8: a compressed body is refused (ptc asks for ``identity``) and a
    ``charset`` parameter is dropped, so the bytes counted are the text the SDK parses.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport, exchange: Exchange) -> None:
        self._inner = inner
        self._exchange = exchange

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method == "GET":
            bounds = self._event_stream(str(request.url))
        elif request.method == "POST":
            method = request_id = None
            with suppress(ValueError, TypeError, AttributeError, httpx2.RequestNotRead):
                body = json.loads(request.content)
                method, request_id = body.get("method"), body.get("id")
            if method is None or request_id is None:
                return response  # a notification, or a reply of ours: nothing comes back
            bounds = self._reply(method, request_id)
        else:
            return response  # DELETE: the session's end, nothing parsed
        headers = httpx2.Headers(response.headers)
        media, _, parameters = headers.get("content-type", "").partition(";")
        if parameters:
            headers["content-type"] = media  # MCP is UTF-8; no charset may say otherwise
        encoding = headers.get("content-encoding", "identity").strip().lower()
        compressed = None
        if encoding not in ("", "identity"):
            compressed = (
                f"{REFUSED_PREFIX}the server compressed its response ({encoding}); ptc reads"
                " MCP responses uncompressed (it asks for Accept-Encoding: identity)"
            )
        stream = _CappedStream(
            response.stream,  # type: ignore[arg-type]
            bounds,
            sse=media.strip().lower() == "text/event-stream",
            refused=compressed,
        )
        return httpx2.Response(
            response.status_code,
            headers=headers,
            stream=stream,
            extensions=response.extensions,
            request=request,
        )

    def _reply(self, method: str, request_id: object) -> _Bounds:
        exchange = self._exchange
        call = method == "tools/call"
        return _Bounds(
            exchange.limits.max_reply_bytes if call else exchange.limit(None),
            exchange.limits.max_reply_values if call else exchange.value_limit(None),
            lambda size: exchange.too_large(request_id, size, more=True),
            lambda values, size: exchange.too_many_values(request_id, values, size, more=True),
        )

    def _event_stream(self, url: str) -> _Bounds:
        limit = self._exchange.value_limit(None)

        def too_many_values(values: int, size: int) -> str:
            return (
                f"{REFUSED_PREFIX}a message on the server's event stream holds more JSON"
                f" values than {limit:,} ({values:,} in its first {size:,} bytes, the rest"
                " dropped)"
            )

        return _Bounds(None, limit, lambda size: "", too_many_values, unanswered=url)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Bounds(NamedTuple):
    """What one response body may hold, and why it is refused when it holds more."""

    max_bytes: int | None  # the whole body's; None: per SSE event, by the SDK
    max_values: int  # one message's: the JSON body's, or one SSE event's
    too_large: Callable[[int], str]  # (the limit) -> why
    too_many_values: Callable[[int, int], str]  # (values, bytes read) -> why
    unanswered: str | None = None  # no request hears of a refusal: logged, naming this URL


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(
        self, inner: httpx2.AsyncByteStream, bounds: _Bounds, *, sse: bool, refused: str | None
    ) -> None:
        self._inner = inner
        self._bounds = bounds
        self._sse = sse
        self._refused = refused

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._checked():
                yield chunk
        except _Refused as exc:
            if self._bounds.unanswered is not None:
                reason = str(exc).removeprefix(REFUSED_PREFIX)
                logger.warning("MCP server at %s: %s", self._bounds.unanswered, reason)
            raise

    async def _checked(self) -> AsyncIterator[bytes]:
        if self._refused is not None:
            raise _Refused(self._refused)
        bounds = self._bounds
        counter = SseValues() if self._sse else JsonValues()
        # SSE costs a Python step per line: smaller pieces keep each one short.
        piece_size = _SSE_PIECE if self._sse else _PIECE
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if bounds.max_bytes is not None and size > bounds.max_bytes:
                raise _Refused(bounds.too_large(bounds.max_bytes))
            for start in range(0, len(chunk), piece_size):
                if start:
                    await anyio.lowlevel.checkpoint()  # the loop runs between pieces
                counter.feed(chunk[start : start + piece_size])
            values = counter.largest if isinstance(counter, SseValues) else counter.values
            if values > bounds.max_values:
                raise _Refused(bounds.too_many_values(values, size))
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


_PIECE: Final = 1 << 16  # of a JSON body counted at a time (a millisecond or two at most)
_SSE_PIECE: Final = 1 << 13  # of an event stream (a few milliseconds at most)
