"""The stdio transport of a mount: a server subprocess, read leniently and in bounded pieces.

The SDK's own ``stdio_client`` decodes the server's stdout strictly: one invalid UTF-8 byte
ends its reader, which then drains stdout in a shielded loop for as long as the server
lives, without ever closing the session's stream, so every call hangs (DESIGN section 9,
"Hostile peers"). It also joins a long line's chunks quadratically and parses each line on
the event loop. This transport reads bytes in linear time, decodes leniently (invalid UTF-8
becomes U+FFFD), keeps at most :meth:`Exchange.limit` bytes and
:meth:`Exchange.value_limit` JSON values of a line, counted as its pieces arrive (the rest
is counted and dropped, and the request it answers gets a refusal), parses large lines in
a worker thread, and on any failure of its own closes the session's stream with a logged
reason, so calls end ``TOOL_UNAVAILABLE`` instead of hanging. Shutdown follows the SDK's
order: stdin closed, a grace period, then the server's whole process group terminated and
killed.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Final

import anyio
import anyio.lowlevel
import anyio.to_thread
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ._values import JsonValues
from ._wire import REFUSED_PREFIX, Exchange, attributed_id, parse_message, refusal

__all__ = ("stdio_transport",)

logger = logging.getLogger("ptc.mcp")

_CHUNK: Final = 1 << 16
_PARSE_HERE_MAX: Final = 1 << 16  # larger lines are parsed in a worker thread
_BLANKS: Final = re.compile(rb"[ \t\r\n]*")
_EDGE: Final = 4096  # bytes kept of each end of a line too large to keep
_EXIT_GRACE: Final = 2.0  # after stdin closes, as the SDK (and the MCP spec's shutdown)
_TERM_GRACE: Final = 2.0  # after SIGTERM, before SIGKILL
_REAP_GRACE: Final = 2.0


@asynccontextmanager
async def stdio_transport(
    command: str,
    args: list[str],
    *,
    env: dict[str, str] | None,
    cwd: str | None,
    errlog: object,
    exchange: Exchange,
    lost: Callable[[str], None],
) -> AsyncIterator[tuple[anyio.abc.ObjectReceiveStream[SessionMessage | Exception],
                         anyio.abc.ObjectSendStream[SessionMessage]]]:  # fmt: skip
    """Start ``command`` and yield ``(read, write)`` streams of its messages.

    ``lost(reason)`` is called once when reading fails for a reason of the server's making
    (the read stream is then closed: the session sees the connection end).
    """
    process = await anyio.open_process(
        [command, *args],
        env=get_default_environment() | (env or {}),
        stderr=errlog if errlog is not None else sys.stderr,  # type: ignore[arg-type]
        cwd=cwd,
        start_new_session=True,  # its own process group: shutdown reaches its children
    )
    to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    assert process.stdin is not None and process.stdout is not None
    reader = _Reader(process.stdout, to_session, exchange, lost)

    async def write_all() -> None:
        assert process.stdin is not None
        async with from_session:
            async for message in from_session:
                try:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    encoded = (data + "\n").encode("utf-8", "replace")
                except ValueError as exc:  # e.g. a lone surrogate pydantic cannot write
                    request_id = getattr(message.message, "id", None)
                    if request_id is not None:
                        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                            await to_session.send(refusal(request_id, f"cannot send it: {exc}"))
                    continue
                try:
                    await process.stdin.send(encoded)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    reader.close_session("the server stopped reading its stdin")
                    return

    async with anyio.create_task_group() as group:
        group.start_soon(reader.run)
        group.start_soon(write_all)
        try:
            yield read, write
        finally:
            with anyio.CancelScope(shield=True):
                reader.close_session(None)  # keeps draining stdout: a blocked server can exit
                write.close()
                read.close()
                await _stop(process)
            group.cancel_scope.cancel()


class _Reader:
    """Lines of the server's stdout -> messages for the session (see the module docstring)."""

    def __init__(
        self,
        stdout: ByteReceiveStream,
        to_session: MemoryObjectSendStream[SessionMessage | Exception],
        exchange: Exchange,
        lost: Callable[[str], None],
    ) -> None:
        self._stdout = stdout
        self._to_session: MemoryObjectSendStream[SessionMessage | Exception] | None
        self._to_session = to_session
        self._exchange = exchange
        self._lost = lost
        self._line = bytearray()
        self._values = JsonValues()  # of the line being read
        # (bytes, values) the line being read may hold, once it passes a reply limit.
        self._limit: tuple[int, int] | None = None
        self._dropped = 0  # bytes of the line not kept (it is over its limit)
        # Why it was dropped: (values counted, in so many bytes), or None: its bytes.
        self._over_values: tuple[int, int] | None = None
        self._head = b""
        self._tail = bytearray()
        self._refused = False  # the line being dropped was already answered for

    def close_session(self, reason: str | None) -> None:
        """Stop feeding the session (it sees the connection end); ``reason``: why, if the
        server caused it (logged once, and handed to ``lost``)."""
        to_session, self._to_session = self._to_session, None
        if to_session is None:
            return
        if reason is not None:
            self._lost(reason)
        to_session.close()

    async def run(self) -> None:
        try:
            while True:
                try:
                    chunk = await self._stdout.receive(_CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                start = 0
                while True:
                    if not self._line and not self._dropped:
                        # Blank lines (and a line's leading space) change nothing: skipped
                        # at once, so a flood of them costs no Python step per line.
                        start = _BLANKS.match(chunk, start).end()  # type: ignore[union-attr]
                    end = chunk.find(b"\n", start)
                    if end < 0:
                        break
                    await self._take(chunk, start, end)
                    await self._line_done()
                    start = end + 1
                await self._take(chunk, start, len(chunk))
                # The stream hands over what it holds without yielding: a chunk's work
                # (its values counted, a line parsed) is all the event loop waits for.
                await anyio.lowlevel.checkpoint()
        except Exception as exc:  # a failure of ptc's own: the session must still hear of it
            logger.exception("reading an MCP server's stdout failed")
            self.close_session(f"reading its stdout failed: {type(exc).__name__}: {exc}")
            return  # the mount is lost; the server is stopped when it closes
        self.close_session(None)

    async def _take(self, chunk: bytes, start: int, end: int) -> None:
        if start == end:
            return
        if self._dropped:
            self._keep_tail(chunk, start, end)
            self._dropped += end - start
            return
        piece = chunk[start:end]
        self._line += piece
        self._values.feed(piece)
        size, values = len(self._line), self._values.values
        limits = self._exchange.limits
        if size <= limits.max_reply_bytes and values <= limits.max_reply_values:
            return
        request_id = attributed_id(bytes(self._line[:_EDGE]), b"")
        if self._limit is None:
            # A line whose opening names no request may be a listing whose id comes last:
            # it may grow to the largest limits (``Exchange.limit(None)``) before it is dropped.
            exchange = self._exchange
            self._limit = (exchange.limit(request_id), exchange.value_limit(request_id))
        if size <= self._limit[0] and values <= self._limit[1]:
            return
        # Over its limit: keep the two ends (to find its id), count and drop the rest.
        self._head = bytes(self._line[:_EDGE])
        self._tail = self._line[-_EDGE:]
        self._dropped = size
        self._over_values = (values, size) if size <= self._limit[0] else None
        self._line = bytearray()
        if request_id is not None and self._exchange.method(request_id) is not None:
            # The caller need not wait for the end of a line that may never end.
            await self._refuse(request_id, size, self._over(request_id, size, more=True))
            self._refused = True

    def _over(self, request_id: object, size: int, *, more: bool) -> str:
        """Why the line being dropped (``size`` bytes, or more) is refused."""
        if self._over_values is not None:  # its values were counted up to the limit only
            values, counted_in = self._over_values
            return self._exchange.too_many_values(request_id, values, counted_in, more=True)
        return self._exchange.too_large(request_id, size, more=more)

    def _keep_tail(self, chunk: bytes, start: int, end: int) -> None:
        self._tail += memoryview(chunk)[max(start, end - _EDGE) : end]
        del self._tail[:-_EDGE]

    async def _line_done(self) -> None:
        line, dropped, head, tail = self._line, self._dropped, self._head, bytes(self._tail)
        values, refused = self._values.values, self._refused
        over = self._over(attributed_id(head, tail), dropped, more=False) if dropped else ""
        self._line, self._values, self._limit = bytearray(), JsonValues(), None
        self._dropped, self._over_values, self._refused = 0, None, False
        self._head, self._tail = b"", bytearray()
        if refused:
            logger.warning("MCP server sent a reply of %s bytes; refused", f"{dropped:,}")
            return
        if dropped:
            await self._refuse(attributed_id(head, tail), dropped, over)
            return
        if not line.strip():
            return
        limits = self._exchange.limits
        if len(line) > limits.max_reply_bytes or values > limits.max_reply_values:
            # Kept whole because its opening named no request: its end may (a reply to a
            # call whose id comes last).
            request_id = attributed_id(bytes(line[:_EDGE]), bytes(line[-_EDGE:]))
            if request_id is not None and len(line) > self._exchange.limit(request_id):
                await self._refuse(
                    request_id, len(line), self._exchange.too_large(request_id, len(line))
                )
                return
            if request_id is not None and values > self._exchange.value_limit(request_id):
                await self._refuse(
                    request_id,
                    len(line),
                    self._exchange.too_many_values(request_id, values, len(line), more=False),
                )
                return
        try:
            if len(line) > _PARSE_HERE_MAX:
                message = await anyio.to_thread.run_sync(parse_message, line, self._listing)
            else:
                message = parse_message(line, self._listing)
        except ValueError as exc:
            request_id = attributed_id(bytes(line[:_EDGE]), bytes(line[-_EDGE:]))
            why = f"{REFUSED_PREFIX}it is not a JSON-RPC message ({_first_line(exc)})"
            await self._refuse(request_id, len(line), why)
            return
        await self._send(SessionMessage(message))

    def _listing(self, request_id: object) -> bool:
        return self._exchange.method(request_id) == "tools/list"

    async def _refuse(self, request_id: object, size: int, why: str) -> None:
        """A line of ``size`` bytes ptc will not hand over (too large, or not a message)."""
        known = request_id is not None and self._exchange.method(request_id) is not None
        if known:
            await self._send(refusal(request_id, why))
            return
        # Not an answer to anything in flight: as the SDK does with garbage, the session
        # hears of it (and logs it) and goes on.
        logger.warning("MCP server sent a line ptc cannot use (%s bytes): %s", f"{size:,}", why)
        await self._send(ValueError(why))

    async def _send(self, item: SessionMessage | Exception) -> None:
        to_session = self._to_session
        if to_session is None:
            return  # shutting down (or the session is gone): keep draining
        try:
            await to_session.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._to_session = None


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    detail = next((line for line in lines[1:] if "[type=" in line), lines[-1] if lines else "")
    return detail.split(" [type=")[0][:200] or type(exc).__name__


async def _stop(process: Process) -> None:
    """Close stdin, wait for the server to exit, then SIGTERM and SIGKILL its process
    group; every wait is bounded (a survivor is abandoned with a warning)."""
    assert process.stdin is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, _EXIT_GRACE):
        for sig, grace in ((signal.SIGTERM, _TERM_GRACE), (signal.SIGKILL, _REAP_GRACE)):
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
            if await _exited(process, grace):
                break
        else:
            logger.warning("MCP server process %d survived SIGKILL; abandoning it", process.pid)
    with anyio.move_on_after(_REAP_GRACE):
        await process.aclose()


async def _exited(process: Process, seconds: float) -> bool:
    # Not process.wait(): on asyncio it also waits for the pipes to close, which a child
    # of the server holding them open would delay.
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110 - no event says a process exited
            await anyio.sleep(0.01)
    return process.returncode is not None
