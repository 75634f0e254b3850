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
import resource
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from worker._kernel import _bpf, _seccomp

pytestmark = pytest.mark.skipif(not _seccomp.available(), reason="libseccomp is not available")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _raw(name: str | int, *args: int) -> int:
    """A system call (by name or number) made raw, to pass arguments no wrapper would (high
    bits, -1)."""
    import pyseccomp

    number = (
        name if isinstance(name, int) else pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    )
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


_SCRATCH = ctypes.create_string_buffer(4096)


def _scratch() -> int:
    """The address of a buffer a raw call may write its answer into."""
    return ctypes.addressof(_SCRATCH)


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


@pytest.mark.parametrize(("syscall", "zero"), [("kill", False), ("prlimit64", True)])
def test_the_pid_filter_allows_exactly_the_own_pid_on_all_64_bits(syscall: str, zero: bool) -> None:
    # kill: 0 is the process group; prlimit64: 0 is the caller itself.
    def sweep(me: int) -> dict[str, Any]:
        rng = random.Random(18)
        values = {me, 0, 1, -1, me + 1, me - 1, -me, me | 1 << 32, me | 1 << 63, (1 << 64) - 1}
        values |= {rng.getrandbits(64) for _ in range(2000)}
        values |= {rng.getrandbits(31) for _ in range(2000)}
        let_through = []
        for value in values:
            signed = value - (1 << 64) if value >= 1 << 63 else value
            if _outcome(functools.partial(_raw, syscall, signed, 0, 0, 0)) != "EPERM":
                let_through.append(signed)
        return {"through": sorted(let_through), "me": me}

    result = _filtered(sweep)
    assert result["through"] == ([0, result["me"]] if zero else [result["me"]])


def test_no_call_that_names_another_process_reaches_it(bystander: int) -> None:
    # The red team's list (issue 27) and the rest of the review (docs/security.md): each is
    # refused on the bystander, a process of the same uid, and works on the caller itself.
    def attempts(me: int) -> dict[str, Any]:
        def both(call: Callable[[int], object]) -> tuple[str, str, str]:
            return (
                _outcome(lambda: call(bystander)),
                _outcome(lambda: call(me)),
                _outcome(lambda: call(0)),
            )

        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
        cases: dict[str, Callable[[int], object]] = {
            "prlimit set": lambda pid: resource.prlimit(pid, resource.RLIMIT_NOFILE, nofile),
            "prlimit get": lambda pid: resource.prlimit(pid, resource.RLIMIT_NOFILE),
            "setpriority": lambda pid: os.setpriority(os.PRIO_PROCESS, pid, 0),
            "getpriority": lambda pid: os.getpriority(os.PRIO_PROCESS, pid),
            "sched_setaffinity": lambda pid: os.sched_setaffinity(pid, os.sched_getaffinity(0)),
            "sched_getaffinity": lambda pid: os.sched_getaffinity(pid),
            "sched_setscheduler": lambda pid: os.sched_setscheduler(
                pid, os.SCHED_OTHER, os.sched_param(0)
            ),
            "sched_getscheduler": lambda pid: os.sched_getscheduler(pid),
            "sched_setparam": lambda pid: os.sched_setparam(pid, os.sched_param(0)),
            "sched_getparam": lambda pid: os.sched_getparam(pid),
            "sched_rr_get_interval": lambda pid: os.sched_rr_get_interval(pid),
            "sched_getattr": lambda pid: _raw("sched_getattr", pid, _scratch(), 56, 0),
            "ioprio_get": lambda pid: _raw("ioprio_get", 1, pid),
            "ioprio_set": lambda pid: _raw("ioprio_set", 1, pid, 0),
            "get_robust_list": lambda pid: _raw("get_robust_list", pid, _scratch(), _scratch()),
            "migrate_pages": lambda pid: _raw("migrate_pages", pid, 64, _scratch(), _scratch()),
            "move_pages": lambda pid: _raw("move_pages", pid, 0, 0, 0, 0, 0),
            "getpgid": os.getpgid,
            "getsid": os.getsid,
        }
        found = {name: both(call) for name, call in cases.items()}
        # Groups and users: PRIO_USER 0 is every process of this uid.
        found["setpriority user"] = (_outcome(lambda: os.setpriority(os.PRIO_USER, 0, 0)),) * 3
        found["setpriority group"] = (_outcome(lambda: os.setpriority(os.PRIO_PGRP, 0, 0)),) * 3
        found["ioprio_set user"] = (_outcome(lambda: _raw("ioprio_set", 3, 0, 0)),) * 3
        found["setpgid other group"] = (_outcome(lambda: os.setpgid(0, bystander)),) * 3
        found["kcmp"] = (_outcome(lambda: _raw("kcmp", me, bystander, 0, 0, 0)),) * 3
        found["process_mrelease"] = (_outcome(lambda: _raw("process_mrelease", 0, 0)),) * 3
        return found

    outcomes = _filtered(attempts)
    refused_outright = {
        "setpriority user",
        "setpriority group",
        "ioprio_set user",
        "setpgid other group",
        "kcmp",
        "process_mrelease",
    }
    for name, (other, itself, zero) in outcomes.items():
        assert other == "EPERM", (name, other)
        if name not in refused_outright:
            # Past the filter (the kernel may still refuse a dummy argument, never EPERM).
            assert "EPERM" not in (itself, zero), (name, itself, zero)


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
            # Counted as stack, not data: a MAP_GROWSDOWN mapping, or a piece of the stack
            # moved by mremap and grown (the red team held 1 GiB with memory_mib=64).
            "mmap growsdown": lambda: mmap.mmap(
                -1, 1 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x0100
            ),
            "mremap the stack": lambda: _raw("mremap", _stack_bottom(), 4096, 1 << 29, 1, 0),
            "mremap a mapping": lambda: mmap.mmap(
                -1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
            ).resize(1 << 20),
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


