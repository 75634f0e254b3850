"""The child's seccomp filters: one built once in the zygote, one per child for its own pid.

The base filter (libseccomp via pyseccomp; libseccomp checks the arch) answers EPERM to:
``socket`` (``socketpair`` stays: the runtime and asyncio need it), exec, fork/vfork,
``clone`` without ``CLONE_THREAD`` (threads still work), ptrace, mount and namespace calls,
bpf, io_uring, keyrings, module loading and other kernel-attack surface; the calls that would
let a program signal another process without naming its pid (``tkill``, which takes any
thread id, ``pidfd_send_signal``, ``fcntl``/``ioctl`` that make a file send SIGIO to another
owner); and every kind of memory that private-memory accounting (RLIMIT_DATA) does not see
and that may outlive the process: ``memfd_create``, System V shared memory, semaphores and
message queues, POSIX message queues, shared anonymous ``mmap``, larger pipe buffers.
``clone3`` answers ENOSYS so libc falls back to ``clone``, whose flags we can inspect. A
syscall from a foreign arch kills the process (libseccomp's default bad-arch action).

The per-child filter (:func:`signal_filter`, a few classic BPF instructions built without
libseccomp) allows ``kill``, ``tgkill``, ``rt_sigqueueinfo``, ``rt_tgsigqueueinfo`` and
``pidfd_open`` only with the child's own pid as their first argument, compared on all 64
bits (the kernel reads 32: a value with high bits set is refused, never truncated to another
pid); 0, -1 and negative pids (process groups, every process) are refused. Without a pid
namespace or Landlock's signal scope (ABI 6), this is what keeps a program from signalling
the host's processes of its uid.

Both are built once, in the zygote, as the programs the kernel reads (the base filter
exported from libseccomp, whose own load would generate it again in every child, with
mallocs that copy about 0.45 MiB of the zygote's heap): a child patches its pid into the
per-child filter and loads the two with one system call each.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from typing import Any

from ._gate_filter import gate_numbers, write_gate_filter

DENIED_SYSCALLS: tuple[str, ...] = (
    "socket",
    "execve",
    "execveat",
    "fork",
    "vfork",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    "mknod",
    "mknodat",
    "fsopen",
    "fsmount",
    "open_tree",
    "move_mount",
    # Signals to a target the pid filter cannot see: any thread id, a pidfd.
    "tkill",
    "pidfd_send_signal",
    "pidfd_getfd",
    "process_madvise",
    # Memory outside RLIMIT_DATA, some of it outliving the process without an ipc namespace.
    "memfd_create",
    "memfd_secret",
    "shmget",
    "shmat",
    "shmctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
    # Asynchronous I/O writes files without a write(2) the keeper's gate would see.
    "io_setup",
    "io_submit",
)
_CLONE_THREAD = 0x00010000
_LOW_32 = 0xFFFFFFFF
_F_SETOWN = 8
_F_SETOWN_EX = 15
_F_SETPIPE_SZ = 1031
_FIOSETOWN = 0x8901
_SIOCSPGRP = 0x8902
_MAP_SHARED = 0x01  # MAP_SHARED_VALIDATE (0x03) has this bit too
_MAP_ANONYMOUS = 0x20
ARGUMENT_RULES: tuple[tuple[str, str, int, int, int], ...] = (
    # (what it stops, syscall, argument, mask, value): EPERM when (arg & mask) == value.
    # The kernel reads these arguments as 32-bit ints: only the low half is compared.
    ("SIGIO to another owner", "fcntl", 1, _LOW_32, _F_SETOWN),
    ("SIGIO to another owner", "fcntl", 1, _LOW_32, _F_SETOWN_EX),
    ("SIGIO to another owner", "ioctl", 1, _LOW_32, _FIOSETOWN),
    ("SIGIO to another owner", "ioctl", 1, _LOW_32, _SIOCSPGRP),
    ("pipe buffers beyond 64 KiB", "fcntl", 1, _LOW_32, _F_SETPIPE_SZ),
    (
        "shared anonymous memory",
        "mmap",
        3,
        _MAP_SHARED | _MAP_ANONYMOUS,
        _MAP_SHARED | _MAP_ANONYMOUS,
    ),
)
SIGNAL_SYSCALLS: tuple[str, ...] = (
    "kill",
    "tgkill",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "pidfd_open",
)
"""Allowed only with the child's own pid as first argument (:func:`signal_filter`)."""


