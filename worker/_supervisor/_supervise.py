"""The zygote as every child's supervisor: it is their parent (and a subreaper), so it reaps
each one when it dies and writes its exit report on the child's supervisor line, and when
the host dies it ends them all and removes what they leave behind.

The report carries the wait status, the rusage, and the CPU clock the kernel checks
RLIMIT_CPU against, read from the zombie before it is reaped (``waitid(WNOWAIT)`` first);
the host decides from it whether the CPU limit ended the child (``_runloop``).

Between two forks the zygote does as little as it can: each write of a page after a fork
copies it, so a child's record is the request's own objects, kept as they came.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import time
from collections import deque

from .._kernel._syscalls import cpu_clock_s, read_file, remove_cgroup
from .._protocol._keeper_lines import ExitReport
from .._protocol._spawn_config import ChildConfig, ChildRequest

LEFTOVERS_WAIT_S = 5.0
"""How long a zygote whose host died waits for its children to end once it killed them."""


class _Child:
    __slots__ = ("cgroups", "line", "pidns", "scratch")

    def __init__(self, line: int, scratch: str, cgroups: list[list[str]], pidns: bool) -> None:
        self.line = line
        self.scratch = scratch
        self.cgroups = cgroups
        self.pidns = pidns


class Children:
    """The children this zygote forked and supervises, and what they leave behind."""

    _ENDED = 1024

    def __init__(self) -> None:
        self.running: dict[int, _Child] = {}
        self._ended: deque[tuple[str, list[list[str]]]] = deque(maxlen=self._ENDED)
        """Scratch dirs and cgroups of the last children that ended: what a host that died
        may not have removed yet."""
        self.others: set[int] = set()
        """Processes of the zygote's own (the scratch keeper), reaped but not reported."""
        self.other_ended = False

    def forked(self, pid: int, line: int, cfg: ChildConfig) -> None:
        self.running[pid] = _Child(line, cfg["scratch"], cfg["cgroups"], cfg["pidns"])

    def reap(self) -> None:
        """Reap every child that exited and report it (and orphans: a subreaper's)."""
        while True:
            try:
                found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if found is None:
                return
            pid = found.si_pid
            child = self.running.pop(pid, None)
            clock = 0.0
            if child is not None:
                with contextlib.suppress(OSError):  # a zombie's clock is still readable
                    clock = cpu_clock_s(pid)
            try:
                _, status, usage = os.wait4(pid, 0)
            except ChildProcessError:
                continue
            if child is None:
                if pid in self.others:
                    self.others.discard(pid)
                    self.other_ended = True
                else:  # an orphan: its own children come to the zygote now
                    self.sweep()
                continue
            report = ExitReport(
                status=status,
                cpu_ms=(usage.ru_utime + usage.ru_stime) * 1000.0,
                maxrss_kib=usage.ru_maxrss,
                cpu_clock_s=clock,
            )
            if not child.pidns:
                self.sweep()
            with contextlib.suppress(OSError):  # the host is gone, or closed its end
                os.write(child.line, report.to_line())
            os.close(child.line)
            self._ended.append((child.scratch, child.cgroups))

    def sweep(self) -> None:
        """Kill whatever a child without a pid namespace left behind: a process that is
        neither a child nor one of the zygote's own, reparented to the zygote (a subreaper)
        when its parent died. (Only where seccomp did not stop the child forking.)"""
        try:
            found = read_file("/proc/thread-self/children").split()
        except OSError:
            return
        for pid in map(int, found):
            if pid not in self.running and pid not in self.others:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def stop(self, wake: int) -> None:
        """The host said goodbye (it closed its children): end the zygote's own processes."""
        for pid in list(self.others):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self._wait(wake)

    def _wait(self, wake: int) -> None:
        deadline = time.monotonic() + LEFTOVERS_WAIT_S
        self.reap()
        while (self.running or self.others) and (left := deadline - time.monotonic()) > 0:
            if select.select([wake], [], [], left)[0]:  # SIGCHLD
                os.read(wake, 4096)
            self.reap()

    def leftovers(self, pending: list[ChildRequest], root: str, wake: int) -> None:
        """The host is gone: kill every child, reap them (bounded), and remove every scratch
        dir and cgroup of theirs and of the requests still queued (``pending``), then the
        backend's scratch root."""
        for pid in list(self.running):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in list(self.others):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self._wait(wake)
        paths = [*self._ended, *((c.scratch, c.cgroups) for c in self.running.values())]
        paths += [(cfg["scratch"], cfg["cgroups"]) for cfg in pending]
        for scratch, cgroups in paths:
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
            for _, procs in cgroups:
                remove_cgroup(os.path.dirname(procs))
        if root:
            shutil.rmtree(root, ignore_errors=True)
        self._ended.clear()
