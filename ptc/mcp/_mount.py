"""Mount an MCP server's tools into a scope: ptc as an MCP client.

One :class:`Mount` per server: a background task in the runtime's lifetime holds the
connection (the SDK's transports and sessions must be entered and left in one task), the
tools are registered in the scope's own layer, and every call goes through the scope's
pipeline before it reaches the server. The server is hostile until proven otherwise: its
death, garbage, hangs and odd listings end as tagged results or a clear error at mount
time, never as an exception inside the host.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types
from anyio.abc import TaskStatus
from mcp import ClientSession, MCPError
from mcp.client.session import IncomingMessage
from pydantic import ValidationError

import ptc

from ._convert import (
    BAD_SCHEMA_POLICIES,
    BadSchemaPolicy,
    build_definition,
    plain_json,
    tool_return,
)
from ._servers import HttpServer, MountError, StdioServer, connection
from ._wire import REFUSED, REFUSED_PREFIX, REFUSED_SCHEMA, Exchange, ReplyLimits

__all__ = (
    "DEFAULT_MAX_REPLY_BLOCKS",
    "DEFAULT_MAX_REPLY_BYTES",
    "DEFAULT_MAX_TOOLS",
    "DEFAULT_TIMEOUT_SECONDS",
    "Mount",
    "mount",
)

DEFAULT_TIMEOUT_SECONDS = 60.0
"""A mounted call's default ``timeout_seconds``: a server that never answers costs a minute."""
DEFAULT_MAX_REPLY_BYTES = 4 << 20
"""One reply's bytes on the wire (~1M tokens of text: more than a model's context; the
SDK's own limit on a request to a server is the same 4 MiB)."""
DEFAULT_MAX_REPLY_BLOCKS = 1000
"""One reply's content blocks."""
DEFAULT_MAX_TOOLS = 1000
"""Tools one server may list (each costs the host a definition and the SDK a fragment)."""

_MAX_PAGES = 1000
_PREFIX = re.compile(r"[A-Za-z0-9_.-]*")
logger = logging.getLogger("ptc.mcp")


async def mount(
    scope: ptc.Scope,
    server: StdioServer | HttpServer,
    *,
    prefix: str = "",
    timeout_seconds: float | None = DEFAULT_TIMEOUT_SECONDS,
    on_bad_schema: BadSchemaPolicy = "raise",
    connect_timeout_seconds: float = 30,
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    max_reply_blocks: int = DEFAULT_MAX_REPLY_BLOCKS,
    max_tools: int = DEFAULT_MAX_TOOLS,
) -> Mount:
    """Connect to ``server``, list its tools and register them in ``scope``'s own layer.

    Names are ``prefix`` + the MCP name; one that is already visible in ``scope`` is a
    ``ValueError`` naming both. ``timeout_seconds`` is each call's ``timeout_seconds``
    (``TIMEOUT``; ``None``: no limit); ``connect_timeout_seconds`` bounds start, handshake
    and listing. A reply over ``max_reply_bytes`` or ``max_reply_blocks`` fails its call
    (``TOOL_ERROR`` saying which limit); a server listing more than ``max_tools`` tools is a
    :class:`MountError`. ``on_bad_schema``: see :func:`ptc.mcp._convert.build_definition`.
    The mount closes with the runtime, or earlier with ``await mount.aclose()``. Raises
    :class:`MountError` when the server cannot be started, reached or listed. The runtime
    must be entered.
    """
    if not isinstance(scope, ptc.Scope):
        raise ptc.UsageError("mount() takes a ptc.Scope (runtime.root or runtime.scope(...))")
    if not isinstance(server, StdioServer | HttpServer):
        raise ptc.UsageError("mount() takes ptc.mcp.stdio(...) or ptc.mcp.http(...)")
    if on_bad_schema not in BAD_SCHEMA_POLICIES:
        raise ptc.ConfigurationError(
            f"on_bad_schema must be one of {BAD_SCHEMA_POLICIES}, got {on_bad_schema!r}"
        )
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ptc.UsageError(f"prefix must be a string of [A-Za-z0-9_.-], got {prefix!r}")
    for label, value in (
        ("timeout_seconds", timeout_seconds),
        ("connect_timeout_seconds", connect_timeout_seconds),
    ):
        if value is None and label == "timeout_seconds":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ptc.UsageError(f"{label} must be a number")
        if not (math.isfinite(value) and value > 0):
            raise ptc.ConfigurationError(f"{label} must be positive and finite, got {value!r}")
    for label, count in (
        ("max_reply_bytes", max_reply_bytes),
        ("max_reply_blocks", max_reply_blocks),
        ("max_tools", max_tools),
    ):
        if isinstance(count, bool) or not isinstance(count, int):
            raise ptc.UsageError(f"{label} must be an int")
        if count < 1:
            raise ptc.ConfigurationError(f"{label} must be at least 1, got {count!r}")
    limits = ReplyLimits(max_reply_bytes, max_reply_blocks, max_tools)
    mounted = Mount(scope, server, prefix, timeout_seconds, on_bad_schema, limits, max_tools)
    await mounted.connect(connect_timeout_seconds)
    return mounted


