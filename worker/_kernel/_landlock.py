"""Landlock through ctypes: ABI detection, a read-only/read-write ruleset, TCP deny, scopes.

Applied in the child after ``no_new_privs`` and before seccomp; it binds the calling thread
(and everything it forks), so it must run before any thread starts.

Why Landlock is missing matters to whoever runs the host, so :func:`status` tells the cases
apart: the kernel has none (ENOSYS), it is built but not enabled (EOPNOTSUPP), or a seccomp
profile refuses its system calls (EPERM: container profiles before Docker 23).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass

from ._syscalls import libc

_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_EXECUTE = 1 << 0
_WRITE_FILE = 1 << 1
_READ_FILE = 1 << 2
_READ_DIR = 1 << 3
_TRUNCATE = 1 << 14
_IOCTL_DEV = 1 << 15
_FILE_ONLY = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV

_NET_BIND_TCP = 1 << 0
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX = 1 << 0
_SCOPE_SIGNAL = 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@dataclass(frozen=True, kw_only=True)
class LandlockResult:
    """What Landlock enforced: ABI, and whether TCP and scopes were covered."""

    abi: int
    tcp_denied: bool
    scoped: bool


ABI_LIMIT: int | None = None
"""A test seam, not a setting: when set, children use at most this Landlock ABI (and
``probe`` predicts so), as on an older kernel: 5 has no signal or abstract-socket scoping,
3 no TCP rules. The host reads it when it asks for a child (``_pool``)."""


def _numbers() -> tuple[int, int, int] | None:
    return _SYSCALLS.get(platform.machine())


def status(limit: int | None = None) -> tuple[int, str]:
    """The Landlock ABI this process can use (capped at ``limit``) and, when it is 0, why
    not, in words that say what the host can do about it."""
    nums = _numbers()
    if nums is None:
        return 0, f"no Landlock syscall numbers for {platform.machine()}"
    res = libc.syscall(nums[0], None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    if res > 0:
        return (int(res) if limit is None else min(int(res), limit)), ""
    return 0, unavailable_reason(ctypes.get_errno())


def unavailable_reason(err: int) -> str:
    """Why Landlock is unavailable, from the errno ``landlock_create_ruleset`` gave."""
    if err == errno.EPERM:
        return (
            "Landlock refused by seccomp (EPERM: the container's seccomp profile); "
            "allow landlock_create_ruleset, landlock_add_rule and landlock_restrict_self "
            "(Docker 23+ and current containerd profiles do)"
        )
    if err == errno.ENOSYS:
        return "the kernel has no Landlock (ENOSYS): Linux 5.13+ with CONFIG_SECURITY_LANDLOCK"
    if err == errno.EOPNOTSUPP:
        return (
            "Landlock is built into the kernel but not enabled (EOPNOTSUPP): "
            "add landlock to the lsm= boot parameter"
        )
    return f"Landlock unavailable: {os.strerror(err)}"


def abi_version() -> int:
    """The kernel's Landlock ABI, or 0 when Landlock is unavailable."""
    return status()[0]


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: execute .. make_sym
    if abi >= 2:
        rights |= 1 << 13  # refer
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def ruleset(*, read_only: Iterable[str], read_write: Iterable[str], abi: int) -> int:
    """A ruleset fd allowing only the given paths (missing ones are skipped); on ABI >= 4 TCP
    bind/connect denied, on ABI >= 6 signals and abstract unix sockets scoped. Built once
    (the zygote does, for children whose scratch is the same mount point), then applied by
    :func:`restrict_with` as often as needed. Raises ``OSError``."""
    nums = _numbers()
    if nums is None or abi <= 0:
        raise OSError("Landlock is not available on this kernel")
    create, add_rule, _ = nums
    handled = _fs_rights(abi)
    attr = _RulesetAttr(handled_access_fs=handled)
    size = 8
    if abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
        size = 24
    fd = int(libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        read = _EXECUTE | _READ_FILE | _READ_DIR
        for path in read_only:
            _add_path(add_rule, fd, path, read & handled)
        for path in read_write:
            _add_path(add_rule, fd, path, handled)
    except BaseException:
        os.close(fd)
        raise
    return fd


def restrict_with(ruleset_fd: int, abi: int) -> LandlockResult:
    """Restrict this thread (and its future children) by ``ruleset_fd``. Raises ``OSError``."""
    nums = _numbers()
    if nums is None:
        raise OSError("Landlock is not available on this kernel")
    if libc.syscall(nums[2], ruleset_fd, ctypes.c_uint32(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
    return LandlockResult(abi=abi, tcp_denied=abi >= 4, scoped=abi >= 6)


def restrict(
    *, read_only: Iterable[str], read_write: Iterable[str], abi: int | None = None
) -> LandlockResult:
    """Restrict this thread (and its future children) to the given paths (a ruleset made
    and applied at once: :func:`ruleset`, :func:`restrict_with`). Raises ``OSError``."""
    if abi is None:
        abi, why = status()
        if abi <= 0:
            raise OSError(why)
    fd = ruleset(read_only=read_only, read_write=read_write, abi=abi)
    try:
        return restrict_with(fd, abi)
    finally:
        os.close(fd)


def _add_path(add_rule: int, ruleset_fd: int, path: str, access: int) -> None:
    try:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            access &= _FILE_ONLY
        attr = _PathBeneathAttr(allowed_access=access, parent_fd=pfd)
        res = libc.syscall(
            add_rule, ruleset_fd, _RULE_PATH_BENEATH, ctypes.byref(attr), ctypes.c_uint32(0)
        )
        if res != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
    finally:
        os.close(pfd)
