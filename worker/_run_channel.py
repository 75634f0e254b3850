"""The host's end of a child's run channel: frames read as they come, and written.

Frames are read from the raw socket, not through the stream: woken by readiness, a frame
costs one event-loop round. :meth:`RunChannel.push_frames` (the run loop's way on asyncio)
reads and handles them in the event loop's reader callback; :meth:`RunChannel.next_frame`
and :meth:`RunChannel.pull_frames` read them in the caller's task. Every frame is validated
(``_messages``) before anyone sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from collections.abc import Callable

import anyio
import anyio.lowlevel
from anyio.abc import SocketAttribute, SocketStream

from ._framing import MAX_FRAME_BYTES, Frame, FrameDecoder
from ._messages import validate_child_frame

_RECEIVE_BYTES = 65536


class RunChannel:
    """One child's run channel, as the host reads and writes it."""

    def __init__(self, stream: SocketStream) -> None:
        self._stream = stream
        self._raw: socket.socket = stream.extra(SocketAttribute.raw_socket)
        self._decoder = FrameDecoder(validate_child_frame)
        self._frames: deque[Frame] = deque()
        self._frames_bytes = MAX_FRAME_BYTES
        self._waiter: asyncio.Future[None] | None = None
        self._watching: tuple[asyncio.AbstractEventLoop, int] | None = None

    async def next_frame(self) -> Frame | None:
        """The next validated child frame; ``None`` at EOF; ``ProtocolError`` if malformed.

        Reads the socket directly: woken by readiness, a frame costs one event-loop round
        (a stream's receive adds a checkpoint). Data that was there without waiting still
        yields once per read, so a flooding child cannot starve the loop (or the deadline)."""
        while not self._frames:
            data = self._receive()
            if data is None:
                await self._readable()
                data = self._receive()
                if data is None:
                    continue
            elif data:
                await anyio.lowlevel.checkpoint()
            frames = self._decode(data)
            if frames is None:
                return None
            self._frames.extend(frames)
        return self._frames.popleft()

    async def pull_frames(self, handle: Callable[[Frame], bool]) -> bool:
        """Hand every frame to ``handle``, read one by one with :meth:`next_frame`, until
        ``handle`` says stop (``False``: returns ``True``) or the stream ends (returns
        ``False``); ``ProtocolError`` if a frame is malformed."""
        while (frame := await self.next_frame()) is not None:
            if not handle(frame):
                return True
        return False

    async def push_frames(self, handle: Callable[[Frame], bool]) -> bool:
        """:meth:`pull_frames`, but on asyncio the frames are read and handled in the
        loop's reader callback, one read (at most 64 KiB) per readiness, so a flooding
        child cannot starve the loop; the caller's task only waits for the end. Frames read
        after a stop are dropped (the caller is done with the stream). ``handle`` must not
        block; it runs outside any task, so it must not start tasks or cancel scopes through
        anyio (which finds the running loop there only if ``anyio.run`` started it, once
        ``sniffio`` is installed)."""
        while self._frames:  # read before (the handshake's read may have brought more)
            if not handle(self._frames.popleft()):
                return True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return await self.pull_frames(handle)
        ended: asyncio.Future[bool] = loop.create_future()

        def readable() -> None:
            if ended.done():
                return
            data = self._receive()
            if data is None:
                return
            try:
                frames = self._decode(data)
                if frames is None:
                    ended.set_result(False)
                    return
                for frame in frames:
                    if not handle(frame):
                        ended.set_result(True)
                        return
            except BaseException as exc:  # malformed, or a bug in handle(): raised in the task
                ended.set_exception(exc)

        self._unwatch()
        fd = self._raw.fileno()
        loop.add_reader(fd, readable)
        self._watching = (loop, fd)
        try:
            return await ended
        finally:
            self._unwatch()

    def _receive(self) -> bytes | None:
        """One read without waiting: the bytes, ``b""`` at the end of the stream (or a
        reset, or the socket closed under us), ``None`` when nothing is there yet."""
        try:
            return self._raw.recv(_RECEIVE_BYTES)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def _decode(self, data: bytes) -> list[Frame] | None:
        """The frames ``data`` completes; ``None`` at the end of the stream (a partial
        frame left over is a ``ProtocolError``)."""
        if not data:
            self._decoder.eof()
            return None
        self._frames_bytes = self._decoder.buffered + len(data)
        return self._decoder.feed(data)

    async def _readable(self) -> None:
        """Wait until the run channel is readable.

        On asyncio the socket stays registered with the loop between frames (a frame then
        costs no ``epoll_ctl`` pair, unlike ``anyio.wait_readable``); a readiness nobody
        waits for unregisters it, so unread data never makes the loop spin. Elsewhere,
        anyio's ``wait_readable``."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            await anyio.wait_readable(self._raw)
            return
        waiter = self._waiter = loop.create_future()
        if self._watching is None or self._watching[0] is not loop:
            self._unwatch()
            fd = self._raw.fileno()
            loop.add_reader(fd, self._on_readable)
            self._watching = (loop, fd)
        try:
            await waiter
        finally:
            self._waiter = None

    def _on_readable(self) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            self._unwatch()
        else:
            waiter.set_result(None)

    def _unwatch(self) -> None:
        if self._watching is not None:
            loop, fd = self._watching
            self._watching = None
            with contextlib.suppress(RuntimeError):  # the loop is closed
                loop.remove_reader(fd)

    @property
    def frame_bytes_bound(self) -> int:
        """No frame handed out since the last read is longer than this (bytes)."""
        return self._frames_bytes

    async def send(self, data: bytes) -> None:
        """Write encoded frames to the child (errors propagate: the caller decides)."""
        await self._stream.send(data)

    def send_nowait(self, data: bytes) -> int:
        """Write as much of ``data`` as the socket takes without blocking; the byte count.

        Only when no :meth:`send` is in progress (the caller's job), so frames never
        interleave; ``OSError`` when the channel is broken."""
        try:
            return self._raw.send(data)
        except BlockingIOError:
            return 0

    async def aclose(self) -> None:
        """Stop watching the socket, then close it (its fd number may be reused after)."""
        self._unwatch()
        with contextlib.suppress(Exception):
            await self._stream.aclose()