def test_no_unix_socket_is_reached_by_path_or_name(tmp_path: Any) -> None:
    # The red team's datagrams reached a host daemon's socket from a socketpair (every
    # environment, E1 included): only connected stream and seqpacket pairs can be made.
    path = str(tmp_path / "daemon.sock")
    daemon = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    daemon.bind(path)
    daemon.setblocking(False)

    def attempts(me: int) -> dict[str, Any]:
        stream, _ = socket.socketpair()
        cases: dict[str, Callable[[], object]] = {
            "socketpair dgram": lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM),
            "socketpair raw": lambda: _raw("socketpair", 1, 3, 0, _scratch()),
            "socketpair inet": lambda: _raw("socketpair", 2, 1, 0, _scratch()),
            "socketpair dgram, flags": lambda: _raw(
                "socketpair", 1, 2 | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK, 0, _scratch()
            ),
            "connect by path": lambda: stream.connect(path),
            "connect abstract": lambda: stream.connect("\0ptc-test-abstract"),
            "sendto by path": lambda: stream.sendto(b"x", path),
            "bind abstract": lambda: stream.bind("\0ptc-test-abstract"),
            "listen": lambda: stream.listen(1),
            "socketpair stream": lambda: socket.socketpair(),
            "socketpair seqpacket, flags": lambda: socket.socketpair(
                socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC
            ),
            "send on the pair": lambda: stream.send(b"x"),
        }
        return {name: _outcome(call) for name, call in cases.items()}

    outcomes = _filtered(attempts)
    allowed = {"socketpair stream", "socketpair seqpacket, flags", "send on the pair"}
    assert outcomes == {name: "ok" if name in allowed else "EPERM" for name in outcomes}
    with pytest.raises(BlockingIOError):
        daemon.recv(16)  # nothing arrived
    daemon.close()


def test_files_the_scratch_quota_cannot_see_are_refused_and_python_copes(tmp_path: Any) -> None:
    # Extended attributes take blocks and kernel memory no size shows; an O_TMPFILE file has
    # no name to count. Both answer as a filesystem without them would, and the standard
    # library falls back (tempfile to a named file, shutil.copy2 without xattrs).
    (tmp_path / "src").write_text("x")

    def attempts(me: int) -> dict[str, Any]:
        src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
        flags = os.O_RDWR | os.O_TMPFILE
        cases: dict[str, Callable[[], object]] = {
            "setxattr": lambda: os.setxattr(src, "user.big", b"x" * 4000),
            "fsetxattr": lambda: _with_fd(src, lambda fd: os.setxattr(fd, "user.a", b"x")),
            "removexattr": lambda: os.removexattr(src, "user.a"),
            "setxattrat": lambda: _raw(
                _seccomp.XATTR_SYSCALLS["setxattrat"] or 0, -100, 0, 0, 0, 0
            ),
            "open O_TMPFILE": lambda: os.open(str(tmp_path), flags),
            "openat2": lambda: _raw("openat2", -100, _scratch(), _scratch(), 24),
            "inotify_init1": lambda: _raw("inotify_init1", 0),
            "TemporaryFile": lambda: tempfile.TemporaryFile(dir=tmp_path).write(b"x"),
            "copy2": lambda: shutil.copy2(src, dst),
        }
        return {name: _outcome(call) for name, call in cases.items()}

    assert _filtered(attempts) == {
        "setxattr": "ENOTSUP",  # = EOPNOTSUPP on Linux
        "fsetxattr": "ENOTSUP",
        "removexattr": "ENOTSUP",
        "setxattrat": "ENOTSUP",
        "open O_TMPFILE": "ENOTSUP",
        "openat2": "ENOSYS",
        "inotify_init1": "EPERM",
        "TemporaryFile": "ok",
        "copy2": "ok",
    }


def test_a_child_loads_one_filter() -> None:
    # The base and the per-child rules chained into one program: the kernel prepares,
    # compiles and caches one filter per child.
    def count(pid: int) -> dict[str, Any]:
        with open("/proc/self/status") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
        return {"filters": fields["Seccomp_filters"].strip(), "mode": fields["Seccomp"].strip()}

    assert _filtered(count) == {"filters": "1", "mode": "2"}


def test_the_per_child_filter_rejects_what_is_not_a_pid() -> None:
    rules = ((62, _bpf.SELF_RULES[0]),)
    for bad in (0, -1, 1 << 31):
        with pytest.raises(ValueError, match="not a pid"):
            _bpf.self_filter(bad, arch=0, rules=rules)


def test_every_pid_constant_of_the_template_is_patched() -> None:
    _seccomp.prepare()
    template = _bpf.self_filter(_bpf.PLACEHOLDER_PID, arch=0, rules=_rules())
    offsets = _bpf.pid_offsets(template)
    # One constant per argument that names a process.
    assert len(offsets) == sum(len(rule.pid_args) for rule in _bpf.SELF_RULES)


def _rules() -> tuple[tuple[int, _bpf.SelfRule], ...]:
    return tuple((400 + i, rule) for i, rule in enumerate(_bpf.SELF_RULES))


def _with_fd(path: str, use: Callable[[int], object]) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        use(fd)
    finally:
        os.close(fd)


def _stack_bottom() -> int:
    """The lowest address of this process's main stack."""
    with open("/proc/self/maps") as fh:
        for line in fh:
            if line.rstrip().endswith("[stack]"):
                return int(line.split("-", 1)[0], 16)
    raise AssertionError("no [stack] in /proc/self/maps")
