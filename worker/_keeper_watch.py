"""The keeper after it forked the child: it answers the host's limits request (the child's
rlimits by ``prlimit``, the scratch tmpfs's size or, without a tmpfs, its own scratch quota),
watches the child until it exits, and reports its end (status, rusage, whether RLIMIT_CPU
ended it, and what the keeper knows of why). A subreaper, it sweeps whatever the child left.

CPU limit: soft RLIMIT_CPU at the run's budget, hard one second above; the child exits with
:data:`~worker._confine.EXIT_CPU_LIMIT` at the soft limit, or meets the hard limit's
SIGKILL. Either way the keeper reads the child's CPU clock that the kernel checks
RLIMIT_CPU against (``CPUCLOCK_PROF``) before reaping it and reports ``cpu_limit`` when it
passed the soft limit. Rusage is not evidence: it counts precise run time, while the limit
counts scheduler ticks (it reads up to ~10% lower).
"""

from __future__ import annotations

import dataclasses
import math
import os
import resource
import select
import signal
import socket
from collections.abc import Callable
from typing import Any

from ._confine import EXIT_CPU_LIMIT, FSIZE_BYTES
from ._errors import WorkerError
from ._keeper_lines import ExitReport, Hello, LimitsAck, parse_limits_request
from ._scratch_gate import WriteGate
from ._scratch_quota import ScratchQuota
from ._seccomp import growth_syscalls
from ._syscalls import cpu_clock_s, read_file

CPU_HARD_MARGIN_S = 1
"""Hard RLIMIT_CPU minus soft: CPU seconds a program that ignores SIGXCPU gets extra."""


def _send(sock: socket.socket, line: bytes) -> None:
    try:
        sock.sendall(line)
    except OSError:
        pass


class Quota:
    """The keeper's scratch quota of one child, set up when the run's size arrives; with
    the child's write gate (``gate``: the socket the child sends its listener on) every
    growing write waits for the keeper's answer, else the keeper refuses growth after the
    fact."""

    def __init__(self, scratch: str, child: int, gate: socket.socket | None) -> None:
        self._scratch = scratch
        self._child = child
        self.watch: ScratchQuota | None = None
        self.gate_socket = gate
        """Until the child's listener arrives on it (``None`` after, or without a gate)."""
        self.gate: WriteGate | None = None
        self._cap = FSIZE_BYTES

    def start(self, mib: int) -> str:
        """Watch the scratch dir with a quota of ``mib`` MiB; "" or why not. One file can
        never pass it alone: the child's RLIMIT_FSIZE comes down to the quota too."""
        if self.watch is not None:
            return "the scratch quota was set already"
        limit = mib * 1024 * 1024
        try:
            self._cap = min(FSIZE_BYTES, limit)
            resource.prlimit(self._child, resource.RLIMIT_FSIZE, (self._cap, self._cap))
            gated = self.gate is not None or self.gate_socket is not None
            self.watch = ScratchQuota(
                self._scratch, self._child, limit, refuse_growth=not gated
            )
        except OSError as exc:
            return f"the keeper's scratch quota could not be set up: {exc}"
        if self.gate is not None:
            self.gate.cap = self._cap
        return ""

    def watched(self) -> list[Any]:
        """What the keeper's loop waits on for this quota."""
        found: list[Any] = [w for w in (self.watch, self.gate_socket, self.gate) if w]
        return found

    def handle(self, ready: list[Any]) -> str:
        """Whatever of :meth:`watched` is ready; why the child must be killed ("" if not)."""
        reason = ""
        try:
            if self.gate_socket is not None and self.gate_socket in ready:
                self._connect()
            if self.watch is not None and self.watch in ready:
                reason = self.watch.check(recount=self.gate is None)
            if self.gate is not None and self.gate in ready and not reason:
                reason = self.gate.answer(self.watch)
        except Exception as exc:  # never a keeper gone while its child runs on unwatched
            return f"its scratch quota failed: {exc!r}"
        return reason

    def _connect(self) -> None:
        assert self.gate_socket is not None
        try:
            _, fds, _, _ = socket.recv_fds(self.gate_socket, 16, 1)
        except OSError:
            fds = []
        self.gate_socket.close()
        self.gate_socket = None
        if fds:  # none: the child could not load its gate (and reported so)
            self.gate = WriteGate(fds[0], self._child, growth_syscalls(), self._cap)


