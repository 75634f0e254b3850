"""What a mount lets through from a server's wire: messages read leniently, replies bounded.

A server is another party's code (DESIGN section 9, "Hostile peers"). Whatever the
transport, every message between the server and the SDK's ``ClientSession`` passes
:func:`guarded`: it remembers which request each id belongs to and answers a reply that is
over its limits with an error in that request's name (the call fails with a clear message,
the connection stays). The transports bound each message in bytes and in JSON values
(:mod:`ptc.mcp._values`) before anything parses it, with the limits :class:`Exchange`
gives; the stdio transport (:mod:`ptc.mcp._stdio`) also uses :func:`parse_message` and
:func:`attributed_id` for lines it reads itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final

import anyio
import mcp.types as types
import pydantic_core

# The stream protocols of the SDK's transports; not re-exported from a public module.
from mcp.client._transport import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

__all__ = (
    "MAX_MESSAGE_BYTES",
    "REFUSED",
    "REFUSED_PREFIX",
    "REFUSED_SCHEMA",
    "VALUES_PER_TOOL",
    "LARGEST_SCHEMA",
    "ReadStream",
    "WriteStream",
    "Exchange",
    "ReplyLimits",
    "attributed_id",
    "guarded",
    "parse_message",
    "refusal",
    "screen_listing",
)

MAX_MESSAGE_BYTES: Final = 16 << 20
"""The most one message other than a call's reply may take (a page of a tool list, say:
1,000 tools of 16 KiB each)."""
VALUES_PER_TOOL: Final = 100
"""The JSON values one message other than a call's reply may hold, per tool the mount
admits: a page of a tool list of ``max_tools`` tools of 100 values each (100,000 by
default; mcp-server-git's tools hold 25 on average, mcp-server-time's 55), and never less
than ``max_reply_values``. Each value costs the event loop, with the GIL held, from a
fraction of a microsecond (a number) to a few (an object or array: the SDK's own
validation of the result, the cyclic garbage collector), so this bounds the stall of a
listing as ``max_reply_values`` bounds a call's (``benchmarks/results/mcp_hostile.md``)."""
REFUSED: Final = -32097
"""The JSON-RPC error code of a reply ptc refused on the caller's behalf (its message says
why); a server sending this code itself only gets a ``TOOL_ERROR`` with its message."""
REFUSED_PREFIX: Final = "ptc refused the reply: "
REFUSED_SCHEMA: Final = "x-ptc-refused"
"""The key of the marker that stands in a listing for a schema ptc could not read (its
value says why); the mount treats the tool as one with a bad schema."""
_DEEPEST: Final = 200  # JSON levels the SDK's own checks of a result still serialise
LARGEST_SCHEMA: Final = 1 << 20
"""The largest schema a listing carries on to the SDK (ptc's own limit on a schema)."""
_CANCELLED: Final = "notifications/cancelled"
_MAX_IN_FLIGHT: Final = 10_000


@dataclass(frozen=True, slots=True)
class ReplyLimits:
    """The bounds of one reply to ``tools/call`` (``mount``'s knobs)."""

    max_reply_bytes: int
    max_reply_blocks: int
    max_reply_values: int
    max_tools: int


