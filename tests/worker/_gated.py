"""A keeper and its writer behind the write gate, for the gate's tests (as root).

:func:`gated` forks a *keeper* (the test's stand-in for
``worker._supervisor._gatekeeper``: it answers the gate and reads the count as the real one
does, and kills the writer when they say so),
which forks a *writer* that loads the gate filter alone (not the base filter: the gate must
hold whatever else the child refuses) and runs the test's steps in a fresh scratch dir. The
keeper may drop to uid 65534 first (no capabilities: what the child does to itself can blind
it, as in E3, E4, E4d and E6), or mount an overlayfs on the scratch dir in a mount namespace
of its own (its files then report another device than the dir).
"""

from __future__ import annotations

import ctypes
import encodings.ascii  # noqa: F401 - as uid 65534 the keeper cannot import it (under /root here)
import json
import os
import resource
import select
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from worker._kernel import _seccomp
from worker._supervisor._scratch_gate import WriteGate
from worker._supervisor._scratch_quota import ScratchQuota

MIB = 1 << 20
NOBODY = 65534
_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_DUMPABLE = 4

Steps = Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class Gated:
    """What happened behind the gate."""

    result: dict[str, Any] | None
    """What the steps returned (``None``: the keeper killed the writer first)."""
    most: int
    """The most the keeper's count held at any answer (bytes)."""
    refused: int
    """Calls answered ENOSPC."""
    reason: str
    """Why the keeper killed the writer ("" when it did not)."""


def gated(
    steps: Steps,
    *,
    quota: int = 16 * MIB,
    nobody: bool = False,
    overlay: bool = False,
    keeper_fds_left: int | None = None,
) -> Gated:
    """Run ``steps`` in a writer behind the gate with a scratch quota of ``quota`` bytes.
    ``keeper_fds_left``: once the writer runs, the keeper may open only that many more
    files (its RLIMIT_NOFILE lowered, as a child once could do to it)."""
    _seccomp.prepare()
    folder = tempfile.mkdtemp(prefix="ptc-gate-test-")
    os.chmod(folder, 0o755)
    scratch = os.path.join(folder, "scratch")
    os.mkdir(scratch)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            report: dict[str, Any] = _keeper(
                steps, scratch, quota, nobody, overlay, keeper_fds_left
            )
        except BaseException as exc:  # reported to the test, never hang it
            report = {"error": repr(exc)}
        os.write(write, json.dumps(report).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        report = json.loads(fh.read())
    os.waitpid(pid, 0)
    shutil.rmtree(folder)
    assert "error" not in report, report["error"]
    return Gated(**report)


def _keeper(
    steps: Steps,
    scratch: str,
    quota: int,
    nobody: bool,
    overlay: bool,
    fds_left: int | None,
) -> dict[str, Any]:
    if overlay:
        from tests.environments._wrap import mount_overlay

        mount_overlay(scratch)
    if nobody:
        os.chown(scratch, NOBODY, NOBODY)
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
    cap = min(64 * MIB, quota)
    ours, theirs = socket.socketpair()
    out_r, out_w = os.pipe()
    writer = os.fork()
    if writer == 0:
        ours.close()
        os.close(out_r)
        _writer(steps, scratch, cap, theirs, out_w)
    theirs.close()
    os.close(out_w)
    _, fds, _, _ = socket.recv_fds(ours, 16, 1)
    ours.close()
    gate = WriteGate(fds[0], writer, _seccomp.growth_syscalls(), cap)
    count = ScratchQuota(scratch, writer, quota, refuse_growth=False)
    pidfd = os.pidfd_open(writer)
    if fds_left is not None:
        _leave_fds(fds_left)
    most, reason = 0, ""
    while True:
        watched: list[Any] = [gate, count, pidfd]
        ready, _, _ = select.select(watched, [], [])
        if pidfd in ready:
            break
        why = ""
        if count in ready:
            why = count.check(recount=False)
        if gate in ready and not why:
            why = gate.answer(count)
        most = max(most, count.total)
        if why and not reason:
            reason = why
            os.kill(writer, signal.SIGKILL)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
    with os.fdopen(out_r, "rb") as fh:
        raw = fh.read()
    os.waitpid(writer, 0)
    return {
        "result": json.loads(raw) if raw else None,
        "most": most,
        "refused": gate.refused,
        "reason": reason,
    }


def _leave_fds(left: int) -> None:
    """Let this process open only ``left`` more files: no free number below its limit."""
    taken = set()
    for fd in range(1024):
        try:
            os.fstat(fd)
        except OSError:
            continue
        taken.add(fd)
    for fd in set(range(max(taken))) - taken:
        os.dup2(min(taken), fd, inheritable=False)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(taken) + 1 + left, 1024))


def _writer(steps: Steps, scratch: str, cap: int, gate: socket.socket, out: int) -> None:
    """Set up as the child does (but for Landlock and the base filter), load the gate,
    send its listener, run the steps, report."""
    low = 3  # like a child: none of the test runner's files
    for fd in sorted((gate.fileno(), out)):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)
    os.chdir(scratch)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))
    _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)  # the keeper reads its /proc
    listener = _seccomp.install_write_gate()
    socket.send_fds(gate, [b"gate"], [listener])
    os.close(listener)
    gate.close()
    try:
        found = steps()
    except BaseException as exc:
        found = {"error": repr(exc)}
    os.write(out, json.dumps(found).encode())
    os._exit(0)


def set_dumpable(on: bool) -> None:
    """What a program can do to its own /proc: hide it from a keeper without capabilities."""
    _libc.prctl(_PR_SET_DUMPABLE, int(on), 0, 0, 0)
