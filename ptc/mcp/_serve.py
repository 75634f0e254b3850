"""Serve a scope as an MCP server: ptc as an MCP server.

``tools/list`` is the scope's ``model_tools(format="mcp")``; ``tools/call`` is
``scope.call`` through the whole pipeline. Each call runs in the server's own task group
(its lifespan), not in the request's task: a client's ``notifications/cancelled`` fires the
call's :class:`ptc.CancelSignal`, so the pipeline ends the call the way it ends any aborted
call (``ABORTED``, the worker killed, listeners run) instead of being torn down mid-stage.
A ``run_code`` program's output reaches the client while it runs (the ``code/output``
event): as progress notifications when the request asked for progress, and as log
messages (logger ``ptc/code-output``).
"""

from __future__ import annotations

import logging
import secrets
import socket
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.lowlevel
import mcp.types as types
import uvicorn
from anyio.abc import TaskGroup
from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

import ptc

from ._convert import call_tool_result

__all__ = ("Transport", "serve", "server")

logger = logging.getLogger("ptc.mcp")

Transport = Literal["stdio", "streamable-http"]
TRANSPORTS: tuple[Transport, ...] = ("stdio", "streamable-http")
# The SDK tells a server neither when a handshake-era connection ends nor (always) fails a
# notification to one that has: remember the most recent ones only, so a long-running HTTP
# server does not keep every client it ever had.
_MAX_SESSIONS = 1024


@dataclass(eq=False)
class _Running:
    """What one run of the server (its lifespan) holds: the calls' task group, the
    handshake-era sessions to tell about tool changes, the signals of calls in flight."""

    group: TaskGroup
    sessions: deque[ServerSession] = field(default_factory=lambda: deque(maxlen=_MAX_SESSIONS))
    signals: set[ptc.CancelSignal] = field(default_factory=set)
    announcing: bool = False


