"""The child's seccomp filters: one built once in the zygote, one per child for its own pid.

The base filter (libseccomp via pyseccomp; libseccomp checks the arch) answers EPERM to:
``socket`` (``socketpair`` stays, for ``AF_UNIX`` stream and seqpacket pairs only: the runtime
and asyncio need them), ``connect``, ``bind``, ``listen``, ``accept`` and ``sendto`` with an
address (no unix socket by path or abstract name can be reached, a datagram included, in any
environment, whatever the Landlock ABI); exec, fork/vfork, ``clone`` without ``CLONE_THREAD``
(threads still work), ptrace, mount and namespace calls, bpf, io_uring, keyrings, module
loading, the kernel log and other kernel-attack surface; the calls that would let a program
reach another process without naming its pid in an argument the per-child filter can read
(``tkill``, ``pidfd_send_signal``, ``kcmp``, ``fcntl``/``ioctl`` that make a file send SIGIO to
another owner); every kind of memory that private-memory accounting (RLIMIT_DATA) does not
see and that may outlive the process (``memfd_create``, System V shared memory, semaphores and
message queues, POSIX message queues, shared anonymous ``mmap``, larger pipe buffers) or that
it counts as stack (``MAP_GROWSDOWN``, and ``mremap``, which can move a piece of the stack
and grow it); per-user kernel objects a program could use up against its keeper
(``inotify``); and what the scratch quota cannot see: extended attributes (EOPNOTSUPP, as on
a filesystem without them) and ``O_TMPFILE`` files (EOPNOTSUPP: ``tempfile`` falls back to a
named file). ``clone3`` and ``openat2`` answer ENOSYS so libc falls back to ``clone`` and
``openat``, whose arguments we can inspect. A syscall from a foreign arch kills the process
(libseccomp's default bad-arch action).

The per-child filter (``_bpf.self_filter``, classic BPF built without libseccomp) allows every
system call that names another process (signals, rlimits, priorities, scheduling, I/O
priority, page migration, process groups: ``_bpf.SELF_RULES``) only when it names the child
itself. Without a pid namespace, this is what keeps a program from its keeper, its host and
other runs of the same uid.

Both are built once, in the zygote, as the programs the kernel reads (the base filter
exported from libseccomp as a binary tree of syscall numbers, whose own load would generate
it again in every child, with mallocs that copy about 0.45 MiB of the zygote's heap), and
chained into one program (``_bpf.chain``): a child patches its pid into it and loads it with
one system call. One filter instead of two: the kernel converts, compiles and builds the
action cache of one program per child (about 0.2 ms less per child, measured in
``../shared/reference/perf-floor.md``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from typing import Any

from . import _bpf
from ._gate_filter import gate_numbers, write_gate_filter
from ._syscalls import libc

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
    "kexec_file_load",
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    "mknod",
    "mknodat",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "open_tree",
    "move_mount",
    "mount_setattr",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "uselib",
    "lookup_dcookie",
    # A global memory barrier interrupts every CPU of the machine.
    "membarrier",
    # Sockets: nothing to connect to, no name to take (a socketpair is connected already).
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    # Another process reached through a handle the per-child filter cannot read: any
    # thread id, a pidfd, a pair of pids.
    "tkill",
    "pidfd_send_signal",
    "pidfd_getfd",
    "process_madvise",
    "process_mrelease",
    "kcmp",
    # Per-user kernel objects (128 inotify instances per uid): the keeper's quota needs one.
    "inotify_init",
    "inotify_init1",
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
    # Memory counted as stack, not data: mremap can move a piece of the stack and grow it.
    "mremap",
    # Asynchronous I/O writes files without a write(2) the keeper's gate would see.
    "io_setup",
    "io_submit",
)
NEWER_SYSCALLS: dict[str, int] = {
    "open_tree_attr": 467,
    "listmount": 458,
    "statmount": 457,
}
"""Denied too, by number: younger than some libseccomp releases that still know the rest
(numbers from 424 on are the same on every architecture ptc runs on)."""
XATTR_SYSCALLS: dict[str, int | None] = {
    "setxattr": None,
    "lsetxattr": None,
    "fsetxattr": None,
    "removexattr": None,
    "lremovexattr": None,
    "fremovexattr": None,
    "setxattrat": 463,
    "removexattrat": 466,
}
"""Extended attributes take blocks the scratch quota does not see and kernel memory on a
tmpfs: answered EOPNOTSUPP, as a filesystem without them would (``shutil.copystat`` expects
that). ``None``: libseccomp knows the name; else the number (Linux 6.13)."""
_CLONE_THREAD = 0x00010000
_LOW_32 = 0xFFFFFFFF
_F_SETOWN = 8
_F_SETOWN_EX = 15
_F_SETPIPE_SZ = 1031
_FIOSETOWN = 0x8901
_SIOCSPGRP = 0x8902
_MAP_SHARED = 0x01  # MAP_SHARED_VALIDATE (0x03) has this bit too
_MAP_ANONYMOUS = 0x20
_MAP_GROWSDOWN = 0x0100
_AF_UNIX = 1
_SOCK_TYPE_MASK = 0xF
_SOCK_STREAM = 1
_SOCK_SEQPACKET = 5
_O_TMPFILE_BIT = 0o20000000  # __O_TMPFILE: O_TMPFILE is this bit with O_DIRECTORY
ARGUMENT_RULES: tuple[tuple[str, str, int, int, int, int], ...] = (
    # (what it stops, syscall, errno, argument, mask, value): the errno when
    # (arg & mask) == value. The kernel reads most of these as 32-bit ints: only the low
    # half is compared where it does.
    ("SIGIO to another owner", "fcntl", errno.EPERM, 1, _LOW_32, _F_SETOWN),
    ("SIGIO to another owner", "fcntl", errno.EPERM, 1, _LOW_32, _F_SETOWN_EX),
    ("SIGIO to another owner", "ioctl", errno.EPERM, 1, _LOW_32, _FIOSETOWN),
    ("SIGIO to another owner", "ioctl", errno.EPERM, 1, _LOW_32, _SIOCSPGRP),
    ("pipe buffers beyond 64 KiB", "fcntl", errno.EPERM, 1, _LOW_32, _F_SETPIPE_SZ),
    (
        "shared anonymous memory",
        "mmap",
        errno.EPERM,
        3,
        _MAP_SHARED | _MAP_ANONYMOUS,
        _MAP_SHARED | _MAP_ANONYMOUS,
    ),
    ("memory counted as stack", "mmap", errno.EPERM, 3, _MAP_GROWSDOWN, _MAP_GROWSDOWN),
    ("files with no name", "open", errno.EOPNOTSUPP, 1, _O_TMPFILE_BIT, _O_TMPFILE_BIT),
    ("files with no name", "openat", errno.EOPNOTSUPP, 2, _O_TMPFILE_BIT, _O_TMPFILE_BIT),
    # A datagram or raw pair could be given an address with sendmsg (which seccomp cannot
    # read); a stream or seqpacket pair is connected and ignores one.
    *(
        (
            "socketpairs other than stream/seqpacket",
            "socketpair",
            errno.EPERM,
            1,
            _SOCK_TYPE_MASK,
            kind,
        )
        for kind in range(_SOCK_TYPE_MASK + 1)
        if kind not in (_SOCK_STREAM, _SOCK_SEQPACKET)
    ),
)
NONZERO_RULES: tuple[tuple[str, str, int], ...] = (
    # (what it stops, syscall, argument): EPERM when the argument is not 0 (all 64 bits).
    ("a datagram to an address (a unix socket by path or name)", "sendto", 4),
)
NOT_EQUAL_RULES: tuple[tuple[str, str, int, int], ...] = (
    # (what it stops, syscall, argument, value): EPERM when the argument is anything else.
    ("socketpairs of other families", "socketpair", 0, _AF_UNIX),
)


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
    """The base filter, what it denies, and the per-child filter's template."""

    def __init__(
        self,
        base: bytes,
        denied: tuple[str, ...],
        arch: int,
        own: tuple[tuple[int, _bpf.SelfRule], ...],
        growth: dict[int, str],
        clone: int,
    ) -> None:
        self.denied = denied
        self.arch = arch
        self.growth = growth
        self.clone = clone
        # The per-child filter differs only in the pid it compares: built once here, in
        # front of the base filter, and each child patches its pid into those constants
        # (all in the per-child part, which comes first) instead of building it.
        template = _bpf.self_filter(_bpf.PLACEHOLDER_PID, arch=arch, rules=own)
        self.pid_offsets = _bpf.pid_offsets(template)
        self.program = _Program(_bpf.chain(template, base))


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
    try:  # a binary tree of syscall numbers (libseccomp >= 2.5): fewer instructions run
        filt.set_attr(sc.Attr.CTL_OPTIMIZE, 2)
    except (AttributeError, OSError, RuntimeError, ValueError):
        pass  # an older libseccomp: the linear program, the same answers
    denied: list[str] = []
    refusals = [
        *((n, None, errno.EPERM) for n in DENIED_SYSCALLS),
        *((n, number, errno.EPERM) for n, number in NEWER_SYSCALLS.items()),
        *((n, number, errno.EOPNOTSUPP) for n, number in XATTR_SYSCALLS.items()),
    ]
    for name, number, code in refusals:
        try:
            filt.add_rule(sc.ERRNO(code), name if number is None else number)
        except (OSError, RuntimeError, ValueError):
            continue  # not a syscall on this arch
        denied.append(name)
    filt.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    filt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    filt.add_rule(sc.ERRNO(errno.ENOSYS), "openat2")
    for _, name, code, arg, mask, value in ARGUMENT_RULES:
        filt.add_rule(sc.ERRNO(code), name, sc.Arg(arg, sc.MASKED_EQ, mask, value))
    for _, name, arg in NONZERO_RULES:
        filt.add_rule(sc.ERRNO(errno.EPERM), name, sc.Arg(arg, sc.NE, 0))
    for _, name, arg, value in NOT_EQUAL_RULES:
        filt.add_rule(sc.ERRNO(errno.EPERM), name, sc.Arg(arg, sc.NE, value))
    arch = int(sc.system_arch())
    own = tuple(
        (int(sc.resolve_syscall(sc.Arch.NATIVE, rule.syscall)), rule) for rule in _bpf.SELF_RULES
    )
    growth = gate_numbers(lambda name: int(sc.resolve_syscall(sc.Arch.NATIVE, name)))
    clone = int(sc.resolve_syscall(sc.Arch.NATIVE, "clone"))
    refused = ("clone(without CLONE_THREAD)", "clone3(ENOSYS)", "openat2(ENOSYS)")
    _prepared = _Prepared(_exported(filt), (*denied, *refused), arch, own, growth, clone)


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
    """Set ``no_new_privs`` and load the base filter chained behind the per-child filter
    for this process's pid (one filter) into the calling thread; returns what it denies.

    Raises ``OSError`` when seccomp cannot be applied.
    """
    prepare()
    assert _prepared is not None
    if _prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # as libseccomp's own load did
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
    pid = os.getpid()
    for offset in _prepared.pid_offsets:
        struct.pack_into("=I", _prepared.program.buffer, offset, pid)
    _prepared.program.load()
    return (*_prepared.denied, "calls that name any process but itself")


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


_SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
_SECCOMP_SET_MODE_FILTER = 1


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_syscall = libc.syscall
_prctl = libc.prctl  # bound now: a child's first lookup would cost it page faults
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
