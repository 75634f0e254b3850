"""What the child applies to itself, after the keeper forked it and before it runs the
program: only its channel fd, rlimits (core, fsize, nofile), an empty environment, the
scratch dir as cwd, no_new_privs, Landlock and seccomp; then the enforcement report of what
held, and ``worker._child.serve``.

A namespace init ignores signals it has no handler for, so the child installs a SIGXCPU
handler that exits with :data:`EXIT_CPU_LIMIT` (the keeper's exit report reads it); a
program that blocks or ignores SIGXCPU (python profile) meets the hard limit's SIGKILL
instead.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
from types import FrameType
from typing import Any, NoReturn

from . import _enforcement, _landlock, _seccomp
from ._syscalls import PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, prctl

NOFILE = 64
FSIZE_BYTES = 64 * 1024 * 1024
EXIT_CPU_LIMIT = 128 + signal.SIGXCPU
"""Exit status of a child whose SIGXCPU handler ran (the soft CPU limit was reached)."""


def child_main(cfg: dict[str, Any], facts: dict[str, Any], run_fd: int, keeper_fd: int) -> NoReturn:
    """Entry of the child process (in the keeper's fork): contain, report, serve. Never
    returns."""
    try:
        os.close(keeper_fd)
        if "pid" in facts.get("namespaces", ()):
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _isolate_fds(run_fd)
        if cfg["rlimits"]:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_BYTES, FSIZE_BYTES))
            resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
        os.environ.clear()
        os.chdir(cfg["scratch"])
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        if cfg["landlock"]:
            try:
                res = _landlock.restrict(
                    read_only=cfg["read_only"], read_write=[cfg["scratch"], "/dev/null"]
                )
                facts["landlock_abi"] = res.abi
            except OSError as exc:
                facts["landlock_error"] = str(exc)
        else:
            facts["landlock_error"] = "Landlock off"
        if cfg["seccomp"]:
            try:
                _seccomp.install()
                facts["seccomp"] = True
            except (OSError, RuntimeError) as exc:
                facts["seccomp_error"] = str(exc)
        else:
            facts["seccomp_error"] = "seccomp off"
        enforcement = _enforcement.report(_enforcement.Facts(**facts))
        if cfg["rlimits"]:
            signal.signal(signal.SIGXCPU, _exit_at_cpu_limit)
        from ._child import serve

        serve(socket.socket(fileno=run_fd), enforcement)
    finally:
        os._exit(71)


def _exit_at_cpu_limit(signum: int, frame: FrameType | None) -> NoReturn:
    # Runs between bytecodes of the main thread; a program stuck in one long C call
    # meets the hard limit's SIGKILL a CPU second later instead (same report).
    os._exit(EXIT_CPU_LIMIT)


def _isolate_fds(keep: int) -> None:
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)
    os.set_inheritable(keep, False)
