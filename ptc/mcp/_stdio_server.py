"""The stdio transport of ``serve``: the process's stdin and stdout, read and written
without threads.

The SDK's ``stdio_server`` reads stdin with a blocking ``readline`` in a worker thread:
Ctrl-C cancels the server, but the interpreter then waits for that thread, which waits
for a line that may never come (a client that keeps stdin open), so the process does not
exit (DESIGN section 9, "Hostile peers"). Here both ends are non-blocking descriptors
waited on by the event loop, so cancelling the server ends the transport at once. As the
SDK does, fd 0 and fd 1 are pointed at ``/dev/null`` and stderr while serving (a stray
``print`` cannot corrupt the protocol) and restored afterwards. A line is at most
``max_line_bytes`` (the SDK's HTTP request limit): a longer one is dropped, and answered
with an error when its id can be found; invalid UTF-8 is replaced.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Final

import anyio
import anyio.lowlevel
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from ._wire import attributed_id

__all__ = ("MAX_LINE_BYTES", "stdio_server_streams")

logger = logging.getLogger("ptc.mcp")

MAX_LINE_BYTES: Final = 4 << 20
"""The longest request line (the SDK's limit on an HTTP request body, 4 MiB)."""
_CHUNK: Final = 1 << 16
_EDGE: Final = 4096


@asynccontextmanager
async def stdio_server_streams(
    max_line_bytes: int = MAX_LINE_BYTES,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """``(read, write)`` streams for ``Server.run`` over this process's stdin and stdout."""
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    blocking = (os.get_blocking(wire_in), os.get_blocking(wire_out))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    to_server, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    out = _Output(wire_out)
    try:
        os.set_blocking(wire_in, False)
        os.set_blocking(wire_out, False)
        async with anyio.create_task_group() as group:
            group.start_soon(_read_all, wire_in, to_server, out, max_line_bytes)
            group.start_soon(_write_all, from_server, out)
            try:
                yield read, write
            finally:
                group.cancel_scope.cancel()
    finally:
        for fd, was_blocking, std in ((wire_in, blocking[0], 0), (wire_out, blocking[1], 1)):
            with suppress(OSError):
                os.set_blocking(fd, was_blocking)
                os.dup2(fd, std)
            os.close(fd)


class _Output:
    """Whole lines onto stdout, one writer at a time."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = anyio.Lock()

    async def line(self, text: str) -> None:
        data = memoryview((text + "\n").encode("utf-8", "replace"))
        async with self._lock:
            while data:
                try:
                    written = os.write(self._fd, data)
                except BlockingIOError:
                    await _wait(anyio.wait_writable, self._fd)
                    continue
                data = data[written:]


async def _write_all(from_server: MemoryObjectReceiveStream[SessionMessage], out: _Output) -> None:
    async with from_server:
        async for message in from_server:
            try:
                await out.line(message.message.model_dump_json(by_alias=True, exclude_unset=True))
            except OSError as exc:  # the client closed stdout: nobody hears the rest
                logger.debug("MCP client's stdout closed: %s", exc)
                return


async def _read_all(
    fd: int,
    to_server: MemoryObjectSendStream[SessionMessage | Exception],
    out: _Output,
    max_line_bytes: int,
) -> None:
    line = bytearray()
    dropped = 0  # bytes of an over-long line not kept
    head = tail = b""
    async with to_server:
        while True:
            chunk = await _read(fd)
            if not chunk:
                return  # EOF: the client hung up, the server ends
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                piece = chunk[start : end if end >= 0 else len(chunk)]
                if dropped:
                    dropped += len(piece)
                    tail = (tail + piece)[-_EDGE:]
                else:
                    line += piece
                    if len(line) > max_line_bytes:
                        head, tail, dropped = bytes(line[:_EDGE]), bytes(line[-_EDGE:]), len(line)
                        line = bytearray()
                if end < 0:
                    break
                start = end + 1
                if dropped:
                    await _too_long(attributed_id(head, tail), dropped, max_line_bytes, out)
                    dropped, head, tail = 0, b"", b""
                elif line.strip():
                    await to_server.send(_parse(line))
                line = bytearray()


def _parse(line: bytearray) -> SessionMessage | Exception:
    try:
        text = bytes(line).decode("utf-8", "replace")
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
    except ValueError as exc:  # the server logs it and goes on, as with the SDK's transport
        return exc


async def _too_long(request_id: object, size: int, limit: int, out: _Output) -> None:
    why = f"the request is {size:,} bytes; the limit is {limit:,}"
    logger.warning("MCP client sent a line ptc cannot take: %s", why)
    if isinstance(request_id, int | str):
        error = types.ErrorData(code=types.INVALID_REQUEST, message=why)
        reply = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        await out.line(reply.model_dump_json(by_alias=True, exclude_unset=True))


async def _read(fd: int) -> bytes:
    while True:
        try:
            return os.read(fd, _CHUNK)
        except BlockingIOError:
            await _wait(anyio.wait_readable, fd)
        except OSError as exc:
            if exc.errno == errno.EINTR:
                continue
            logger.debug("reading the MCP client's stdin failed: %s", exc)
            return b""


async def _wait(wait: Callable[[int], Awaitable[None]], fd: int) -> None:
    """Wait until ``fd`` is ready; a descriptor the event loop cannot wait on (a regular
    file) is always ready, so only yield."""
    if stat.S_ISREG(os.fstat(fd).st_mode):
        await anyio.lowlevel.checkpoint()
        return
    await wait(fd)