class Keep:
    """The keeper's life after the fork: it answers the host, watches the child (and its
    scratch quota), and reports its end."""

    def __init__(
        self,
        child: int,
        sock: socket.socket,
        rlimits: bool,
        resize: Callable[[int], str],
        quota: Quota | None,
    ) -> None:
        self._child = child
        self._sock = sock
        self._rlimits = rlimits
        self._resize = resize
        self._quota = quota
        self._soft_s = 0.0
        self._cause = ""

    def run(self, failed_fd: int) -> int:
        pidfd = os.pidfd_open(self._child)
        _send(self._sock, Hello(keeper_pid=os.getpid(), child_pid=self._child).to_line())
        buf = b""
        while True:
            quota = self._quota.watched() if self._quota is not None else []
            ready, _, _ = select.select([self._sock, pidfd, *quota], [], [])
            if pidfd in ready:
                break
            if self._quota is not None:
                reason = self._quota.handle(ready)
                if reason:
                    self._cause = f"killed by the keeper: {reason}"
                    os.kill(self._child, signal.SIGKILL)
            if self._sock not in ready:
                continue
            data = self._sock.recv(65536)
            if not data:  # the host is gone or done with us
                os.kill(self._child, signal.SIGKILL)
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                _send(self._sock, self._limits(line).to_line())
        try:  # the exited child is a zombie until wait4: its CPU clock is still readable
            clock_s = cpu_clock_s(self._child)
        except OSError:
            clock_s = 0.0
        _, status, usage = os.wait4(self._child, 0)
        _sweep()
        if not self._cause:
            self._cause = _child_failure(failed_fd)
        report = ExitReport(
            status=status,
            cpu_ms=(usage.ru_utime + usage.ru_stime) * 1000.0,
            maxrss_kib=usage.ru_maxrss,
            cpu_limit=died_of_cpu_limit(status, clock_s=clock_s, soft_s=self._soft_s),
            cause=self._cause,
        )
        _send(self._sock, report.to_line())
        return 0

    def _limits(self, line: bytes) -> LimitsAck:
        """The host's limits request: the rlimits, then the scratch quota."""
        ack = apply_limits(self._child, line, self._rlimits)
        self._soft_s = ack.cpu_limit_s
        try:
            mib = parse_limits_request(line).scratch_mib
        except WorkerError as exc:
            return dataclasses.replace(ack, scratch_error=str(exc))
        scratch = self._quota.start(mib) if self._quota is not None else self._resize(mib)
        return dataclasses.replace(ack, scratch_error=scratch)


def _child_failure(fd: int) -> str:
    """What the child wrote on its error pipe before it exited ("" when nothing)."""
    try:
        text = os.read(fd, 4096).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    finally:
        os.close(fd)
    return f"the child could not set itself up: {text}" if text else ""


def died_of_cpu_limit(status: int, *, clock_s: float, soft_s: float) -> bool:
    """Whether a child with wait ``status`` died of its soft CPU limit ``soft_s``: its CPU
    clock reached the limit, and it died the way only the limit makes it die here (the
    SIGXCPU handler's exit, SIGXCPU itself outside a pid namespace, the hard SIGKILL)."""
    if soft_s <= 0 or clock_s < soft_s:
        return False
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == EXIT_CPU_LIMIT


def apply_limits(child: int, line: bytes, rlimits: bool) -> LimitsAck:
    if not rlimits:
        return LimitsAck(applied=False, error="rlimits off", cpu_limit_s=0)
    try:
        request = parse_limits_request(line)
        soft = math.ceil(cpu_clock_s(child) + request.cpu_seconds)
        # Soft below hard: SIGXCPU at the soft limit names the cause (the child handles
        # it, which a namespace init must); SIGKILL at the hard one if it is ignored.
        resource.prlimit(child, resource.RLIMIT_CPU, (soft, soft + CPU_HARD_MARGIN_S))
        # Private memory (heap, anonymous mappings, thread stacks as reserved): what bounds
        # a program's memory where no cgroup does; below a cgroup limit, a MemoryError
        # comes before the OOM killer. Address space only as a backstop (libraries, guards).
        data_bytes = request.data_mib * 1024 * 1024
        resource.prlimit(child, resource.RLIMIT_DATA, (data_bytes, data_bytes))
        as_bytes = (request.memory_mib + 1024) * 1024 * 1024
        resource.prlimit(child, resource.RLIMIT_AS, (as_bytes, as_bytes))
    except (OSError, ValueError, WorkerError) as exc:
        return LimitsAck(applied=False, error=str(exc), cpu_limit_s=0)
    return LimitsAck(applied=True, error="", cpu_limit_s=soft)


def _sweep() -> None:
    """Kill and reap every remaining descendant (orphans reparent to us: subreaper)."""
    me = os.getpid()
    for _ in range(1000):
        try:
            pids = [int(p) for p in read_file(f"/proc/{me}/task/{me}/children").split()]
        except OSError:
            pids = []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG if pids else 0)[0]:
                pass
        except ChildProcessError:
            if not pids:
                return
