"""The Linux calls containment needs that ``os`` does not offer, through ctypes:
``prctl``, ``unshare``, ``mount``, a fresh user namespace's id maps, a process's CPU clock;
and the small reads and writes of ``/proc`` and ``/sys`` files (the keeper's, the host's
cgroup files).

Used by the zygote, the keeper and the child (all in the zygote's forks); each wrapper
raises ``OSError`` with the errno, as ``os`` would. :data:`libc` is the one handle on libc
the worker's other ctypes calls (Landlock, seccomp, capabilities, inotify) go through.
"""

from __future__ import annotations

import ctypes
import errno
import os
import time

libc = ctypes.CDLL(None, use_errno=True)
"""The one handle on libc (errno kept per call) the worker's Linux calls go through."""
libc.syscall.restype = ctypes.c_long  # a raw syscall returns a long (-1 and errno)
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
_CPUCLOCK_PROF = 0


_with_the_gil = ctypes.PyDLL(None, use_errno=True)
_fork = _with_the_gil.fork
_fork.restype = ctypes.c_int


def fork_bare() -> int:
    """``fork()`` straight from libc, without CPython's at-fork handlers (``os.fork`` runs
    ``PyOS_AfterFork_Child`` and the hooks libraries register: about 0.8 ms and 200 page
    faults per child here). Called with the GIL held (``PyDLL``), so the child's interpreter
    state is the parent's, consistent. Safe only from a single-threaded process that holds
    no lock (the zygote); the child must reseed ``random`` itself, the one hook that
    matters to a program (threading's and logging's reset locks nobody held). Raises
    ``OSError``."""
    pid = int(_fork())
    if pid < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"fork: {os.strerror(err)}")
    return pid


def prctl(option: int, arg: int) -> None:
    if libc.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def set_name(name: bytes) -> None:
    """This thread's name (``/proc/<pid>/comm``, at most 15 bytes), for whoever reads ``ps``."""
    if libc.prctl(PR_SET_NAME, name, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def unshare(flags: int) -> None:
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")


def setns(fd: int, nstype: int) -> None:
    if libc.setns(fd, nstype) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    result = libc.mount(
        source.encode(),
        target.encode(),
        fstype.encode() if fstype is not None else None,
        ctypes.c_ulong(flags),
        data.encode() if data is not None else None,
    )
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


MNT_DETACH = 2


def umount(target: str, flags: int = 0) -> None:
    if libc.umount2(target.encode(), flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount {target}: {os.strerror(err)}")


def write_file(path: str, text: str) -> None:
    """Write ``text`` to a ``/proc`` or ``/sys`` file in one ``write``.

    Not ``open()``: in a fresh fork of the zygote, a text file's first ``open`` imports
    the ``ascii`` codec from disk and builds three file objects, about 1 ms and 200
    copy-on-write page faults here; this costs a tenth of that (and half of ``open()``'s
    time in a warm process)."""
    # The flags of ``open(path, "w")``: a regular file (a test's stand-in) is replaced.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


def read_file(path: str) -> str:
    """The text of a ``/proc`` or ``/sys`` file (ASCII; read as :func:`write_file` writes)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("ascii", "replace")


def remove_cgroup(path: str, *, within_s: float = 1.0) -> None:
    """``rmdir`` a cgroup, retrying for ``within_s`` while the kernel still accounts its
    last exits (gone already is fine; one still busy after that is left)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.005)


def map_own_ids(uid: int, gid: int) -> None:
    """In a fresh user namespace, map ``uid``/``gid`` (this process's ids outside it) to
    themselves, one id each and nothing else, so files it creates on a filesystem mounted
    inside the namespace have an owner. Never used for uid 0 (root's files would come under
    the namespace's capabilities): as root the scratch is mounted before the user namespace
    exists (see ``worker._supervisor._isolate``)."""
    if uid == 0 or gid == 0:
        raise OSError(errno.EPERM, "refusing to map root into a child's user namespace")
    # After a uid change the process is not dumpable and its /proc files belong to root:
    # dumpable just long enough to write its own maps.
    dumpable = libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
    prctl(PR_SET_DUMPABLE, 1)
    try:
        write_file("/proc/self/setgroups", "deny")
        write_file("/proc/self/uid_map", f"{uid} {uid} 1")
        write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    finally:
        prctl(PR_SET_DUMPABLE, max(dumpable, 0))


def cpu_clock_s(pid: int) -> float:
    """CPU seconds of process ``pid`` on the clock the kernel checks RLIMIT_CPU against
    (``CPUCLOCK_PROF``, user + system as the scheduler ticks count them)."""
    return time.clock_gettime(((~pid) << 3) | _CPUCLOCK_PROF)
