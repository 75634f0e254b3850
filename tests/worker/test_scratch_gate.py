"""The keeper's write gate: a forked writer loads the seccomp gate and sends its listener,
the test answers as the keeper does; the scratch dir never holds more than the quota,
whatever the writer tries, and a full one is ENOSPC, as a tmpfs would say."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import select
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import pytest

from worker import _seccomp
from worker._scratch_gate import WriteGate
from worker._scratch_quota import ScratchQuota

pytestmark = pytest.mark.skipif(not _seccomp.available(), reason="libseccomp is not available")

MIB = 1 << 20
QUOTA = 16 * MIB
_libc = ctypes.CDLL(None, use_errno=True)


def _outcome(fn: Callable[[], object]) -> str:
    try:
        fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))
    except RuntimeError as exc:
        return str(exc)
    return "ok"


def _gated(steps: Callable[[], dict[str, object]]) -> tuple[dict[str, object], int, int]:
    """Run ``steps`` in a forked writer behind the gate, in a fresh scratch dir with a 16 MiB
    quota; its result, the most the scratch dir ever held (bytes) and the refusals."""
    _seccomp.prepare()
    folder = tempfile.mkdtemp(prefix="ptc-gate-test-")
    ours, theirs = socket.socketpair()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        ours.close()
        low = 3  # like a child: none of the test runner's files
        for fd in sorted((theirs.fileno(), write)):
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, 1 << 16)
        os.chdir(folder)
        resource.setrlimit(resource.RLIMIT_FSIZE, (QUOTA, QUOTA))
        _libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        _seccomp.install()
        listener = _seccomp.install_write_gate()
        socket.send_fds(theirs, [b"gate"], [listener])
        os.close(listener)
        try:
            found = steps()
        except BaseException as exc:  # reported to the test, never hang it
            found = {"error": repr(exc)}
        os.write(write, json.dumps(found).encode())
        os._exit(0)
    theirs.close()
    os.close(write)
    _, fds, _, _ = socket.recv_fds(ours, 16, 1)
    ours.close()
    gate = WriteGate(fds[0], pid, _seccomp.growth_syscalls(), QUOTA)
    quota = ScratchQuota(folder, pid, QUOTA, refuse_growth=False)
    pidfd = os.pidfd_open(pid)
    most = 0
    try:
        while True:
            watched: list[Any] = [gate, quota, pidfd]
            ready, _, _ = select.select(watched, [], [])
            if quota in ready:
                quota.check()
                most = max(most, quota.total)
            if gate in ready:
                gate.answer(quota)
            if pidfd in ready:
                break
        with os.fdopen(read, "rb") as fh:
            result: dict[str, object] = json.loads(fh.read())
        os.waitpid(pid, 0)
        quota.check()
        return result, max(most, quota.total), gate.refused
    finally:
        os.close(pidfd)
        gate.close()
        quota.close()
        shutil.rmtree(folder)


def _fill(open_file: Callable[[int], int], files: int = 40, mib: int = 1) -> dict[str, object]:
    written = 0
    try:
        for i in range(files):
            fd = open_file(i)
            for _ in range(mib):
                written += os.write(fd, b"x" * MIB)
    except OSError as exc:
        return {"written": written, "error": errno.errorcode.get(exc.errno or 0)}
    return {"written": written, "error": None}


@pytest.mark.parametrize(
    "open_file",
    [
        lambda i: os.open(f"f{i}", os.O_CREAT | os.O_WRONLY, 0o600),
        lambda i: os.open(f"a{i}", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600),
    ],
    ids=["named", "append"],  # O_TMPFILE: refused by the base filter (test_seccomp.py)
)
def test_the_scratch_dir_never_holds_more_than_the_quota(
    open_file: Callable[[int], int],
) -> None:
    result, most, refused = _gated(lambda: _fill(open_file))
    assert result["error"] == "ENOSPC" and refused >= 1, result
    assert 14 * MIB <= most <= QUOTA, most  # a few blocks of slack per call, no more


def test_unlinked_files_count_while_held_and_free_their_space_when_closed() -> None:
    def steps() -> dict[str, object]:
        held = []
        for i in range(3):
            fd = os.open(f"u{i}", os.O_CREAT | os.O_WRONLY, 0o600)
            os.unlink(f"u{i}")
            os.write(fd, b"y" * (5 * MIB))
            held.append(fd)
        full = _outcome(lambda: os.write(held[0], b"y" * (2 * MIB)))
        for fd in held:
            os.close(fd)
        again = _outcome(lambda: os.write(os.open("v", os.O_CREAT | os.O_WRONLY), b"z" * MIB))
        return {"full": full, "after closing": again}

    result, most, _ = _gated(steps)
    assert result == {"full": "ENOSPC", "after closing": "ok"}
    assert most <= QUOTA


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda fd: os.ftruncate(fd, 15 * MIB), "ok"),
        (lambda fd: os.ftruncate(fd, 17 * MIB), "ENOSPC"),
        (lambda fd: os.posix_fallocate(fd, 0, 17 * MIB), "ENOSPC"),
        (lambda fd: os.pwrite(fd, b"x", 17 * MIB), "ENOSPC"),
        (lambda fd: os.writev(fd, [b"x" * MIB] * 2), "ok"),
        (lambda fd: os.truncate("t", 17 * MIB), "ENOSPC"),
    ],
    ids=["ftruncate", "ftruncate-past", "fallocate-past", "pwrite-past", "writev", "truncate"],
)
def test_every_way_to_grow_a_file_is_decided(
    call: Callable[[int], object], expected: str
) -> None:
    def steps() -> dict[str, object]:
        fd = os.open("t", os.O_CREAT | os.O_RDWR, 0o600)
        return {"outcome": _outcome(lambda: call(fd))}

    result, most, _ = _gated(steps)
    assert result == {"outcome": expected}
    assert most <= QUOTA


def test_writes_elsewhere_pass_and_threads_are_refused() -> None:
    def steps() -> dict[str, object]:
        read, write = os.pipe()
        thread = threading.Thread(target=lambda: None)
        return {
            "pipe": _outcome(lambda: os.write(write, b"x" * 4096)),
            "dev null": _outcome(lambda: os.write(os.open("/dev/null", os.O_WRONLY), b"x")),
            "thread": _outcome(thread.start),
        }

    result, _, refused = _gated(steps)
    assert result == {"pipe": "ok", "dev null": "ok", "thread": "can't start new thread"}
    assert refused == 0
