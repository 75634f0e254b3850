"""Mount an MCP server's tools into a scope: ptc as an MCP client.

One :class:`Mount` per server: a background task in the runtime's lifetime holds the
session (:class:`~ptc.mcp._session.ServerSession`), the listed tools become definitions
(:class:`~ptc.mcp._definitions.ListingBuilder`) registered in the scope's own layer, and
every call goes through the scope's pipeline before it reaches the server. The server is
hostile until proven otherwise: its death, garbage, hangs and odd listings end as tagged
results or a clear error at mount time, never as an exception inside the host.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types

import ptc

from ._convert import BAD_SCHEMA_POLICIES, BadSchemaPolicy, tool_return
from ._definitions import ListingBuilder
from ._servers import HttpServer, MountError, StdioServer
from ._session import ServerSession, describe
from ._wire import ReplyLimits

__all__ = (
    "DEFAULT_MAX_REPLY_BLOCKS",
    "DEFAULT_MAX_REPLY_BYTES",
    "DEFAULT_MAX_REPLY_VALUES",
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
DEFAULT_MAX_REPLY_VALUES = 25_000
"""One reply's JSON values (every object, array, string, number, true, false and null in
it), counted on its bytes before anything parses it. It admits a 4 MiB text (8 values),
1,000 text blocks (3,005), 1,000 resource links with annotations (14,005), a table of
2,000 rows of 10 columns as ``structuredContent`` beside its JSON text (22,010) or of
3,000 rows of 7; about a model's whole context, as a value is a token or more. Each value
costs the host's event loop, with the GIL held, from a fraction of a microsecond (a number)
to a few (an empty array: copied by the SDK's validation, frozen by the pipeline, walked by
the garbage collector): this bounds how long one reply can stall it. At the limit, on two
shared cores: 14-31 ms for zeros or a table, up to 0.22 s for 25,000 empty arrays
(``benchmarks/results/mcp_hostile.md``)."""
DEFAULT_MAX_TOOLS = 1000
"""Tools one server may list (each costs the host a definition and the SDK a fragment)."""

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
    max_reply_values: int = DEFAULT_MAX_REPLY_VALUES,
    max_tools: int = DEFAULT_MAX_TOOLS,
) -> Mount:
    """Connect to ``server``, list its tools and register them in ``scope``'s own layer.

    Names are ``prefix`` + the MCP name; one that is already visible in ``scope`` is a
    ``ValueError`` naming both. ``timeout_seconds`` is each call's ``timeout_seconds``
    (``TIMEOUT``; ``None``: no limit); ``connect_timeout_seconds`` bounds start, handshake
    and listing. A reply over ``max_reply_bytes``, ``max_reply_blocks`` or
    ``max_reply_values`` (JSON values, counted on its bytes before anything parses it)
    fails its call (``TOOL_ERROR`` saying which limit); a server listing more than
    ``max_tools`` tools is a :class:`MountError`. ``on_bad_schema``: what a tool whose
    schema ptc cannot accept (or whose name is listed twice or outside the name pattern)
    does: ``"raise"`` (the default) raises at mount, ``"lenient"`` retries once with
    :func:`ptc.lenient_schema` and raises if that is not enough, ``"skip"`` leaves the
    tool out (``Mount.skipped`` says why).
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
        ("max_reply_values", max_reply_values),
        ("max_tools", max_tools),
    ):
        if isinstance(count, bool) or not isinstance(count, int):
            raise ptc.UsageError(f"{label} must be an int")
        if count < 1:
            raise ptc.ConfigurationError(f"{label} must be at least 1, got {count!r}")
    limits = ReplyLimits(max_reply_bytes, max_reply_blocks, max_reply_values, max_tools)
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
        self._session = ServerSession(server, limits, max_tools, self._relisted)
        self._builder = ListingBuilder(
            server.label, scope, prefix, on_bad_schema, timeout_seconds, self._body
        )
        self._registered: dict[str, ptc.Disposer] = {}
        self._skipped: dict[str, str] = {}
        self._notes: dict[str, tuple[str, ...]] = {}
        self._on_close: ptc.Disposer | None = None
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
        """Where the mounted server is (what ``mount()`` was given)."""
        return self._server

    @property
    def server_info(self) -> Mapping[str, ptc.JSON]:
        """The server's ``serverInfo`` (name, version, ...) from the handshake."""
        info = self._session.server_info
        if info is None:
            return {}
        return info.model_dump(by_alias=True, mode="json", exclude_none=True)

    @property
    def connected(self) -> bool:
        """False once the connection is known to be gone (closed, or a call found it dead)."""
        return self._session.connected

    # -- lifetime -------------------------------------------------------------------------

    async def connect(self, timeout_seconds: float) -> None:
        """Start the server's session and register its tools (``mount()`` does; raises
        :class:`MountError` when it cannot be started, reached or listed in time)."""
        lifetime = self._scope.lifetime
        try:
            with anyio.fail_after(timeout_seconds):
                tools = await lifetime.start(
                    self._session.hold, name=f"ptc.mcp {self._server.label}"
                )
        except TimeoutError as exc:
            self._session.stop()
            raise MountError(
                f"MCP server {self._server.label!r} did not start, answer the handshake or list"
                f" its tools within {timeout_seconds:g} s"
            ) from exc
        except ptc.ClosedError:
            raise
        except Exception as exc:
            raise MountError(f"MCP server {self._server.label!r}: {describe(exc)}") from exc
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
        await self._session.aclose()

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
            lambda: self._builder.build(
                tools, strict=strict, visible=visible, registered=self._registered
            )
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

    async def _relisted(self, tools: list[types.Tool]) -> bool:
        """The server announced a new tool list (``list_changed``): register it, keeping the
        tools registered so far if that fails. ``False`` once the mount or scope closed."""
        if self._closed or self._scope.closed:
            return False
        try:
            await self._install(tools, strict=False)
        except Exception:  # keep the connection and the tools registered so far
            logger.exception("MCP server %r: re-registering its tools failed", self._server.label)
        return True

    def _unregister(self) -> None:
        registered, self._registered = self._registered, {}
        with self._scope.batch():
            for dispose in registered.values():
                dispose()

    # -- calls ------------------------------------------------------------------------------

    def _body(
        self, mcp_name: str, structured: bool
    ) -> Callable[[ptc.FrozenDict, ptc.ToolContext], Any]:
        session = self._session

        async def execute(arguments: ptc.FrozenDict, context: ptc.ToolContext) -> object:
            result = await session.call_tool(mcp_name, arguments)
            return tool_return(result, structured=structured)

        return execute
