"""The host's handle on one contained child: its run channel, its keeper, its cgroups.

A :class:`ChildHandle` is made as soon as the zygote was asked for a child (the sockets
exist, the processes may not yet). :meth:`ChildHandle.handshake` waits for the keeper's
hello and the child's ``ready``; afterwards the run loop reads frames with
:meth:`~ChildHandle.push_frames` (handed to it from the event loop's reader callback) and
writes with :meth:`~ChildHandle.send`. Keeper lines are
read only here (``_keeper_lines`` parses them); the exit report is kept for whoever asks.
:meth:`~ChildHandle.close` kills the tree, confirms it is gone and releases everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import signal
import socket
from collections import deque
from collections.abc import Callable

import anyio
import anyio.lowlevel
from anyio.abc import SocketAttribute, SocketStream

from . import _enforcement
from ._cgroups import CgroupJanitor, RunCgroups
from ._errors import WorkerError
from ._framing import MAX_FRAME_BYTES, Frame, FrameDecoder, encode
from ._keeper_lines import (
    ExitReport,
    Hello,
    KeeperLine,
    KeeperLineDecoder,
    LimitsAck,
    LimitsRequest,
    SpawnFailed,
)
from ._messages import validate_child_frame
from ._timing import timing_mark
from ._types import Dimension, Enforcement

_RECEIVE_BYTES = 65536
KILL_CONFIRM_S = 2.0
KEEPER_REPORT_S = 0.02


class ChildHandle:
    """One contained child (and its keeper) as the host sees it. Used by one run at most."""

    def __init__(
        self, *, run: SocketStream, keeper: SocketStream, cgroups: RunCgroups, scratch: str
    ) -> None:
        self._run = run
        self._raw: socket.socket = run.extra(SocketAttribute.raw_socket)
        self._keeper = keeper
        self._cgroups = cgroups
        self._scratch = scratch
        self._decoder = FrameDecoder(validate_child_frame)
        self._frames: deque[Frame] = deque()
        self._lines = KeeperLineDecoder()
        self._pending_lines: deque[KeeperLine] = deque()
        self._keeper_pid = 0
        self._pid = 0
        self._pidfd = -1
        self._enforcement: dict[Dimension, Enforcement] = {}
        self._exit: ExitReport | None = None
        self._cpu_limit_s = 0.0
        self._ready = False
        self._closed = False
        self._sdk_module: str | None = None
        self._killed = False
        self._frames_bytes = MAX_FRAME_BYTES
        self._waiter: asyncio.Future[None] | None = None
        self._watching: tuple[asyncio.AbstractEventLoop, int] | None = None

    @property
    def cgroups(self) -> RunCgroups:
        return self._cgroups

    @property
    def pid(self) -> int:
        """The child's pid (0 before the keeper's hello)."""
        return self._pid

    @property
    def keeper_pid(self) -> int:
        """The keeper's pid (0 before its hello)."""
        return self._keeper_pid

    @property
    def scratch(self) -> str:
        """The child's private scratch directory (removed by :meth:`close`)."""
        return self._scratch

    @property
    def enforcement(self) -> dict[Dimension, Enforcement]:
        """What the child reported it applied (in ``ready``); a copy."""
        return dict(self._enforcement)

    @property
    def exit(self) -> ExitReport | None:
        """The keeper's exit report, once it was read."""
        return self._exit

    @property
    def cpu_limit_s(self) -> float:
        """The RLIMIT_CPU the keeper applied for this run (0 when none was)."""
        return self._cpu_limit_s

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def sdk_module(self) -> str | None:
        """The SDK module an ``sdk`` frame pre-loaded into the child, if any."""
        return self._sdk_module

    @property
    def closed(self) -> bool:
        return self._closed

    # --- the run channel --------------------------------------------------------------

    async def handshake(self, timeout_s: float) -> None:
        """Wait for the keeper's hello and the child's ``ready``.

        Raises ``WorkerError`` (and closes the handle) when either does not come."""
        if self._ready:
            return
        try:
            with anyio.fail_after(timeout_s):
                hello = await self._keeper_line()
                if not isinstance(hello, Hello):
                    raise WorkerError(f"zygote could not start a child: {_no_hello(hello)}")
                self._keeper_pid = hello.keeper_pid
                self._pid = hello.child_pid
                self._pidfd = os.pidfd_open(hello.child_pid)
                frame = await self.next_frame()
            if frame is None or frame["type"] != "ready":
                raise WorkerError(f"child did not send ready (got {frame and frame['type']})")
            self._enforcement = _enforcement.from_json(frame["enforcement"])
            self._ready = True
        except (WorkerError, OSError, TimeoutError) as exc:
            await self.close()
            if isinstance(exc, WorkerError):
                raise
            if isinstance(exc, OSError):
                raise WorkerError(host_resource_error(exc)) from exc
            raise WorkerError(f"child did not start within {timeout_s:g} s") from exc
        except BaseException:
            await self.close()
            raise

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
        block; it runs outside any task."""
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
        await self._run.send(data)

    def send_nowait(self, data: bytes) -> int:
        """Write as much of ``data`` as the socket takes without blocking; the byte count.

        Only when no :meth:`send` is in progress (the caller's job), so frames never
        interleave; ``OSError`` when the channel is broken."""
        try:
            return self._raw.send(data)
        except BlockingIOError:
            return 0

    async def preload_sdk(self, module: str) -> None:
        """Send the SDK module ahead of ``start`` (the child compiles it while it waits)."""
        await self._run.send(encode({"type": "sdk", "module": module}))
        self._sdk_module = module

    def cpu_ms_now(self) -> float | None:
        """The child's CPU time so far, read from ``/proc``; ``None`` once it is reaped.

        For a run that finished normally, whose exit report comes after the run returned:
        the larger of the main thread's scheduler time (ns) and the process's
        ``utime + stime`` (clock ticks, all threads)."""
        try:
            with open(f"/proc/{self._pid}/schedstat", encoding="ascii") as fh:
                best = int(fh.read().split()[0]) / 1e6
            with open(f"/proc/{self._pid}/stat", encoding="ascii") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, ValueError, IndexError):
            return None
        with contextlib.suppress(ValueError, IndexError):
            ticks = int(fields[11]) + int(fields[12])
            best = max(best, ticks * 1000.0 / os.sysconf("SC_CLK_TCK"))
        return best

    # --- the keeper -------------------------------------------------------------------

    async def apply_limits(self, request: LimitsRequest) -> LimitsAck:
        """Have the keeper lower the child's CPU and address-space rlimits and set the
        scratch quota.

        Never raises: a keeper that is gone or breaks its protocol gives a not-applied
        answer that says why."""
        try:
            await self._keeper.send(request.to_line())
            line = await self._keeper_line()
        except (WorkerError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            why = str(exc) or type(exc).__name__
            return LimitsAck(applied=False, error=why, cpu_limit_s=0, scratch_error=why)
        if not isinstance(line, LimitsAck):
            why = "keeper exited" if line is None else f"keeper sent {type(line).__name__}"
            return LimitsAck(applied=False, error=why, cpu_limit_s=0, scratch_error=why)
        if line.applied:
            self._cpu_limit_s = float(line.cpu_limit_s)
        return line

    async def wait_exit(self) -> ExitReport | None:
        """Read the keeper's lines up to its exit report (``None`` if it ends first).

        ``WorkerError`` if the keeper breaks its protocol."""
        while self._exit is None and await self._keeper_line() is not None:
            pass
        return self._exit

    async def _keeper_line(self) -> KeeperLine | None:
        while not self._pending_lines:
            if self._lines.failed is not None:  # do not wait for more from a broken keeper
                raise self._lines.failed
            try:
                data = await self._keeper.receive()
            except (
                anyio.EndOfStream,
                anyio.ClosedResourceError,
                anyio.BrokenResourceError,  # reset: the keeper died with our request unread
                OSError,
            ):
                return None
            self._pending_lines.extend(self._lines.feed(data))
        line = self._pending_lines.popleft()
        if isinstance(line, ExitReport):
            self._exit = line
        return line

    async def _keeper_report(self) -> None:
        with contextlib.suppress(WorkerError):  # a broken keeper: cgroup.kill takes it down
            await self.wait_exit()

    # --- the end ----------------------------------------------------------------------

    def signal_kill(self) -> None:
        """SIGKILL the child now (no waiting); :meth:`kill` confirms the tree is gone."""
        if self._closed or self._killed or self._pidfd < 0:
            return
        self._killed = True
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    async def kill(self) -> None:
        """Kill the whole tree and confirm it is gone (keeper exit, cgroup empty)."""
        if self._closed:
            return
        self._killed = False
        self.signal_kill()
        # The child is pid 1 of its namespace (or at least the tree's root): its death
        # takes the namespace with it; the keeper then reports rusage and sweeps orphans.
        # Give the keeper a moment to report before cgroup.kill takes it down too.
        with anyio.move_on_after(KEEPER_REPORT_S):
            await self._keeper_report()
            # After the keeper's report only the keeper itself is left, exiting; writing
            # cgroup.kill then costs more (10-20 ms here) than letting it finish.
            for _ in range(100):
                if self._exit is None or not self._cgroups.populated():
                    break
                await anyio.sleep(0.0005)
        if self._exit is None or self._cgroups.populated():
            self._cgroups.kill()
        with anyio.move_on_after(KILL_CONFIRM_S) as scope:
            await self._keeper_report()
            while True:
                if not self._cgroups.populated():
                    break
                await anyio.sleep(0.0005)
        if scope.cancelled_caught and self._keeper_pid > 0:  # belt and braces: the keeper
            with contextlib.suppress(OSError):
                os.kill(self._keeper_pid, signal.SIGKILL)

    async def close(self, janitor: CgroupJanitor | None = None) -> None:
        """Kill (if needed) and release everything: sockets, pidfd, scratch, cgroups.

        With ``janitor``, the cgroup directories are removed on its thread."""
        if self._closed:
            return
        with anyio.CancelScope(shield=True):
            await self.kill()
            self._closed = True
            self._unwatch()  # before the socket closes: its number may be reused
            for stream in (self._run, self._keeper):
                with contextlib.suppress(Exception):
                    await stream.aclose()
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            try:
                os.rmdir(self._scratch)  # empty (the run's files were in its tmpfs): no fd
            except OSError:
                shutil.rmtree(self._scratch, ignore_errors=True)
            if janitor is None:
                self._cgroups.remove()
            else:
                janitor.discard(self._cgroups)
            timing_mark("teardown")


def host_resource_error(exc: OSError) -> str:
    """What to tell a caller when the host itself could not set up a worker."""
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return (
            "could not start a worker: the host process is out of file descriptors "
            f"({exc.strerror}); raise its RLIMIT_NOFILE or run fewer programs at once"
        )
    return f"could not start a worker: {exc.strerror or exc}"


def _no_hello(line: KeeperLine | None) -> str:
    if line is None:
        return "the keeper exited before forking"
    if isinstance(line, SpawnFailed):
        return line.error
    return f"the keeper sent {type(line).__name__} before its hello"
