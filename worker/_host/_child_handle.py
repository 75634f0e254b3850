"""The host's handle on one contained child: its run channel, its supervisor line, its
cgroups.

A :class:`ChildHandle` is made as soon as the zygote was asked for a child (the sockets
exist, the process may not yet). :meth:`ChildHandle.handshake` waits for the zygote's
hello and the child's ``ready``; :meth:`ChildHandle.apply_limits` has the child set the
run's rlimits on itself; afterwards the run loop reads and writes frames through
:attr:`~ChildHandle.channel` (``_run_channel``) and the line's reports come through
:attr:`~ChildHandle.keeper` (``_keeper_channel``). :meth:`~ChildHandle.close` kills the
child, confirms it is gone and releases everything.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import shutil
import signal
import socket

import anyio

from .._errors import StartFailed, WorkerError
from .._kernel import _enforcement
from .._kernel._syscalls import read_file
from .._protocol._framing import encode
from .._protocol._keeper_lines import ExitReport, Hello, KeeperLine, SetupFailed, SpawnFailed
from .._types import Dimension, Enforcement
from ._cgroups import CgroupJanitor, RunCgroups
from ._keeper_channel import KeeperChannel
from ._run_channel import RunChannel
from ._timing import timing_mark

KILL_CONFIRM_S = 2.0
KEEPER_REPORT_S = 0.02
STARTUP_REPORT_S = 1.0
"""How long a handshake waits for the line's word on a child that died setting up."""


