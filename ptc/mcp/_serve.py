"""Serve a scope as an MCP server: ptc as an MCP server.

``tools/list`` is the scope's ``model_tools(format="mcp")``; ``tools/call`` is
``scope.call`` through the whole pipeline. Each call runs in the server's own task group
(its lifespan), not in the request's task: a client's ``notifications/cancelled`` fires the
call's :class:`ptc.CancelSignal`, so the pipeline ends the call the way it ends any aborted
call (``ABORTED``, the worker killed, listeners run) instead of being torn down mid-stage.
A ``run_code`` program's output reaches the client while it runs (the ``code/output``
event): as progress notifications when the request asked for progress, and as log
messages (logger ``ptc/code-output``).

**Sessions.** Served a :class:`ptc.Session`, every client shares that session. With
``sessions=True`` (what ``ptc serve`` does), each MCP client session (the connection over
stdio, an ``mcp-session-id`` over streamable HTTP) gets a :class:`ptc.Session` of its own,
made on its first request and closed with the connection or the server; over HTTP the SDK
ends idle MCP sessions without telling the server, so those expire by their ``ttl``. One
that expired or was evicted is replaced by a new one after its ``SESSION_EXPIRED``
result. A client of the stateless 2026-07-28 protocol has no MCP session: it is served the
scope itself (each run starts empty).
"""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import mcp.types as types
from anyio.abc import TaskGroup
from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

import ptc

from ._admission import Admission, default_max_runs
from ._convert import ERROR_META_KEY, call_tool_result
from ._http_auth import DISCONNECTED

__all__ = ("server",)

logger = logging.getLogger("ptc.mcp")

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


Served = ptc.Scope | ptc.Session
"""What a server serves: a scope, or a session of one (a view of its scope)."""


class _ClientSessions:
    """One :class:`ptc.Session` per MCP client session (see the module docstring)."""

    def __init__(self, scope: Served) -> None:
        self._scope = scope
        self._sessions: OrderedDict[str, ptc.Session] = OrderedDict()

    def of(self, ctx: ServerRequestContext[_Running]) -> Served:
        """The session of the client making this request (the scope itself for a client
        that has no MCP session: the stateless 2026 protocol)."""
        if isinstance(self._scope, ptc.Session):
            return self._scope
        client = _client_key(ctx)
        if client is None:
            return self._scope
        found = self._sessions.get(client)
        if found is None:
            found = self._sessions[client] = self._scope.session()
            while len(self._sessions) > _MAX_SESSIONS:  # the oldest client is long gone
                self._sessions.popitem(last=False)[1].discard("its MCP client went away")
        self._sessions.move_to_end(client)
        return found

    def expired(self, ctx: ServerRequestContext[_Running]) -> None:
        """The client's session answered ``SESSION_EXPIRED``: its next call gets a new one."""
        client = _client_key(ctx)
        if client is not None:
            self._sessions.pop(client, None)

    def close(self) -> None:
        """The server (or the stdio connection) stopped: every client's session is closed."""
        for session in self._sessions.values():
            session.discard("closed with its MCP client session")
        self._sessions.clear()


def _client_key(ctx: ServerRequestContext[_Running]) -> str | None:
    """Who a request comes from: its ``mcp-session-id`` over HTTP, the one client of a
    stdio connection, ``None`` for an HTTP request without an MCP session."""
    request_scope = getattr(ctx.request, "scope", None)
    if not isinstance(request_scope, dict):
        return "stdio"
    for name, value in request_scope.get("headers", ()):
        if name == b"mcp-session-id":
            return "http:" + bytes(value).decode("latin-1")
    return None


