"""The write gate's seccomp filter, where no tmpfs holds the scratch quota: every call that
can make the scratch dir take more space waits for the keeper's answer (a user
notification, answered by ``_scratch_gate``); the few that do it in ways the keeper would
have to guess at are refused; ``clone`` is refused, so no second thread changes the
process's files, offsets or fd table while one call waits.

Shared mappings cannot make a file longer, and any block they fill lies within a length the
count includes already (a file takes ``max(length, blocks)``); the channel is written with
``send``, never gated.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Mapping

from . import _bpf

GROWTH_SYSCALLS: tuple[str, ...] = (
    "write",
    "pwrite64",
    "writev",
    "pwritev",
    "pwritev2",
    "sendfile",
    "copy_file_range",
    "splice",
    "ftruncate",
    "truncate",
    "fallocate",
)
"""Calls that can make a file longer or allocate its blocks."""
XATTR_SYSCALLS: tuple[str, ...] = ("setxattr", "lsetxattr", "fsetxattr", "setxattrat")
"""Extended attributes take blocks of their own (ext4: one per file past the inode's room)."""
NAME_SYSCALLS: tuple[str, ...] = (
    "open",
    "openat",
    "openat2",
    "creat",
    "mkdir",
    "mkdirat",
    "symlink",
    "symlinkat",
    "link",
    "linkat",
    "rename",
    "renameat",
    "renameat2",
    "mknod",
    "mknodat",
)
"""Calls that can add a name: its directory may grow by a block; a new directory and a
long symlink's target take one of their own. ``open``/``openat`` wait only when their
flags ask for ``O_CREAT``; ``openat2``'s flags are in memory, where the filter cannot look."""
CREATE_FLAGS_ARG: dict[str, int] = {"open": 1, "openat": 2}
REFUSED_SYSCALLS: dict[str, int] = {"clone3": errno.ENOSYS, "file_setattr": errno.EOPNOTSUPP}
"""Refused with these errors: ``clone3`` passes its flags in memory (ENOSYS: libc falls back
to ``clone``, which the gate refuses: no threads, whatever else the child refuses);
``file_setattr`` sets extent size hints (XFS allocates by them, past a file's end)."""
REFUSED_IOCTLS: dict[int, str] = {
    0x40305828: "FS_IOC_RESVSP",
    0x4030582A: "FS_IOC_RESVSP64",
    0x40305839: "FS_IOC_ZERO_RANGE",
    0x40049409: "FICLONE",
    0x4020940D: "FICLONERANGE",
    0x401C5820: "FS_IOC_FSSETXATTR",
}
"""ioctl commands that allocate blocks or share another file's extents behind the back of
``fallocate`` and ``copy_file_range`` (which the gate counts): refused with EOPNOTSUPP, as
a filesystem without them answers."""
_NEWER_THAN_LIBSECCOMP = {"setxattrat": 463, "file_setattr": 469}
"""Numbers an older libseccomp cannot resolve (the same on every arch: Linux 6.13, 6.17)."""


def gate_numbers(resolve: Callable[[str], int]) -> dict[int, str]:
    """Number -> name of every call the filter looks at on this arch (``resolve``: a name's
    number, negative when the arch has no such call)."""
    found: dict[int, str] = {}
    names = (*GROWTH_SYSCALLS, *XATTR_SYSCALLS, *NAME_SYSCALLS, *REFUSED_SYSCALLS, "ioctl")
    for name in names:
        number = resolve(name)
        if number < 0:
            number = _NEWER_THAN_LIBSECCOMP.get(name, -1)
        if number >= 0:
            found[number] = name
    return found


def write_gate_filter(*, arch: int, numbers: Mapping[int, str], refused: tuple[int, ...]) -> bytes:
    """The write gate as packed ``sock_filter`` instructions: the calls of ``numbers``
    (:func:`gate_numbers`) go to the listener or are refused, as the module says;
    ``refused`` (``clone``) get EPERM; everything else (and a foreign arch, which the base
    filter kills) passes."""
    asm = _bpf.Assembler()
    asm.emit(_bpf.LD_W_ABS, _bpf.ARCH_OFFSET)
    asm.emit(_bpf.JEQ_K, arch, jf="allow")
    asm.emit(_bpf.LD_W_ABS, _bpf.NR_OFFSET)
    for number, name in sorted(numbers.items()):
        if name in CREATE_FLAGS_ARG or name == "ioctl":
            asm.emit(_bpf.JEQ_K, number, jt=name)
        elif name in REFUSED_SYSCALLS:
            asm.emit(_bpf.JEQ_K, number, jt=f"errno-{REFUSED_SYSCALLS[name]}")
        else:
            asm.emit(_bpf.JEQ_K, number, jt="notify")
    for number in refused:
        asm.emit(_bpf.JEQ_K, number, jt=f"errno-{errno.EPERM}")
    asm.emit(_bpf.RET_K, _bpf.RET_ALLOW)
    for name, arg in CREATE_FLAGS_ARG.items():
        if name in numbers.values():
            asm.label(name)
            asm.emit(_bpf.LD_W_ABS, _bpf.arg_low(arg))
            asm.emit(_bpf.JSET_K, os.O_CREAT, jt="notify", jf="allow")
    if "ioctl" in numbers.values():
        asm.label("ioctl")
        asm.emit(_bpf.LD_W_ABS, _bpf.arg_low(1))  # the command: an unsigned int
        for command in REFUSED_IOCTLS:
            asm.emit(_bpf.JEQ_K, command, jt=f"errno-{errno.EOPNOTSUPP}")
        asm.emit(_bpf.RET_K, _bpf.RET_ALLOW)
    asm.label("notify")
    asm.emit(_bpf.RET_K, _bpf.RET_USER_NOTIF)
    for error in sorted({errno.EOPNOTSUPP, errno.EPERM, *REFUSED_SYSCALLS.values()}):
        asm.label(f"errno-{error}")
        asm.emit(_bpf.RET_K, _bpf.RET_ERRNO | error)
    asm.label("allow")
    asm.emit(_bpf.RET_K, _bpf.RET_ALLOW)
    return asm.program()
