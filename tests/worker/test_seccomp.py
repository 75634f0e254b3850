"""The child's seccomp filters, loaded in a forked process: what they refuse, what they let
through, and the per-child signal filter against every pid it could be given."""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import mmap
import os
import random
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from worker import _seccomp

pytestmark = pytest.mark.skipif(not _seccomp.available(), reason="libseccomp is not available")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _raw(name: str, *args: int) -> int:
    """A system call made raw, to pass arguments no wrapper would (high bits, -1)."""
    import pyseccomp

    number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    result = _libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(result)


@pytest.fixture
def bystander() -> Iterator[int]:
    """A process of the same uid that a filtered program must not be able to signal."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(write)
        os.read(read, 1)
        os._exit(0)
    os.close(read)
    yield pid
    os.close(write)
    os.waitpid(pid, 0)


def _filtered(body: Callable[[int], dict[str, Any]]) -> dict[str, Any]:
    """Run ``body(own pid)`` in a forked process under the filters; its JSON result."""
    _seccomp.prepare()  # as the zygote does, before forking
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            _libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
            _seccomp.install()
            found = body(os.getpid())
        except BaseException as exc:  # reported to the test, never hang it
            found = {"error": repr(exc)}
        os.write(write, json.dumps(found).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(data)
    assert "error" not in result, result
    return result


def _outcome(call: Callable[[], object]) -> str:
    try:
        call()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))
    return "ok"


def test_signals_reach_only_the_process_itself(bystander: int) -> None:
    def attempts(me: int) -> dict[str, Any]:
        thread = threading.get_ident()
        cases: dict[str, Callable[[], object]] = {
            "kill other": lambda: os.kill(bystander, 0),
            "kill group 0": lambda: os.kill(0, 0),
            "kill all -1": lambda: _raw("kill", -1, 0),
            "kill group -pid": lambda: _raw("kill", -bystander, 0),
            "kill other, high bits": lambda: _raw("kill", bystander | 1 << 32, 0),
            "kill self, high bits": lambda: _raw("kill", me | 1 << 32, 0),
            "tgkill other": lambda: _raw("tgkill", bystander, bystander, 0),
            "tkill any thread": lambda: _raw("tkill", bystander, 0),
            "pidfd_open other": lambda: os.pidfd_open(bystander),
            "pidfd_send_signal": lambda: signal.pidfd_send_signal(os.pidfd_open(me), 0),
            "kill self": lambda: os.kill(me, 0),
            "tgkill self": lambda: _raw("tgkill", me, me, 0),
            "pthread_kill self": lambda: signal.pthread_kill(thread, 0),
            "pidfd_open self": lambda: os.close(os.pidfd_open(me)),
        }
        return {name: _outcome(call) for name, call in cases.items()}

    outcomes = _filtered(attempts)
    allowed = {"kill self", "tgkill self", "pthread_kill self", "pidfd_open self"}
    assert outcomes == {name: "ok" if name in allowed else "EPERM" for name in outcomes}


def test_the_pid_filter_allows_exactly_the_own_pid_on_all_64_bits() -> None:
    def sweep(me: int) -> dict[str, Any]:
        rng = random.Random(18)
        values = {me, 0, 1, -1, me + 1, me - 1, -me, me | 1 << 32, me | 1 << 63, (1 << 64) - 1}
        values |= {rng.getrandbits(64) for _ in range(2000)}
        values |= {rng.getrandbits(31) for _ in range(2000)}
        let_through = []
        for value in values:
            signed = value - (1 << 64) if value >= 1 << 63 else value
            if _outcome(functools.partial(_raw, "kill", signed, 0)) != "EPERM":
                let_through.append(signed)
        return {"through": let_through, "me": me}

    result = _filtered(sweep)
    assert result["through"] == [result["me"]]


def test_memory_that_private_accounting_misses_is_refused() -> None:
    def attempts(me: int) -> dict[str, Any]:
        read, write = os.pipe()
        cases: dict[str, Callable[[], object]] = {
            "memfd_create": lambda: os.memfd_create("x"),
            "mmap shared anonymous": lambda: mmap.mmap(-1, 4096),
            "shmget": lambda: _raw("shmget", 0, 4096, 0o1600),
            "pipe buffer 1 MiB": lambda: _raw("fcntl", write, 1031, 1 << 20),
            "SIGIO owner (fcntl)": lambda: _raw("fcntl", write, 8, 1),
            "SIGIO owner, high bits": lambda: _raw("fcntl", write, 8 | 1 << 32, 1),
            "SIGIO owner (ioctl)": lambda: _raw("ioctl", read, 0x8901, 0),
            "mmap private anonymous": lambda: mmap.mmap(
                -1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
            ),
            "fcntl F_GETFL": lambda: _raw("fcntl", write, 3, 0),
        }
        return {name: _outcome(call) for name, call in cases.items()}

    outcomes = _filtered(attempts)
    allowed = {"mmap private anonymous", "fcntl F_GETFL"}
    assert outcomes == {name: "ok" if name in allowed else "EPERM" for name in outcomes}


def test_what_the_runtime_needs_still_works() -> None:
    def attempts(me: int) -> dict[str, Any]:
        def thread() -> None:
            worker = threading.Thread(target=lambda: None)
            worker.start()
            worker.join()

        cases: dict[str, Callable[[], object]] = {
            "socketpair": lambda: socket.socketpair(),
            "thread": thread,
            "socket": lambda: socket.socket().close(),
            "fork": os.fork,
        }
        return {name: _outcome(call) for name, call in cases.items()}

    assert _filtered(attempts) == {
        "socketpair": "ok",
        "thread": "ok",
        "socket": "EPERM",
        "fork": "EPERM",
    }


def test_the_signal_filter_rejects_what_is_not_a_pid() -> None:
    for bad in (0, -1, 1 << 31):
        with pytest.raises(ValueError, match="not a pid"):
            _seccomp.signal_filter(bad, arch=0, numbers=(62,))