class ChildHandle:
    """One contained child as the host sees it. Used by one run at most."""

    def __init__(
        self,
        *,
        run: socket.socket,
        keeper: socket.socket,
        cgroups: RunCgroups,
        scratch: str,
    ) -> None:
        self.channel = RunChannel(run)
        """The run channel: the child's frames in, the host's out."""
        self.keeper = KeeperChannel(keeper)
        """The child's supervisor line: its setup failure, the scratch keeper's kill, the
        zygote's exit report."""
        self._cgroups = cgroups
        self._scratch = scratch
        self._keeper_pid = 0
        self._pid = 0
        self._pidfd = -1
        self._keeper_pidfd = -1
        self._enforcement: dict[Dimension, Enforcement] = {}
        self._ready = False
        self._closed = False
        self._sdk_module: str | None = None
        self._killed = False
        self.cpu_limit_s = 0.0
        """The soft RLIMIT_CPU the child set itself for its run (0: none)."""

    @property
    def cgroups(self) -> RunCgroups:
        return self._cgroups

    @property
    def pid(self) -> int:
        """The child's pid (0 before the keeper's hello)."""
        return self._pid

    @property
    def keeper_pid(self) -> int:
        """The child's supervisor's pid, the zygote's (0 before its hello)."""
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
    def ready(self) -> bool:
        return self._ready

    @property
    def sdk_module(self) -> str | None:
        """The SDK module an ``sdk`` frame pre-loaded into the child, if any."""
        return self._sdk_module

    @property
    def closed(self) -> bool:
        return self._closed

    def cpu_ms_now(self) -> float | None:
        """The child's CPU time so far, read from ``/proc``; ``None`` once it is reaped.

        For a run that finished normally, whose exit report comes after the run returned:
        the larger of the main thread's scheduler time (ns) and the process's
        ``utime + stime`` (clock ticks, all threads)."""
        try:
            best = int(read_file(f"/proc/{self._pid}/schedstat").split()[0]) / 1e6
            fields = read_file(f"/proc/{self._pid}/stat").rsplit(")", 1)[1].split()
        except (OSError, ValueError, IndexError):
            return None
        with contextlib.suppress(ValueError, IndexError):
            ticks = int(fields[11]) + int(fields[12])
            best = max(best, ticks * 1000.0 / os.sysconf("SC_CLK_TCK"))
        return best

    def peak_rss_kib(self) -> int | None:
        """The child's peak resident set (``VmHWM``, KiB: its own pages and those it
        shares with the zygote), read while it lives; ``None`` once it has exited (its
        exit report then has ``ru_maxrss``) or before its hello."""
        if self._pidfd < 0:
            return None
        peak = None
        try:
            for line in read_file(f"/proc/{self._pid}/status").splitlines():
                if line.startswith("VmHWM:"):
                    peak = int(line.split()[1])
                    break
        except (OSError, ValueError, IndexError):
            return None
        # Still alive after the read (its pidfd not readable): the pid was not reused.
        alive, _, _ = select.select([self._pidfd], [], [], 0)
        return None if alive else peak

    def alive(self) -> bool:
        """Whether the child and its keeper are both still running (a pooled child whose
        keeper died dies with it, and must not be handed a run)."""
        if self._pidfd < 0:
            return False
        fds = [fd for fd in (self._pidfd, self._keeper_pidfd) if fd >= 0]
        ended, _, _ = select.select(fds, [], [], 0)
        return not ended

    async def zygote_gone(self, within_s: float) -> bool:
        """Whether the child's zygote (its supervisor) has exited, or does within
        ``within_s`` (its sockets close a moment before its exit shows on its pidfd)."""
        if self._keeper_pidfd < 0:
            return False
        with anyio.move_on_after(within_s):
            await anyio.wait_readable(self._keeper_pidfd)
            return True
        return False

    # --- the start --------------------------------------------------------------------

    async def handshake(self, timeout_s: float) -> None:
        """Wait for the keeper's hello and the child's ``ready``.

        Raises :class:`StartFailed` (and closes the handle) when either does not come,
        with the cause when the zygote, the keeper or the child said it."""
        if self._ready:
            return
        try:
            with anyio.fail_after(timeout_s):
                hello = await self.keeper.next_line()
                if not isinstance(hello, Hello):
                    raise _no_hello(hello)
                self._keeper_pid = hello.keeper_pid
                self._pid = hello.child_pid
                with contextlib.suppress(ProcessLookupError):  # gone already: no ready
                    self._pidfd = os.pidfd_open(hello.child_pid)
                    if hello.keeper_pid > 0:
                        self._keeper_pidfd = os.pidfd_open(hello.keeper_pid)
                frame = await self.channel.next_frame()
                if frame is None:  # the child died setting up: its line says why
                    with anyio.move_on_after(STARTUP_REPORT_S):
                        await self.keeper.wait_exit()
                    raise _no_ready(self.keeper)
            if frame["type"] != "ready":
                raise WorkerError(f"child sent {frame['type']!r} before ready")
            self._enforcement = _enforcement.from_json(frame["enforcement"])
            self._ready = True
        except (WorkerError, OSError, TimeoutError) as exc:
            await self.close()
            if isinstance(exc, WorkerError):
                raise
            if isinstance(exc, OSError):
                raise StartFailed(host_resource_error(exc), lasting=False) from exc
            raise StartFailed(f"child did not start within {timeout_s:g} s", lasting=False) from exc
        except BaseException:
            await self.close()
            raise

    async def apply_limits(self, *, cpu_seconds: float, data_mib: int, as_mib: int) -> str:
        """Have the child set the run's rlimits on itself (before any program: the ``limits``
        frame and its answer); "" when it did, else why not. Never raises for a child that
        is gone or answers wrongly: that is the reason."""
        frame = {
            "type": "limits",
            "cpu_seconds": cpu_seconds,
            "data_mib": data_mib,
            "as_mib": as_mib,
        }
        try:
            await self.channel.send(encode(frame))
            answer = await self.channel.next_frame()
        except (WorkerError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            return str(exc) or type(exc).__name__
        if answer is None or answer["type"] != "applied":
            return "the child exited" if answer is None else f"the child sent {answer['type']!r}"
        if not answer["applied"]:
            return str(answer["error"]) or "not applied"
        self.cpu_limit_s = float(answer["cpu_limit_s"])
        return ""

    async def preload_sdk(self, module: str) -> None:
        """Send the SDK module ahead of ``start`` (the child compiles it while it waits)."""
        await self.channel.send(encode({"type": "sdk", "module": module}))
        self._sdk_module = module

    # --- the end ----------------------------------------------------------------------

    def signal_kill(self) -> None:
        """SIGKILL the child now (no waiting); :meth:`kill` confirms the tree is gone."""
        if self._closed or self._killed or self._pidfd < 0:
            return
        self._killed = True
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    async def _keeper_report(self) -> None:
        with contextlib.suppress(WorkerError):  # a broken keeper: cgroup.kill takes it down
            await self.keeper.wait_exit()

    async def kill(self) -> None:
        """Kill the whole tree and confirm it is gone (keeper exit, cgroup empty)."""
        if self._closed:
            return
        if self._pidfd < 0:
            await self._end_unstarted()
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
                if self.keeper.exit is None or not self._cgroups.populated():
                    break
                await anyio.sleep(0.0005)
        if self.keeper.exit is None or self._cgroups.populated():
            self._cgroups.kill()
        with anyio.move_on_after(KILL_CONFIRM_S) as scope:
            await self._keeper_report()
            while True:
                if not self._cgroups.populated():
                    break
                await anyio.sleep(0.0005)
        if scope.cancelled_caught and self._keeper_pidfd >= 0:  # belt and braces: the keeper
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._keeper_pidfd, signal.SIGKILL)

    async def _end_unstarted(self) -> None:
        """End a child that has not said hello: there is no pid to signal, and no report
        comes until the child exits, which nothing would make it do (waiting for it held a
        burst of starts cut short by Ctrl-C for seconds). Ending both channels is the kill:
        a child the zygote has forked exits when its channel does, one not forked yet finds
        its channels closed (or its cgroups gone) and fails its setup. Only the cgroups can
        confirm it, and they are not kept for another run (:meth:`close`)."""
        await self.channel.aclose()
        await self.keeper.aclose()
        if self._cgroups.populated():
            self._cgroups.kill()
        with anyio.move_on_after(KILL_CONFIRM_S):
            while True:
                if not self._cgroups.populated():
                    break
                await anyio.sleep(0.0005)

    async def close(self, janitor: CgroupJanitor | None = None) -> None:
        """Kill (if needed) and release everything: sockets, pidfd, scratch, cgroups.

        With ``janitor``, the cgroups are kept for a later child (emptied and reset) or
        removed on its thread."""
        if self._closed:
            return
        with anyio.CancelScope(shield=True):
            await self.kill()
            self._closed = True
            await self.channel.aclose()
            await self.keeper.aclose()
            for fd in (self._pidfd, self._keeper_pidfd):
                with contextlib.suppress(OSError):
                    os.close(fd)
            remove_scratch(self._scratch)
            # A child that never said hello may still join its cgroups (the zygote forks
            # it later): they are removed, never handed to another run.
            if janitor is None or self._pid == 0:
                self._cgroups.remove()
            else:
                janitor.recycle(self._cgroups)
            timing_mark("teardown")


