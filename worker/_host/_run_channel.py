"""The host's end of a child's run channel: frames read as they come, and written.

Frames are read from and written to the raw socket, not through an anyio stream: woken by
readiness, a frame costs one event-loop round, and a read cancelled at the moment the socket
became readable cannot fail in the event loop's callback (anyio's asyncio UNIX stream sets
its cancelled future's result there: ``InvalidStateError``).
:meth:`RunChannel.push_frames` (the run loop's way on asyncio) reads and handles them in the
event loop's reader callback; :meth:`RunChannel.next_frame` and :meth:`RunChannel.pull_frames`
read them in the caller's task. Every frame is validated (``_messages``) before anyone sees
it. Frames are decoded one at a time as they are
handled, and handling is paced (``_pacing``): a read that brought many frames (a big batch
spans several) never holds the event loop for more than a slice of work.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable

import anyio
import anyio.lowlevel

from .._protocol._framing import MAX_FRAME_BYTES, Frame, FrameDecoder
from .._protocol._messages import validate_child_frame
from ._pacing import Pacer

_RECEIVE_BYTES = 65536


class RunChannel:
    """One child's run channel, as the host reads and writes it."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._raw = sock
        self._decoder = FrameDecoder(validate_child_frame)
        self._frames_bytes = MAX_FRAME_BYTES
        self._waiter: asyncio.Future[None] | None = None
        self._watching: tuple[asyncio.AbstractEventLoop, int] | None = None

    async def next_frame(self) -> Frame | None:
        """The next validated child frame; ``None`` at EOF; ``ProtocolError`` if malformed.

        Reads the socket directly: woken by readiness, a frame costs one event-loop round
        (a stream's receive adds a checkpoint). Data that was there without waiting still
        yields once per read, so a flooding child cannot starve the loop (or the deadline).
        Frames are decoded one at a time, as they are asked for."""
        while (frame := self._decoder.next()) is None:
            data = self._receive()
            if data is None:
                await self._readable()
                data = self._receive()
                if data is None:
                    continue
            elif data:
                await anyio.lowlevel.checkpoint()
            if not self._take(data):
                return None
        return frame

    async def pull_frames(self, handle: Callable[[Frame], bool]) -> bool:
        """Hand every frame to ``handle``, read one by one with :meth:`next_frame`, until
        ``handle`` says stop (``False``: returns ``True``) or the stream ends (returns
        ``False``); ``ProtocolError`` if a frame is malformed. Paced: the loop runs at
        least once per slice of work (``_pacing``), however many frames one read brought."""
        pacer = Pacer()
        while (frame := await self.next_frame()) is not None:
            if not handle(frame):
                return True
            await pacer.tick()
        return False

    async def push_frames(self, handle: Callable[[Frame], bool]) -> bool:
        """:meth:`pull_frames`, but on asyncio the frames are read and handled in the
        loop's reader callback, one read (at most 64 KiB) per readiness, so a flooding
        child cannot starve the loop; the caller's task only waits for the end. A callback
        handles frames for at most a slice of work (``_pacing``): frames left over are
        handled in the next turns of the loop, and the socket is not read until they are.
        Frames read after a stop are dropped (the caller is done with the stream).
        ``handle`` must not block; it runs outside any task, so it must not start tasks or
        cancel scopes through anyio (which finds the running loop there only if
        ``anyio.run`` started it, once ``sniffio`` is installed)."""
        pacer = Pacer()
        while (frame := self._decoder.next()) is not None:  # the handshake's read brought more
            if not handle(frame):
                self._drop_buffered()
                return True
            await pacer.tick()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return await self.pull_frames(handle)
        ended: asyncio.Future[bool] = loop.create_future()
        fd = self._raw.fileno()

        def handle_some() -> None:
            """Handle buffered frames for one slice; go on in the next loop turn (not
            reading meanwhile) if frames are left, read again once none is."""
            if ended.done():
                return
            pacer.restart()
            try:
                while (frame := self._decoder.next()) is not None:
                    if not handle(frame):
                        self._drop_buffered()
                        if not ended.done():
                            ended.set_result(True)
                        return
                    if ended.done():  # handle() ended the run's wait (its task was cancelled)
                        return
                    if pacer.due():
                        if self._watching is not None:
                            self._unwatch()
                        loop.call_soon(handle_some)
                        return
            except BaseException as exc:  # malformed, or a bug in handle(): raised in the task
                if not ended.done():
                    ended.set_exception(exc)
                return
            if self._watching is None:
                loop.add_reader(fd, readable)
                self._watching = (loop, fd)

        def readable() -> None:
            if ended.done():
                return
            data = self._receive()
            if data is None:
                return
            try:
                if not self._take(data):
                    ended.set_result(False)
                    return
            except BaseException as exc:  # a partial frame at the end of the stream
                ended.set_exception(exc)
                return
            handle_some()

        self._unwatch()
        loop.add_reader(fd, readable)
        self._watching = (loop, fd)
        try:
            return await ended
        finally:
            self._unwatch()

    def _drop_buffered(self) -> None:
        """Forget what was read after a stop (the caller is done with the stream)."""
        self._decoder = FrameDecoder(validate_child_frame)

    def _receive(self) -> bytes | None:
        """One read without waiting: the bytes, ``b""`` at the end of the stream (or a
        reset, or the socket closed under us), ``None`` when nothing is there yet."""
        try:
            return self._raw.recv(_RECEIVE_BYTES)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def _take(self, data: bytes) -> bool:
        """Buffer ``data`` for decoding; ``False`` at the end of the stream (a partial
        frame left over is a ``ProtocolError``)."""
        if not data:
            self._decoder.eof()
            return False
        self._frames_bytes = self._decoder.buffered + len(data)
        self._decoder.push(data)
        return True

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
        """Write encoded frames to the child (errors propagate: the caller decides);
        ``anyio.ClosedResourceError`` once the channel is closed."""
        await anyio.lowlevel.checkpoint()
        view = memoryview(data)
        while view:
            if self._raw.fileno() < 0:
                raise anyio.ClosedResourceError
            try:
                view = view[self._raw.send(view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._raw)

    def send_nowait(self, data: bytes) -> int:
        """Write as much of ``data`` as the socket takes without blocking; the byte count.

        Only when no :meth:`send` is in progress (the caller's job), so frames never
        interleave; ``OSError`` when the channel is broken."""
        try:
            return self._raw.send(data)
        except BlockingIOError:
            return 0

    async def aclose(self) -> None:
        """Stop watching the socket, wake a send waiting on it, then close it (its fd number
        may be reused after)."""
        self._unwatch()
        close_watched(self._raw)


def close_watched(sock: socket.socket) -> None:
    """Close a raw socket that a task may be waiting on (``anyio.wait_readable`` or
    ``wait_writable``): the waiter is woken first (``ClosedResourceError``), so it never
    waits on an fd number another socket may take next. Closed already: nothing."""
    if sock.fileno() >= 0:
        with contextlib.suppress(RuntimeError):  # no running loop anyio knows
            anyio.notify_closing(sock)
        sock.close()