class Exchange:
    """The requests in flight on one connection: id -> method (ids as the SDK sent them)."""

    def __init__(self, limits: ReplyLimits) -> None:
        self.limits = limits
        self._methods: dict[Any, str] = {}

    def sent(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self._methods[message.id] = message.method
            while len(self._methods) > _MAX_IN_FLIGHT:  # forget the oldest
                del self._methods[next(iter(self._methods))]
        elif isinstance(message, types.JSONRPCNotification) and message.method == _CANCELLED:
            # An abandoned request (a timeout, a cancel): its late reply is nobody's.
            self._methods.pop((message.params or {}).get("requestId"), None)

    def answered(self, request_id: Any) -> str | None:
        return self._methods.pop(request_id, None)

    def method(self, request_id: Any) -> str | None:
        return self._methods.get(request_id)

    def limit(self, request_id: Any) -> int:
        """How many bytes the reply to ``request_id`` may take."""
        if self.method(request_id) == "tools/call":
            return self.limits.max_reply_bytes
        return max(MAX_MESSAGE_BYTES, self.limits.max_reply_bytes)

    def value_limit(self, request_id: Any) -> int:
        """How many JSON values the reply to ``request_id`` may hold."""
        if self.method(request_id) == "tools/call":
            return self.limits.max_reply_values
        return max(VALUES_PER_TOOL * self.limits.max_tools, self.limits.max_reply_values)

    def too_large(self, request_id: Any, size: int, *, more: bool = False) -> str:
        """Why the reply to ``request_id`` (``size`` bytes, or more) is refused."""
        method = self.method(request_id)
        what = "the reply" if method is None else f"the reply to {method}"
        if method == "tools/call":
            limit = f"max_reply_bytes={self.limits.max_reply_bytes:,}"
        else:
            limit = f"{self.limit(request_id):,} bytes"
        if more:
            return f"{REFUSED_PREFIX}{what} is over {limit} ({size:,} bytes read, the rest dropped)"
        return f"{REFUSED_PREFIX}{what} is {size:,} bytes, over {limit}"

    def too_many_values(self, request_id: Any, values: int, size: int, *, more: bool) -> str:
        """Why the reply to ``request_id`` (``values`` JSON values counted in its first
        ``size`` bytes; ``more``: the rest was not read) is refused."""
        method = self.method(request_id)
        what = "the reply" if method is None else f"the reply to {method}"
        if method == "tools/call":
            limit = f"max_reply_values={self.limits.max_reply_values:,}"
        else:
            limit = (
                f"{self.value_limit(request_id):,} ({VALUES_PER_TOOL} per tool of"
                f" max_tools={self.limits.max_tools:,})"
            )
        if more:
            return (
                f"{REFUSED_PREFIX}{what} holds more JSON values than {limit}"
                f" ({values:,} in its first {size:,} bytes, the rest dropped)"
            )
        return f"{REFUSED_PREFIX}{what} holds {values:,} JSON values, over {limit}"


def refusal(request_id: Any, reason: str) -> SessionMessage:
    """The error reply ptc hands the session in place of a reply it refused."""
    error = types.ErrorData(code=REFUSED, message=reason)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def parse_message(data: bytes | bytearray, listing: Callable[[Any], bool]) -> types.JSONRPCMessage:
    """One JSON-RPC message from a line of the wire; invalid UTF-8 is replaced (U+FFFD).

    A line nested deeper than the SDK's parser goes is read by the standard library only
    when it answers a ``tools/list`` request (``listing(id)``), so that :func:`guarded`
    can report its too-deep schemas tool by tool instead of losing the whole list. Raises
    ``ValueError`` saying why it is not a message.

    The cyclic garbage collector runs as the host set it: the collector is one per process,
    and pausing it from the thread that parses paused it for every thread (and two
    overlapping parses resumed it under each other). What it cost: a page of 100,000 empty
    arrays parses in about 20 ms without collections, and a full collection it sets off in
    a host of 300,000 objects adds about 180 ms; end to end (the mount, the SDK's own
    validation on the event loop) the stall of such a page was the same with and without
    the pause (docs/mcp.md, "Hostile servers"). The caps on a message's JSON values bound
    what one reply can make the collector do.
    """
    return _parsed(bytes(data).decode("utf-8", "replace"), listing)


def _parsed(text: str, listing: Callable[[Any], bool]) -> types.JSONRPCMessage:
    try:
        # Parsed to plain values, then validated: four times faster than validate_json on
        # a reply of many small values (the parser holds the GIL while it runs).
        value = pydantic_core.from_json(text)
    except ValueError as exc:
        if "recursion limit" not in str(exc):
            raise
    else:
        return types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
    if not (
        isinstance(value, dict)
        and isinstance(value.get("result"), dict)
        and listing(value.get("id"))
    ):
        raise ValueError("the message is nested too deeply to read")
    return types.jsonrpc_message_adapter.validate_python(value, by_name=False)


def screen_listing(result: dict[str, Any], max_tools: int) -> str | None:
    """Check a ``tools/list`` page before the SDK copies and validates it on the event
    loop: too many tools is a refusal (returned: why); a schema larger or deeper than ptc
    could use is replaced by a marker (:data:`REFUSED_SCHEMA`, its value says why), which
    the mount reports for that tool alone. Runs in a worker thread."""
    tools = result.get("tools")
    if not isinstance(tools, list):
        return None
    if len(tools) > max_tools:
        listed = f"{len(tools):,} tools"
        return f"{REFUSED_PREFIX}the server lists {listed}, over max_tools={max_tools:,}"
    for tool in tools:
        for key in ("inputSchema", "outputSchema"):
            schema = tool.get(key) if isinstance(tool, dict) else None
            if isinstance(schema, dict) and (why := _unusable(schema)) is not None:
                tool[key] = {"type": "object", REFUSED_SCHEMA: why}
    return None


def _unusable(schema: dict[str, Any]) -> str | None:
    try:
        size = len(json.dumps(schema, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError, RecursionError):
        size = 0  # not JSON, or too deep to write: the depth check below, or ptc, says why
    if size > LARGEST_SCHEMA:
        return f"{size:,} bytes as JSON; more than the {LARGEST_SCHEMA:,} a schema may have"
    if _deeper_than(schema, _DEEPEST):
        return f"nested deeper than {_DEEPEST} levels (more than the MCP SDK reads)"
    return None


def _deeper_than(value: object, limit: int) -> bool:
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)
    return False


# -- which request an unreadable line answers --------------------------------------------

_OPEN = re.compile(rb"\s*\{")
_SCALAR = rb'-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|"(?:[^"\\]|\\.)*"|true|false|null'
_MEMBER = re.compile(rb'\s*("(?:[^"\\]|\\.)*")\s*:\s*(' + _SCALAR + rb")\s*([,}])")
_LAST_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$')


def attributed_id(head: bytes, tail: bytes) -> Any:
    """The top-level ``id`` of a JSON-RPC line seen only by its first and last bytes, or
    ``None``: from the scalar members that open the object (``{"jsonrpc":"2.0","id":7,``)
    or from the member that closes it (``...,"id":7}``, as some SDKs order them)."""
    opened = _OPEN.match(head)
    if opened is None:
        return None
    position = opened.end()
    while (member := _MEMBER.match(head, position)) is not None:
        if _loads(member.group(1)) == "id":
            return _request_id(member.group(2))
        if member.group(3) == b"}":
            return None
        position = member.end()
    last = _LAST_ID.search(tail)
    return _request_id(last.group(1)) if last is not None else None


def _loads(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _request_id(raw: bytes) -> Any:
    value = _loads(raw)
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


# -- the guard between a transport and the session ---------------------------------------


@asynccontextmanager
async def guarded(
    read: ReadStream[SessionMessage | Exception],
    write: WriteStream[SessionMessage],
    exchange: Exchange,
) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """``(read, write)`` for a ``ClientSession`` over a transport's streams: requests are
    recorded on the way out; replies to ``tools/call`` with more content blocks than
    allowed, or that a transport refused as too large, become :func:`refusal` s."""
    session_write, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
    incoming_send, session_read = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def send_all() -> None:
        async with outgoing, write:
            async for message in outgoing:
                exchange.sent(message.message)
                try:
                    await write.send(message)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return  # the transport is gone: the session's next send fails, as it should

    async def receive_all() -> None:
        async with incoming_send, read:
            async for item in read:
                method = None
                if isinstance(item, SessionMessage) and isinstance(item.message, _REPLIES):
                    method = exchange.answered(item.message.id)
                item = _checked(item, method, exchange)
                listing = item.message if isinstance(item, SessionMessage) else None
                # (A listing refused by its transport is an error reply: nothing to screen.)
                if method == "tools/list" and isinstance(listing, types.JSONRPCResponse):
                    limit = exchange.limits.max_tools
                    problem = await anyio.to_thread.run_sync(screen_listing, listing.result, limit)
                    item = refusal(listing.id, problem) if problem else item
                await incoming_send.send(item)

    async with anyio.create_task_group() as group, session_write, session_read:
        group.start_soon(send_all)
        group.start_soon(receive_all)
        try:
            yield session_read, session_write
        finally:
            group.cancel_scope.cancel()


_REPLIES = (types.JSONRPCResponse, types.JSONRPCError)


def _checked(
    item: SessionMessage | Exception, method: str | None, exchange: Exchange
) -> SessionMessage | Exception:
    """``item``, or a refusal in its place (``method``: the request it answers)."""
    if isinstance(item, Exception):
        return item
    message = item.message
    if not isinstance(message, _REPLIES):
        return item
    if isinstance(message, types.JSONRPCError):
        text = message.error.message
        if message.error.code != REFUSED and REFUSED_PREFIX in text:
            # The HTTP transport's own words around ours: keep ours.
            return refusal(message.id, text[text.index(REFUSED_PREFIX) :])
        return item
    if method == "tools/call":
        content = message.result.get("content")
        limit = exchange.limits.max_reply_blocks
        if isinstance(content, list) and len(content) > limit:
            return refusal(
                message.id,
                f"{REFUSED_PREFIX}the reply has {len(content):,} content blocks, over"
                f" max_reply_blocks={limit:,}",
            )
    return item