class Mount:
    """One mounted MCP server. Made by :func:`mount`; see :attr:`names`, :meth:`aclose`."""

    def __init__(
        self,
        scope: ptc.Scope,
        server: StdioServer | HttpServer,
        prefix: str,
        timeout_seconds: float | None,
        on_bad_schema: BadSchemaPolicy,
        limits: ReplyLimits,
        max_tools: int,
    ) -> None:
        self._scope = scope
        self._server = server
        self._prefix = prefix
        self._timeout = timeout_seconds
        self._policy = on_bad_schema
        self._limits = limits
        self._max_tools = max_tools
        self._session: ClientSession | None = None
        self._server_info: types.Implementation | None = None
        self._lost: str | None = None
        self._registered: dict[str, ptc.Disposer] = {}
        self._skipped: dict[str, str] = {}
        self._notes: dict[str, tuple[str, ...]] = {}
        self._stop = anyio.Event()
        self._stopped = anyio.Event()
        self._relist = anyio.Event()
        self._on_close: ptc.Disposer | None = None
        self._task_started = False
        self._closed = False

    def __repr__(self) -> str:
        return f"<ptc.mcp.Mount {self._server.label!r} in {self._scope!r}: {len(self.names)} tools>"

    # -- what a host reads ----------------------------------------------------------------

    @property
    def names(self) -> tuple[str, ...]:
        """The registered tool names (prefix included), in the server's order."""
        return tuple(self._registered)

    @property
    def skipped(self) -> Mapping[str, str]:
        """MCP tool name -> why it was not registered (``on_bad_schema="skip"``, or a
        problem found when the server changed its list)."""
        return dict(self._skipped)

    @property
    def notes(self) -> Mapping[str, tuple[str, ...]]:
        """Registered name -> what ``lenient_schema`` rewrote (``on_bad_schema="lenient"``)."""
        return dict(self._notes)

    @property
    def server(self) -> StdioServer | HttpServer:
        return self._server

    @property
    def server_info(self) -> Mapping[str, ptc.JSON]:
        """The server's ``serverInfo`` (name, version, ...) from the handshake."""
        info = self._server_info
        if info is None:
            return {}
        return info.model_dump(by_alias=True, mode="json", exclude_none=True)

    @property
    def connected(self) -> bool:
        """False once the connection is known to be gone (closed, or a call found it dead)."""
        return self._session is not None and self._lost is None

    # -- lifetime -------------------------------------------------------------------------

    async def connect(self, timeout_seconds: float) -> None:
        lifetime = self._scope.lifetime
        try:
            with anyio.fail_after(timeout_seconds):
                tools = await lifetime.start(self._hold, name=f"ptc.mcp {self._server.label}")
        except TimeoutError as exc:
            self._stop.set()
            raise MountError(
                f"MCP server {self._server.label!r} did not start, answer the handshake or list"
                f" its tools within {timeout_seconds:g} s"
            ) from exc
        except ptc.ClosedError:
            raise
        except Exception as exc:
            raise MountError(f"MCP server {self._server.label!r}: {_describe(exc)}") from exc
        try:
            await self._install(tools, strict=True)
        except BaseException:
            await self.aclose()
            raise
        self._on_close = lifetime.on_close(self.aclose)

    async def aclose(self) -> None:
        """Unregister the tools and disconnect (calls in flight end ``TOOL_UNAVAILABLE``).
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            self._on_close()
        self._unregister()
        self._stop.set()
        if self._task_started:
            with anyio.CancelScope(shield=True):
                await self._stopped.wait()

    # -- the connection task ----------------------------------------------------------------

    async def _hold(self, *, task_status: TaskStatus[list[types.Tool]]) -> None:
        """Connect, list, hand the listing to :meth:`connect`, then keep the connection and
        follow ``list_changed`` until :meth:`aclose`."""
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
                with anyio.fail_after(30):
                    tools = await _list_tools(session, self._max_tools)
            except Exception as exc:
                logger.warning(
                    "MCP server %r announced a new tool list but listing it failed: %s",
                    self._server.label,
                    _describe(exc),
                )
                continue
            if self._closed or self._scope.closed:
                return
            try:
                await self._install(tools, strict=False)
            except Exception:  # keep the connection and the tools registered so far
                logger.exception(
                    "MCP server %r: re-registering its tools failed", self._server.label
                )

    # -- registration -----------------------------------------------------------------------

    async def _install(self, tools: list[types.Tool], *, strict: bool) -> None:
        """Register ``tools`` in place of the current ones, as one ``tools/change``.

        ``strict`` (at mount): problems raise. Otherwise (``list_changed``) a tool with a
        problem is left out, listed in :attr:`skipped` and logged. The definitions are
        built (schemas checked, validators compiled) in a worker thread: a long list of
        large schemas does not stall the event loop.
        """
        visible = self._scope.view().visible
        definitions, skipped, notes = await anyio.to_thread.run_sync(
            self._build, tools, strict, visible
        )
        for mcp_name, why in skipped.items():
            if not strict:
                logger.warning("MCP server %r: left out %r: %s", self._server.label, mcp_name, why)
        registered: dict[str, ptc.Disposer] = {}
        with self._scope.batch():
            self._unregister()
            try:
                for definition in definitions:
                    registered[definition.name] = self._scope.register(definition)
            except BaseException:
                for dispose in registered.values():
                    dispose()
                raise
        self._registered, self._skipped, self._notes = registered, skipped, notes

    def _build(
        self, tools: list[types.Tool], strict: bool, visible: Mapping[str, ptc.ToolDefinition]
    ) -> tuple[list[ptc.ToolDefinition], dict[str, str], dict[str, tuple[str, ...]]]:
        """The definitions of ``tools``, and those left out (see :meth:`_install`)."""
        policy: BadSchemaPolicy = self._policy if strict or self._policy != "raise" else "skip"
        definitions: list[ptc.ToolDefinition] = []
        skipped: dict[str, str] = {}
        notes: dict[str, tuple[str, ...]] = {}
        seen: set[str] = set()
        for tool in tools:
            name = self._prefix + tool.name
            if tool.name in seen:
                # The server's fault, not the host's: it follows on_bad_schema.
                duplicate = f"the server lists {tool.name!r} more than once"
                if strict and policy == "raise":
                    raise ptc.ScopeError(f"MCP server {self._server.label!r}: {duplicate}")
                skipped[f"{tool.name} (again)"] = duplicate
                continue
            seen.add(tool.name)
            if name == "run_code" or (name in visible and name not in self._registered):
                clash = (
                    f"cannot mount MCP tool {tool.name!r} of {self._server.label!r} as {name!r}:"
                    f" {self._scope!r} already has a tool {name!r}"
                    f" ({_what(visible.get(name))}); mount with another prefix="
                )
                if strict:  # the host's choice of names: always an error at mount time
                    raise ptc.ScopeError(clash)
                skipped[tool.name] = clash
                continue
            refused = [
                f"tool {name!r}: {key}: {schema[REFUSED_SCHEMA]}"
                for key, schema in (
                    ("inputSchema", tool.input_schema),
                    ("outputSchema", tool.output_schema),
                )
                if schema is not None and REFUSED_SCHEMA in schema
            ]
            if refused:  # a schema the wire could not carry (see parse_message)
                if strict and policy != "skip":
                    raise ptc.SchemaError(refused)
                skipped[tool.name] = str(ptc.SchemaError(refused))
                continue
            try:
                built = build_definition(
                    tool,
                    name=name,
                    execute=self._body(tool.name, structured=tool.output_schema is not None),
                    structured=tool.output_schema is not None,
                    timeout_seconds=self._timeout,
                    on_bad_schema=policy,
                )
            except ValueError as exc:  # "lenient" was not enough
                if strict:
                    raise
                skipped[tool.name] = str(exc)
                continue
            if built.definition is None:
                skipped[tool.name] = built.problem or "not accepted"
                continue
            definitions.append(built.definition)
            if built.notes:
                notes[name] = built.notes
        return definitions, skipped, notes

    def _unregister(self) -> None:
        registered, self._registered = self._registered, {}
        with self._scope.batch():
            for dispose in registered.values():
                dispose()

    # -- calls ------------------------------------------------------------------------------

    def _body(
        self, mcp_name: str, *, structured: bool
    ) -> Callable[[ptc.FrozenDict, ptc.ToolContext], Any]:
        async def execute(arguments: ptc.FrozenDict, context: ptc.ToolContext) -> object:
            result = await self._call(mcp_name, arguments)
            return tool_return(result, structured=structured)

        return execute

    async def _call(self, mcp_name: str, arguments: ptc.FrozenDict) -> types.CallToolResult:
        label = self._server.label
        session = self._session
        if session is None or self._lost is not None:
            raise ptc.ToolUnavailable(f"MCP server {label!r} is not connected ({self._lost})")
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=mcp_name, arguments=plain_json(arguments))
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
                    " (limits: mount(max_reply_bytes=, max_reply_blocks=))"
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


def _describe(exc: BaseException) -> str:
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


def _what(definition: ptc.ToolDefinition | None) -> str:
    if definition is None:
        return "reserved"
    return json.dumps(definition.description[:60])