def server(
    scope: Served,
    *,
    name: str | None = None,
    max_concurrent_runs: int | None = None,
    max_queued_runs: int | None = None,
    sessions: bool = False,
) -> Server[Any]:
    """An ``mcp.server.lowlevel.Server`` serving ``scope`` (see the module docstring).

    Run it as any low-level server (``server.run(...)``, ``server.streamable_http_app()``),
    or use :func:`serve`. A ``tools/change`` that affects the scope sends
    ``notifications/tools/list_changed`` (to handshake-era sessions, and to 2026-era
    ``subscriptions/listen`` streams). At most ``max_concurrent_runs`` ``run_code`` calls
    run at once (default: two per CPU this process may use, and no more than half the
    machine's or its cgroup's memory allows at the scope's ``Limits.memory_mib`` each); up to
    ``max_queued_runs`` more wait (default: four times as many); the rest are answered
    at once with an ``isError`` result (``TOOL_UNAVAILABLE``, "busy"). A call whose HTTP
    client disconnects is cancelled (its signal fires). ``sessions=True`` gives each MCP
    client session a :class:`ptc.Session` of its own (see the module docstring).
    """
    if not isinstance(scope, ptc.Scope | ptc.Session):
        raise ptc.UsageError("server() takes a ptc.Scope or a ptc.Session")
    clients = _ClientSessions(scope) if sessions or isinstance(scope, ptc.Session) else None
    admission = _admission(scope, max_concurrent_runs, max_queued_runs)
    bus = InMemorySubscriptionBus()
    chain = (scope.scope if isinstance(scope, ptc.Session) else scope).lineage

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
                if clients is not None:
                    clients.close()
                for signal in list(running.signals):
                    signal.cancel("the MCP server is shutting down")

    async def list_tools(
        ctx: ServerRequestContext[_Running], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        target = clients.of(ctx) if clients is not None else scope
        await target.prepare()  # the SDK in run_code's description, built off the event loop
        specs = target.model_tools(format="mcp")
        return types.ListToolsResult(tools=[types.Tool.model_validate(s) for s in specs])

    async def call_tool(
        ctx: ServerRequestContext[_Running], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        running = ctx.lifespan_context
        target = clients.of(ctx) if clients is not None else scope
        definition = target.view().visible.get(params.name)
        # run_code is the one tool whose calls are admitted (each starts a worker).
        is_run = params.name == ptc.RUN_CODE and definition is not None
        if is_run and (busy := admission.reserve()) is not None:
            return _refused(f"ptc serve is {busy}")
        signal = ptc.CancelSignal()
        outcome: list[ptc.ToolResult | BaseException] = []
        done = anyio.Event()
        call_id = f"mcp_{secrets.token_hex(6)}"

        async def run() -> None:
            try:
                arguments = params.arguments or {}
                async with admission.slot(signal) if is_run else nullcontext():
                    outcome.append(
                        await target.call(params.name, arguments, call_id=call_id, signal=signal)
                    )
            except Exception as exc:  # a host bug; the pipeline never raises for tool failures
                logger.exception("tools/call %r failed inside ptc", params.name)
                outcome.append(exc)
            finally:
                running.signals.discard(signal)
                done.set()

        async def watch_client(gone: anyio.Event) -> None:
            await gone.wait()
            signal.cancel("the MCP client disconnected")

        running.signals.add(signal)
        dispose = _forward_output(target, ctx, call_id) if params.name == ptc.RUN_CODE else None
        running.group.start_soon(run)
        async with anyio.create_task_group() as watching:
            gone = _disconnected(ctx)
            if gone is not None:  # over HTTP: the client may go away without a word
                watching.start_soon(watch_client, gone)
            try:
                await done.wait()
            except anyio.get_cancelled_exc_class():
                signal.cancel("cancelled by the MCP client")
                raise
            finally:
                watching.cancel_scope.cancel()
                if dispose is not None:
                    dispose()
        result = outcome[0]
        if isinstance(result, BaseException):
            raise MCPError(types.INTERNAL_ERROR, f"ptc failed to run {params.name!r}: {result}")
        if clients is not None and result.error is not None:
            if result.error.code == "SESSION_EXPIRED":
                clients.expired(ctx)
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


def _admission(
    scope: Served, max_concurrent_runs: int | None, max_queued_runs: int | None
) -> Admission:
    for label, value, least in (
        ("max_concurrent_runs", max_concurrent_runs, 1),
        ("max_queued_runs", max_queued_runs, 0),
    ):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ptc.UsageError(f"{label} must be an int")
        if value < least:
            raise ptc.ConfigurationError(f"{label} must be at least {least}, got {value!r}")
    running = max_concurrent_runs or default_max_runs(scope.code_options()[2].memory_mib)
    queued = max_queued_runs if max_queued_runs is not None else 4 * running
    return Admission(running, queued)


def _disconnected(ctx: ServerRequestContext[_Running]) -> anyio.Event | None:
    """The event set when the call's HTTP client disconnects (``None`` off HTTP)."""
    request_scope = getattr(ctx.request, "scope", None)
    gone = request_scope.get(DISCONNECTED) if isinstance(request_scope, dict) else None
    return gone if isinstance(gone, anyio.Event) else None


def _refused(message: str) -> types.CallToolResult:
    """An ``isError`` result for a call ptc did not run (``TOOL_UNAVAILABLE``)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"Error: {message}")],
        is_error=True,
        _meta={ERROR_META_KEY: {"code": "TOOL_UNAVAILABLE", "message": message}},
    )


def _forward_output(
    scope: Served, ctx: ServerRequestContext[_Running], call_id: str
) -> ptc.Disposer:
    """A run's output, as it prints, to the client: progress notifications (when the client
    asked for progress) and log messages (logger ``ptc/code-output``, where the client's
    protocol lets the server send them)."""
    token = ctx.meta.get("progress_token") if ctx.meta else None
    sent = [0]

    async def forward(chunk: Mapping[str, str]) -> None:
        text = chunk["text"]
        sent[0] += len(text)
        if token is not None:
            await ctx.session.send_progress_notification(token, float(sent[0]), message=text)
        await ctx.session.send_log_message(
            "info", text, logger="ptc/code-output", related_request_id=ctx.request_id
        )

    return scope.on_output(call_id, forward)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ptc")
    except PackageNotFoundError:
        return "0"