def host_resource_error(exc: OSError) -> str:
    """What to tell a caller when the host itself could not set up a worker."""
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return (
            "could not start a worker: the host process is out of file descriptors "
            f"({exc.strerror}); raise its RLIMIT_NOFILE or run fewer programs at once"
        )
    return f"could not start a worker: {exc.strerror or exc}"


def _no_hello(line: KeeperLine | None) -> WorkerError:
    if line is None:
        return StartFailed("could not start a child: the zygote is gone", lasting=False)
    if isinstance(line, SpawnFailed):
        return StartFailed(f"could not start a child: {line.error}", lasting=False)
    if isinstance(line, ExitReport):
        why = f"it died before it said hello ({_exit_text(line.status)})"
        return StartFailed(f"could not start a child: {why}", lasting=False)
    if isinstance(line, SetupFailed):
        return StartFailed(f"could not start a child: {line.describe()}", lasting=line.lasting)
    return WorkerError(f"the line said {type(line).__name__} before hello")


def _no_ready(line: KeeperChannel) -> StartFailed:
    failed = line.setup_failed
    if failed is not None:
        # A step of the child's own setup: lasting unless it ran out of something.
        return StartFailed(f"could not start a child: {failed.describe()}", lasting=failed.lasting)
    report = line.exit
    status = "" if report is None else f" ({_exit_text(report.status)})"
    return StartFailed(
        f"could not start a child: it exited before it was ready{status}", lasting=False
    )


def _exit_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def remove_scratch(path: str) -> None:
    """Remove a run's scratch dir and whatever the program left in it, even directories it
    made unreadable (``chmod 000``): their owner, the host, may open them again."""
    try:
        os.rmdir(path)  # empty (the run's files were in its tmpfs): no fd, no walk
        return
    except FileNotFoundError:
        return
    except OSError:
        pass

    # A directory the program made unreadable stops the walk; its owner (the host, or
    # root) may open it again, top down, before the removal.
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, name), 0o700, follow_symlinks=False)
    shutil.rmtree(path, ignore_errors=True)