try:
    # Imported eagerly (the zygote preloads this module): finding libseccomp reads files
    # that Landlock hides from the child later.
    import pyseccomp as _sc
except (ImportError, OSError, RuntimeError):  # pragma: no cover - depends on the host
    _sc = None


def available() -> bool:
    """True when libseccomp can be loaded."""
    return _sc is not None


class _Program:
    """A BPF program as ``seccomp(SECCOMP_SET_MODE_FILTER)`` takes it, its buffer and
    ``sock_fprog`` made where it is built (the zygote): a child that loads it makes no
    ctypes object of its own (each one costs it copy-on-write page faults)."""

    def __init__(self, program: bytes) -> None:
        self.buffer = ctypes.create_string_buffer(program, len(program))
        self._fprog = _SockFprog(len(program) // 8, ctypes.addressof(self.buffer))

    def load(self, flags: int = 0) -> int:
        return _seccomp(flags, ctypes.byref(self._fprog))


class _Prepared:
    """The base filter, what it denies, and what the per-child filter needs to know."""

    def __init__(
        self,
        base: bytes,
        denied: tuple[str, ...],
        arch: int,
        signals: tuple[int, ...],
        growth: dict[int, str],
        clone: int,
    ) -> None:
        self.base = _Program(base)
        self.denied = denied
        self.arch = arch
        self.signal_numbers = signals
        self.growth = growth
        self.clone = clone
        # The per-child filter differs only in the pid it compares: built once here, and
        # each child patches its pid in (one jeq's constant) instead of building it.
        template = signal_filter(_PLACEHOLDER_PID, arch=arch, numbers=signals)
        self.pid_offset = _pid_offset(template)
        self.signals = _Program(template)


_prepared: _Prepared | None = None


def prepare() -> None:
    """Build both filters now (the zygote does, once, before it forks): a child then only
    loads them, about 0.25 ms of its CPU here instead of 1 ms (with libseccomp's load).
    Raises like :func:`install`."""
    global _prepared
    if _prepared is not None:
        return
    sc = _sc
    if sc is None:
        raise OSError("libseccomp is not available")
    filt = sc.SyscallFilter(defaction=sc.ALLOW)
    denied: list[str] = []
    for name in DENIED_SYSCALLS:
        try:
            filt.add_rule(sc.ERRNO(errno.EPERM), name)
        except (OSError, RuntimeError, ValueError):
            continue  # not a syscall on this arch
        denied.append(name)
    filt.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    filt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for _, name, arg, mask, value in ARGUMENT_RULES:
        filt.add_rule(sc.ERRNO(errno.EPERM), name, sc.Arg(arg, sc.MASKED_EQ, mask, value))
    arch = int(sc.system_arch())
    numbers = tuple(int(sc.resolve_syscall(sc.Arch.NATIVE, n)) for n in SIGNAL_SYSCALLS)
    growth = gate_numbers(lambda name: int(sc.resolve_syscall(sc.Arch.NATIVE, name)))
    clone = int(sc.resolve_syscall(sc.Arch.NATIVE, "clone"))
    _prepared = _Prepared(
        _exported(filt),
        (*denied, "clone(without CLONE_THREAD)", "clone3(ENOSYS)"),
        arch,
        numbers,
        growth,
        clone,
    )


def _exported(filt: Any) -> bytes:
    """The BPF program libseccomp would load for ``filt`` (arch check included)."""
    with os.fdopen(os.memfd_create("ptc-seccomp", os.MFD_CLOEXEC), "w+b") as fh:
        filt.export_bpf(fh)  # written through the fd, past the file object's buffer
        fh.seek(0)
        program = fh.read()
    if not program or len(program) % 8:
        raise OSError(errno.EINVAL, f"libseccomp exported {len(program)} bytes of BPF")
    return program


def install() -> tuple[str, ...]:
    """Set ``no_new_privs`` and load the base filter and the signal filter for this
    process's pid into the calling thread; returns what they deny.

    Raises ``OSError`` when seccomp cannot be applied.
    """
    prepare()
    assert _prepared is not None
    if _prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # as libseccomp's own load did
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
    _prepared.base.load()
    struct.pack_into("=I", _prepared.signals.buffer, _prepared.pid_offset, os.getpid())
    _prepared.signals.load()
    return (*_prepared.denied, "signals to any pid but its own")


def growth_syscalls() -> dict[int, str]:
    """Number -> name of the calls the write gate looks at on this arch (for the keeper)."""
    prepare()
    assert _prepared is not None
    return dict(_prepared.growth)


def install_write_gate() -> int:
    """Load the write gate (``_gate_filter``) into the calling thread: every call that can
    make the scratch dir take more space waits until the holder of the returned listener fd
    answers (seccomp user notification, Linux 5.5 for the answer "go on"), and ``clone`` is
    refused, so no thread can change the process's files while one waits. Raises
    ``OSError`` where the kernel or a container's profile refuses it."""
    prepare()
    assert _prepared is not None
    program = write_gate_filter(
        arch=_prepared.arch, numbers=_prepared.growth, refused=(_prepared.clone,)
    )
    return _load(program, flags=_SECCOMP_FILTER_FLAG_NEW_LISTENER)


# Classic BPF, as seccomp reads it (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
_ARCH_OFFSET = 4
_NR_OFFSET = 0
_ARG0_LOW = 16  # seccomp_data.args[0], little-endian (x86_64, aarch64)
_ARG0_HIGH = 20
_SECCOMP_SET_MODE_FILTER = 1


_PLACEHOLDER_PID = 0x7FFFFFFE


def _pid_offset(template: bytes) -> int:
    """Where the pid constant sits in a :func:`signal_filter` built for the placeholder."""
    for at in range(0, len(template), 8):
        code, _, _, k = struct.unpack_from("=HBBI", template, at)
        if code == _JEQ_K and k == _PLACEHOLDER_PID:
            return at + 4
    raise ValueError("no pid in the signal filter")


def signal_filter(own_pid: int, *, arch: int, numbers: tuple[int, ...]) -> bytes:
    """The per-child filter as packed ``sock_filter`` instructions: the calls ``numbers``
    get EPERM unless their first argument is exactly ``own_pid`` (all 64 bits); every other
    call, and any call from a foreign arch (which the base filter kills), is allowed."""
    if not 0 < own_pid <= 0x7FFFFFFF:
        raise ValueError(f"not a pid: {own_pid}")
    n = len(numbers)
    # Layout: 0 ld arch; 1 jeq arch; 2 ld nr; 3..3+n-1 jeq nr -> check; 3+n ret allow;
    # check: ld low; jeq pid; ld high; jeq 0; ret allow; ret errno.
    allow_early = 3 + n
    check = allow_early + 1
    allow, deny = check + 4, check + 5
    prog = [
        (_LD_W_ABS, 0, 0, _ARCH_OFFSET),
        (_JEQ_K, 0, allow_early - 2, arch),
        (_LD_W_ABS, 0, 0, _NR_OFFSET),
    ]
    for i, number in enumerate(numbers):
        at = 3 + i
        prog.append((_JEQ_K, check - at - 1, 0, number))
    prog += [
        (_RET_K, 0, 0, _RET_ALLOW),
        (_LD_W_ABS, 0, 0, _ARG0_LOW),
        (_JEQ_K, 0, deny - (check + 1) - 1, own_pid),
        (_LD_W_ABS, 0, 0, _ARG0_HIGH),
        (_JEQ_K, allow - (check + 3) - 1, deny - (check + 3) - 1, 0),
        (_RET_K, 0, 0, _RET_ALLOW),
        (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
    ]
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_syscall = _libc.syscall
_prctl = _libc.prctl  # bound now: a child's first lookup would cost it page faults
_PR_SET_NO_NEW_PRIVS = 38
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}.get(platform.machine())


def _seccomp(flags: int, fprog: Any) -> int:
    """``seccomp(SECCOMP_SET_MODE_FILTER, flags, fprog)``: its result, or ``OSError``."""
    if _SYS_SECCOMP is None:
        raise OSError(errno.ENOSYS, f"seccomp: no syscall number for {platform.machine()}")
    result = int(_syscall(_SYS_SECCOMP, _SECCOMP_SET_MODE_FILTER, flags, fprog))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp(SET_MODE_FILTER): {os.strerror(err)}")
    return result


def _load(program: bytes, flags: int = 0) -> int:
    return _Program(program).load(flags)
