"""A mount's session with its server: held by one background task, listed, followed on
``list_changed``, and called.

The SDK's transports and sessions must be entered and left in one task, so
:meth:`ServerSession.hold` runs in the runtime's lifetime for as long as the mount lives:
it connects, shakes hands, lists every page of ``tools/list`` (handed to whoever started
it), then re-lists whenever the server announces a new list, until :meth:`stop`. A server
that dies, or a transport that breaks, makes the session *lost* (with the reason); the
calls made after that end ``TOOL_UNAVAILABLE``, and every failure of a call is one of
ptc's, never an exception of the SDK.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import anyio
import mcp.types as types
from anyio.abc import TaskStatus
from mcp import ClientSession, MCPError
from mcp.client.session import IncomingMessage
from pydantic import ValidationError

import ptc

from ._servers import HttpServer, MountError, StdioServer, connection
from ._wire import REFUSED, REFUSED_PREFIX, Exchange, ReplyLimits

__all__ = ("ServerSession", "describe")

_MAX_PAGES = 1000
_RELIST_TIMEOUT_S = 30
logger = logging.getLogger("ptc.mcp")

Relisted = Callable[[list[types.Tool]], Awaitable[bool]]
"""Called with the server's new tool list after ``list_changed``; ``False`` stops following."""


class ServerSession:
    """One mount's session with ``server`` (see the module docstring)."""

    def __init__(
        self,
        server: StdioServer | HttpServer,
        limits: ReplyLimits,
        max_tools: int,
        relisted: Relisted,
    ) -> None:
        self._server = server
        self._limits = limits
        self._max_tools = max_tools
        self._relisted = relisted
        self._session: ClientSession | None = None
        self._server_info: types.Implementation | None = None
        self._lost: str | None = None
        self._stop = anyio.Event()
        self._stopped = anyio.Event()
        self._relist = anyio.Event()
        self._task_started = False

    @property
    def server_info(self) -> types.Implementation | None:
        """The server's ``serverInfo`` from the handshake (``None`` before it)."""
        return self._server_info

    @property
    def connected(self) -> bool:
        """False once the connection is known to be gone (closed, or a call found it dead)."""
        return self._session is not None and self._lost is None

    # -- the task that holds it -------------------------------------------------------------

    async def hold(self, *, task_status: TaskStatus[list[types.Tool]]) -> None:
        """Connect, list, hand the listing to whoever started this task, then keep the
        connection and follow ``list_changed`` until :meth:`stop`."""
        started = False
        self._task_started = True
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(
                    connection(self._server, Exchange(self._limits), self._on_lost)
                )
                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=self._on_message)
                )
                result = await session.initialize()
                self._server_info = result.server_info
                tools = await _list_tools(session, self._max_tools)
                self._session = session
                task_status.started(tools)
                started = True
                async with anyio.create_task_group() as group:
                    group.start_soon(self._follow_list_changes, session)
                    await self._stop.wait()
                    group.cancel_scope.cancel()
        except Exception as exc:
            if not started:
                raise
            # The server died or the transport broke while it was mounted: calls already
            # end as TOOL_UNAVAILABLE; this is only the teardown noticing it.
            logger.debug("MCP server %r: connection ended: %s", self._server.label, exc)
        finally:
            self._session = None
            self._lost = self._lost or "the connection is closed"
            self._stopped.set()

    def stop(self) -> None:
        """Ask :meth:`hold` to disconnect (it may not have started)."""
        self._stop.set()

    async def aclose(self) -> None:
        """Disconnect, and wait (shielded) until :meth:`hold` has left the connection."""
        self._stop.set()
        if self._task_started:
            with anyio.CancelScope(shield=True):
                await self._stopped.wait()

    def _on_lost(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason
            logger.warning("MCP server %r is lost: %s", self._server.label, reason)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist.set()
        elif isinstance(message, Exception):
            label = self._server.label
            logger.warning("MCP server %r sent something unreadable: %s", label, message)

    async def _follow_list_changes(self, session: ClientSession) -> None:
        while True:
            await self._relist.wait()
            self._relist = anyio.Event()
            try:
                with anyio.fail_after(_RELIST_TIMEOUT_S):
                    tools = await _list_tools(session, self._max_tools)
            except Exception as exc:
                logger.warning(
                    "MCP server %r announced a new tool list but listing it failed: %s",
                    self._server.label,
                    describe(exc),
                )
                continue
            if not await self._relisted(tools):
                return

    # -- calls ------------------------------------------------------------------------------

    async def call_tool(self, mcp_name: str, arguments: ptc.FrozenDict) -> types.CallToolResult:
        """One ``tools/call``; a failure is ``ToolUnavailable`` (the connection is gone) or
        a ``RuntimeError`` saying what the server did."""
        label = self._server.label
        session = self._session
        if session is None or self._lost is not None:
            raise ptc.ToolUnavailable(f"MCP server {label!r} is not connected ({self._lost})")
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=mcp_name, arguments=ptc.thaw(arguments))
        )
        try:
            # Not session.call_tool: ptc checks the output schema itself (INVALID_OUTPUT),
            # and a cancelled await here sends notifications/cancelled to the server.
            return await session.send_request(request, types.CallToolResult)
        except MCPError as exc:
            if exc.error.code == types.CONNECTION_CLOSED:
                self._lost = self._lost or "the server closed the connection"
                raise ptc.ToolUnavailable(f"MCP server {label!r}: {self._lost}") from exc
            error = exc.error
            if error.code == REFUSED and error.message.startswith(REFUSED_PREFIX):
                raise RuntimeError(
                    f"MCP server {label!r}: {error.message.removeprefix(REFUSED_PREFIX)}"
                    " (limits: mount(max_reply_bytes=, max_reply_blocks=, max_reply_values=))"
                ) from exc
            message = f"MCP server {label!r}: error {error.code}: {error.message}"
            raise RuntimeError(message) from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            self._lost = "the connection is broken"
            raise ptc.ToolUnavailable(f"MCP server {label!r}: {self._lost}") from exc
        except ValidationError as exc:
            raise RuntimeError(f"MCP server {label!r} returned an invalid result: {exc}") from exc


async def _list_tools(session: ClientSession, max_tools: int) -> list[types.Tool]:
    """Every page of ``tools/list`` (a server that loops its cursor, or lists more than
    ``max_tools`` tools, is an error)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(_MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        if len(tools) > max_tools:
            raise MountError(
                f"the server lists more than {max_tools:,} tools (max_tools={max_tools:,})"
            )
        cursor = page.next_cursor
        if cursor is None:
            return tools
        if cursor in seen:
            raise MountError(f"tools/list repeats the cursor {cursor!r}")
        seen.add(cursor)
    raise MountError(f"tools/list has more than {_MAX_PAGES} pages")


def describe(exc: BaseException) -> str:
    """One line for an exception, looking inside exception groups for the first real one."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError) and exc.error.code == types.CONNECTION_CLOSED:
        return "the server closed the connection (did it exit? its stderr says why)"
    if isinstance(exc, MCPError) and exc.error.code == REFUSED:
        return exc.error.message.removeprefix(REFUSED_PREFIX)
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, MountError) else f"{type(exc).__name__}: {text}"
