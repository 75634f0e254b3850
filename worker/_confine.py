"""What the child applies to itself, after the keeper forked it and before it runs the
program: death with its keeper (``PR_SET_PDEATHSIG``: nothing outlives its supervisor), only
its channel fd, rlimits (core, fsize, nofile, stack), an empty environment, the
scratch dir as cwd, no_new_privs, Landlock, no capabilities, seccomp (with the filter for its
own pid); then the enforcement report of what held, and ``worker._child.serve``. A step
that fails is written on the keeper's error pipe before the child exits (the keeper puts it
in its exit report, and the host names it).

A namespace init ignores signals it has no handler for, so the child installs a SIGXCPU
handler that exits with :data:`EXIT_CPU_LIMIT` (the keeper's exit report reads it); a
program that blocks or ignores SIGXCPU (python profile) meets the hard limit's SIGKILL
instead.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import socket
from types import FrameType
from typing import Any, NoReturn

from . import _capabilities, _enforcement, _landlock, _seccomp
from ._syscalls import PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, prctl

NOFILE = 64
FSIZE_BYTES = 64 * 1024 * 1024
STACK_BYTES = 8 * 1024 * 1024
"""The main thread's stack at most (the usual default): a stack is memory RLIMIT_DATA does not
count, so a host that runs with ``ulimit -s unlimited`` must not lend that to a program."""
EXIT_CPU_LIMIT = 128 + signal.SIGXCPU
"""Exit status of a child whose SIGXCPU handler ran (the soft CPU limit was reached)."""


def child_main(
    cfg: dict[str, Any],
    facts: dict[str, Any],
    run_fd: int,
    keeper_fd: int,
    failed_fd: int,
    gate_fd: int = -1,
    keeper_pid: int = 0,
) -> NoReturn:
    """Entry of the child process (in the keeper's fork): contain, report, serve. Never
    returns. ``failed_fd``: the keeper's error pipe, closed before the program runs;
    ``gate_fd``: where to send the listener of the write gate (-1: no gate); ``keeper_pid``:
    the keeper as this process sees it (0 from inside a pid namespace)."""
    step = "die with its keeper"
    try:
        # Whatever kills the keeper (the host gone, an OOM kill, a bug) kills the child too.
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if keeper_pid and os.getppid() != keeper_pid:
            raise OSError("the keeper died before the child could follow it")
        step = "close the keeper's socket"
        os.close(keeper_fd)
        step = "close every other fd"
        _isolate_fds(tuple(fd for fd in (run_fd, failed_fd, gate_fd) if fd >= 0))
        if cfg["rlimits"]:
            step = "set its rlimits (core, fsize, nofile, stack)"
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_BYTES, FSIZE_BYTES))
            resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
            resource.setrlimit(resource.RLIMIT_STACK, _bounded(resource.RLIMIT_STACK, STACK_BYTES))
        os.environ.clear()
        step = f"enter the scratch dir {cfg['scratch']}"
        os.chdir(cfg["scratch"])
        step = "set no_new_privs"
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        _landlock_step(cfg, facts)
        step = "drop its capabilities"
        _capabilities.drop_all()
        if facts.get("scratch_keeper") and facts.get("landlock_abi"):
            # The keeper reads its open files for the scratch quota (/proc/<pid>/fd), which
            # needs it dumpable after a uid change; Landlock keeps /proc from other children.
            prctl(PR_SET_DUMPABLE, 1)
        _seccomp_step(cfg, facts)
        if gate_fd >= 0:
            step = "load the write gate"
            _gate_step(facts, gate_fd)
        enforcement = _enforcement.report(_enforcement.Facts(**facts))
        if cfg["rlimits"]:
            signal.signal(signal.SIGXCPU, _exit_at_cpu_limit)
        os.close(failed_fd)
        failed_fd = -1
        from ._child import serve

        serve(socket.socket(fileno=run_fd), enforcement)
    except BaseException as exc:
        if failed_fd >= 0:  # still setting up: tell the keeper what failed
            with contextlib.suppress(OSError):
                os.write(failed_fd, f"{step}: {exc}".encode("utf-8", "replace")[:4000])
    finally:
        os._exit(71)


def _landlock_step(cfg: dict[str, Any], facts: dict[str, Any]) -> None:
    if not cfg["landlock"]:
        facts["landlock_error"] = "Landlock off"
        return
    abi, why = _landlock.status(cfg.get("landlock_abi_limit"))
    if not abi:
        facts["landlock_error"] = why
        return
    try:
        res = _landlock.restrict(
            read_only=cfg["read_only"], read_write=[cfg["scratch"], "/dev/null"], abi=abi
        )
        facts["landlock_abi"] = res.abi
    except OSError as exc:
        facts["landlock_error"] = str(exc)


def _gate_step(facts: dict[str, Any], gate_fd: int) -> None:
    """The keeper's write gate (a hard scratch quota without a tmpfs): its listener goes to
    the keeper; without seccomp or where the kernel refuses it, the keeper's quota acts
    after the writes instead (and the report says so)."""
    gate = socket.socket(fileno=gate_fd)
    try:
        if not facts.get("seccomp"):
            facts["scratch_gate_error"] = "no seccomp"
            return
        if not facts.get("landlock_abi"):
            # The keeper reads this child's /proc to decide, which needs it dumpable, which
            # is safe only while Landlock keeps other programs from that /proc.
            facts["scratch_gate_error"] = "no Landlock"
            return
        try:
            listener = _seccomp.install_write_gate()
        except OSError as exc:
            facts["scratch_gate_error"] = f"the write gate could not be loaded: {exc}"
            return
        try:
            socket.send_fds(gate, [b"gate"], [listener])
        finally:
            os.close(listener)
        facts["scratch_gate"] = True
    finally:
        gate.close()


def _seccomp_step(cfg: dict[str, Any], facts: dict[str, Any]) -> None:
    if not cfg["seccomp"]:
        facts["seccomp_error"] = "seccomp off"
        return
    try:
        _seccomp.install()
        facts["seccomp"] = True
    except (OSError, RuntimeError) as exc:
        facts["seccomp_error"] = str(exc)


def _bounded(kind: int, most: int) -> tuple[int, int]:
    """This process's limit of ``kind`` lowered to ``most`` (never raised)."""
    soft, hard = resource.getrlimit(kind)
    hard = most if hard == resource.RLIM_INFINITY else min(hard, most)
    soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
    return soft, hard


def _exit_at_cpu_limit(signum: int, frame: FrameType | None) -> NoReturn:
    # Runs between bytecodes of the main thread; a program stuck in one long C call
    # meets the hard limit's SIGKILL a CPU second later instead (same report).
    os._exit(EXIT_CPU_LIMIT)


def _isolate_fds(keep: tuple[int, ...]) -> None:
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        os.set_inheritable(fd, False)
        low = fd + 1
    os.closerange(low, 1 << 16)