class _PtcServer(Server[_Running]):
    """The SDK's low-level server, advertising ``tools.listChanged`` by default."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


def server(scope: ptc.Scope, *, name: str | None = None) -> Server[Any]:
    """An ``mcp.server.lowlevel.Server`` serving ``scope`` (see the module docstring).

    Run it as any low-level server (``server.run(...)``, ``server.streamable_http_app()``),
    or use :func:`serve`. A ``tools/change`` that affects the scope sends
    ``notifications/tools/list_changed`` (to handshake-era sessions, and to 2026-era
    ``subscriptions/listen`` streams).
    """
    if not isinstance(scope, ptc.Scope):
        raise ptc.UsageError("server() takes a ptc.Scope")
    bus = InMemorySubscriptionBus()
    chain = _chain(scope)

    @asynccontextmanager
    async def lifespan(_: Server[_Running]) -> AsyncIterator[_Running]:
        async with anyio.create_task_group() as group:
            running = _Running(group)

            def changed(changed_scope: ptc.Scope) -> None:
                # Only a change on the scope or an ancestor changes what the scope sees.
                if any(changed_scope is s for s in chain) and not running.announcing:
                    running.announcing = True
                    group.start_soon(_announce, running, bus)

            dispose = chain[0].on("tools/change", changed)
            try:
                yield running
            finally:
                dispose()
                for signal in list(running.signals):
                    signal.cancel("the MCP server is shutting down")

    async def list_tools(
        ctx: ServerRequestContext[_Running], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        await scope.prepare()  # the SDK in run_code's description, built off the event loop
        specs = scope.model_tools(format="mcp")
        return types.ListToolsResult(tools=[types.Tool.model_validate(s) for s in specs])

    async def call_tool(
        ctx: ServerRequestContext[_Running], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        running = ctx.lifespan_context
        definition = scope.view().visible.get(params.name)
        signal = ptc.CancelSignal()
        outcome: list[ptc.ToolResult | BaseException] = []
        done = anyio.Event()
        call_id = f"mcp_{secrets.token_hex(6)}"

        async def run() -> None:
            try:
                arguments = params.arguments or {}
                outcome.append(
                    await scope.call(params.name, arguments, call_id=call_id, signal=signal)
                )
            except Exception as exc:  # a host bug; the pipeline never raises for tool failures
                logger.exception("tools/call %r failed inside ptc", params.name)
                outcome.append(exc)
            finally:
                running.signals.discard(signal)
                done.set()

        running.signals.add(signal)
        dispose = _forward_output(scope, ctx, call_id) if params.name == "run_code" else None
        running.group.start_soon(run)
        try:
            await done.wait()
        except anyio.get_cancelled_exc_class():
            signal.cancel("cancelled by the MCP client")
            raise
        finally:
            if dispose is not None:
                dispose()
        result = outcome[0]
        if isinstance(result, BaseException):
            raise MCPError(types.INTERNAL_ERROR, f"ptc failed to run {params.name!r}: {result}")
        return call_tool_result(result, definition)

    async def track_sessions(
        ctx: ServerRequestContext[_Running, Any], call_next: CallNext
    ) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method == "notifications/initialized":
            # A handshake-era connection: it hears about tool changes on its own stream.
            ctx.lifespan_context.sessions.append(ctx.session)
        return result

    served = _PtcServer(
        name or f"ptc {scope.path}",
        version=_version(),
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=ListenHandler(bus),
    )
    served.middleware.append(track_sessions)
    return served


async def serve(
    scope: ptc.Scope,
    transport: Transport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    ready: Callable[[str], object] | None = None,
) -> None:
    """Serve ``scope`` until cancelled (or, on stdio, until the client closes stdin).

    ``transport="streamable-http"`` listens on ``host:port`` (``port=0``: any free port)
    at path ``/mcp``; ``ready(url)`` is called once it accepts connections.
    """
    if transport not in TRANSPORTS:
        raise ptc.ConfigurationError(f"transport must be one of {TRANSPORTS}, got {transport!r}")
    served = server(scope)
    if transport == "stdio":
        async with stdio_server() as (read, write):
            await served.run(read, write, served.create_initialization_options())
        return
    app = served.streamable_http_app(host=host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        bound_port = sock.getsockname()[1]
        # A bounded graceful shutdown: open streams (a client's SSE GET) are closed after it.
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=3
        )
        runner = uvicorn.Server(config)
        stopped = anyio.Event()

        async def run() -> None:
            # Shielded: a cancelled serve() asks uvicorn to stop (below) instead of
            # cancelling it mid-request, so sessions close and the lifespan ends in order.
            with anyio.CancelScope(shield=True):
                try:
                    await runner.serve([sock])
                finally:
                    stopped.set()

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            try:
                # uvicorn exposes readiness only as a flag.
                while not runner.started and not stopped.is_set():  # noqa: ASYNC110
                    await anyio.sleep(0.01)
                if ready is not None and runner.started:
                    shown = f"[{host}]" if family == socket.AF_INET6 else host
                    ready(f"http://{shown}:{bound_port}/mcp")
                await stopped.wait()
            except anyio.get_cancelled_exc_class():
                runner.should_exit = True
                raise
    finally:
        sock.close()


async def _announce(running: _Running, bus: InMemorySubscriptionBus) -> None:
    """Tell every listener the tool list changed (one message per burst of changes)."""
    await anyio.lowlevel.checkpoint()
    running.announcing = False
    await bus.publish(ToolsListChanged())
    for session in list(running.sessions):
        try:
            await session.send_tool_list_changed()
        except Exception as exc:  # the client went away: forget it
            logger.debug("dropping an MCP session that cannot be notified: %s", exc)
            running.sessions.remove(session)


def _forward_output(
    scope: ptc.Scope, ctx: ServerRequestContext[_Running], call_id: str
) -> ptc.Disposer:
    """A run's output, as it prints, to the client: progress notifications (when the client
    asked for progress) and log messages (logger ``ptc/code-output``, where the client's
    protocol lets the server send them)."""
    token = ctx.meta.get("progress_token") if ctx.meta else None
    sent = [0]

    async def forward(chunk: Mapping[str, str]) -> None:
        if chunk["call_id"] != call_id:
            return
        text = chunk["text"]
        sent[0] += len(text)
        if token is not None:
            await ctx.session.send_progress_notification(token, float(sent[0]), message=text)
        await ctx.session.send_log_message(
            "info", text, logger="ptc/code-output", related_request_id=ctx.request_id
        )

    return scope.on("code/output", forward)


def _chain(scope: ptc.Scope) -> list[ptc.Scope]:
    """The scope and its ancestors, root first."""
    chain = [scope]
    while (parent := chain[-1].parent) is not None:
        chain.append(parent)
    return chain[::-1]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ptc")
    except PackageNotFoundError:
        return "0"
