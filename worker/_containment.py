"""Containment applied in a forked child, in order, returning the facts of what applied.

Two processes per run. The *keeper* (forked by the zygote) takes its own session, joins the
run's cgroups, drops to uid 65534 where that works, unshares user/net/ipc/mount and pid
namespaces and forks the *child*, which becomes pid 1 of the new pid namespace, applies
rlimits, no_new_privs, Landlock and seccomp, and runs the program via
``worker._child.serve``. The keeper stays outside: it lowers the child's per-run rlimits
(CPU, AS) when the host takes it from the pool (a same-credential ``prlimit``: the host
itself lacks CAP_SYS_RESOURCE here), reports the child's exit status and rusage, and as a
subreaper sweeps any process left behind. Keeper <-> host messages are JSON lines
(``_keeper_lines``).

CPU limit: soft RLIMIT_CPU at the run's budget, hard one second above. A namespace init
ignores signals it has no handler for, so the child installs a SIGXCPU handler that exits
with :data:`EXIT_CPU_LIMIT`; a program that blocks or ignores SIGXCPU (python profile)
meets the hard limit's SIGKILL instead. Either way the keeper reads the child's CPU clock
that the kernel checks RLIMIT_CPU against (``CPUCLOCK_PROF``) before reaping it and
reports ``cpu_limit`` when it passed the soft limit. Rusage is not evidence: it counts
precise run time, while the limit counts scheduler ticks (it reads up to ~10% lower).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import functools
import math
import os
import resource
import select
import signal
import socket
import stat
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, NoReturn

from . import _enforcement, _landlock, _seccomp
from ._errors import WorkerError
from ._keeper_lines import ExitReport, Hello, LimitsAck, parse_limits_request

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_REC = 16384
MS_PRIVATE = 1 << 18
SCRATCH_INODES = 65536
INITIAL_SCRATCH_MIB = 1
"""The scratch tmpfs of a pooled child until the host takes it and sends the run's
``Limits.scratch_mib`` (small, so a resize that fails leaves no large quota behind)."""
NOBODY = 65534
NOFILE = 64
FSIZE_BYTES = 64 * 1024 * 1024
CPU_HARD_MARGIN_S = 1
"""Hard RLIMIT_CPU minus soft: CPU seconds a program that ignores SIGXCPU gets extra."""
EXIT_CPU_LIMIT = 128 + signal.SIGXCPU
"""Exit status of a child whose SIGXCPU handler ran (the soft CPU limit was reached)."""
_CPUCLOCK_PROF = 0
_NS_FLAGS = (
    ("user", CLONE_NEWUSER),
    ("net", CLONE_NEWNET),
    ("ipc", CLONE_NEWIPC),
    ("mount", CLONE_NEWNS),
    ("pid", CLONE_NEWPID),
)


def prctl(option: int, arg: int) -> None:
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")


def readable_by_nobody(paths: Sequence[str]) -> bool:
    """True when uid 65534 can traverse every ancestor of each path (others' x bit)."""
    for path in paths:
        parts = os.path.abspath(path).split("/")
        for i in range(2, len(parts) + 1):
            try:
                st = os.stat("/".join(parts[:i]) or "/")
            except OSError:
                return False
            if stat.S_ISDIR(st.st_mode) and not st.st_mode & stat.S_IXOTH:
                return False
    return True


def _unshare_namespaces(*, skip_mount: bool = False) -> tuple[tuple[str, ...], str]:
    """Try the full set, then without a user namespace (root only); report what held.

    ``skip_mount``: this process has its own mount namespace already."""
    wanted = tuple(f for f in _NS_FLAGS if not (skip_mount and f[0] == "mount"))
    attempts: list[tuple[tuple[str, int], ...]] = [wanted]
    if os.geteuid() == 0:
        attempts.append(wanted[1:])
    error = ""
    for flags in attempts:
        try:
            unshare(sum(f for _, f in flags))
        except OSError as exc:
            error = str(exc)
            continue
        return tuple(name for name, _ in flags), ""
    return (), error or "unshare failed"


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    result = _libc.mount(
        source.encode(),
        target.encode(),
        fstype.encode() if fstype is not None else None,
        ctypes.c_ulong(flags),
        data.encode() if data is not None else None,
    )
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _write_proc(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


def map_own_ids(uid: int, gid: int) -> None:
    """In a fresh user namespace, map ``uid``/``gid`` (this process's ids outside it) to
    themselves, one id each and nothing else, so files it creates on a filesystem mounted
    inside the namespace have an owner. Never used for uid 0 (root's files would come under
    the namespace's capabilities): as root the scratch is mounted before the user namespace
    exists (see ``_keeper``)."""
    if uid == 0 or gid == 0:
        raise OSError(errno.EPERM, "refusing to map root into a child's user namespace")
    # After a uid change the process is not dumpable and its /proc files belong to root:
    # dumpable just long enough to write its own maps.
    dumpable = _libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
    prctl(PR_SET_DUMPABLE, 1)
    try:
        _write_proc("/proc/self/setgroups", "deny")
        _write_proc("/proc/self/uid_map", f"{uid} {uid} 1")
        _write_proc("/proc/self/gid_map", f"{gid} {gid} 1")
    finally:
        prctl(PR_SET_DUMPABLE, max(dumpable, 0))


def mount_scratch(path: str, mib: int, *, uid: int, gid: int) -> str:
    """Mount a tmpfs of ``mib`` MiB owned by ``uid``/``gid`` on the scratch dir, in this
    process's own mount namespace (made private first, so nothing propagates to the
    host's). Its pages are charged to the memory cgroup of whoever writes them: the
    child. Returns "" when it worked, else why not (the run then has only the per-file
    RLIMIT_FSIZE)."""
    try:
        _mount("none", "/", None, MS_REC | MS_PRIVATE, None)
        flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
        _mount("ptc-scratch", path, "tmpfs", flags, _scratch_options(mib, uid, gid))
    except OSError as exc:
        return str(exc)
    return ""


def resize_scratch(path: str, mib: int) -> str:
    """Set the scratch tmpfs to ``mib`` MiB (the run's ``Limits.scratch_mib``); "" or why not."""
    st = os.stat(path)
    try:
        flags = MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC
        _mount("ptc-scratch", path, None, flags, _scratch_options(mib, st.st_uid, st.st_gid))
    except OSError as exc:
        return str(exc)
    return ""


def _scratch_options(mib: int, uid: int, gid: int) -> str:
    return f"size={mib}m,nr_inodes={SCRATCH_INODES},mode=0700,uid={uid},gid={gid}"


def keeper_main(cfg: dict[str, Any], run_fd: int, keeper_fd: int) -> NoReturn:
    """Entry of the keeper process (in the zygote's fork). Never returns."""
    code = 70
    try:
        code = _keeper(cfg, run_fd, keeper_fd)
    finally:
        os._exit(code)


def _keeper(cfg: dict[str, Any], run_fd: int, keeper_fd: int) -> int:
    facts: dict[str, Any] = {"rlimits": bool(cfg["rlimits"])}
    os.setsid()
    facts["setsid"] = True
    joined = []
    for name, procs in cfg["cgroups"]:
        try:
            with open(procs, "w", encoding="ascii") as fh:
                fh.write("0")
            joined.append(name)
        except OSError:
            pass
    facts["cgroups"] = tuple(joined)
    root = os.geteuid() == 0
    drop = cfg["drop_privileges"] and root and readable_by_nobody(cfg["install_paths"])
    if cfg["drop_privileges"] and root and not drop:
        facts["uid_note"] = "interpreter install not readable by uid 65534"
    owner = (NOBODY, NOBODY) if drop else (os.geteuid(), os.getegid())
    early_mount = False
    resizer: _Resizer | None = None
    scratch_error = "no mount namespace" if cfg["namespaces"] else "namespaces off"
    # The run's size when the host knew the run's limits when it asked for this child.
    sized: int | None = cfg.get("scratch_mib")
    if cfg["namespaces"] and root:
        # As root the scratch tmpfs is mounted in the initial user namespace, before the
        # child's own exists: it needs no id map, and the child cannot unmount it.
        try:
            unshare(CLONE_NEWNS)
            early_mount = True
        except OSError as exc:
            scratch_error = str(exc)
        if early_mount:
            scratch_error = mount_scratch(
                cfg["scratch"], sized or INITIAL_SCRATCH_MIB, uid=owner[0], gid=owner[1]
            )
        if early_mount and not scratch_error and sized is None:
            # Only a process still in the initial user namespace may resize this tmpfs
            # once the keeper has its own user namespace: a helper that waits for one size.
            resizer = _start_resizer(cfg["scratch"], keep=(run_fd, keeper_fd))
    if drop:
        os.chown(cfg["scratch"], NOBODY, NOBODY)
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        facts["uid_dropped"] = True
    if cfg["namespaces"]:
        namespaces, facts["namespace_error"] = _unshare_namespaces(skip_mount=early_mount)
        if early_mount:
            namespaces = (*namespaces, "mount")
        facts["namespaces"] = namespaces
        if not early_mount and "mount" in namespaces and "user" in namespaces:
            # Unprivileged: the mount namespace belongs to the child's user namespace.
            try:
                map_own_ids(*owner)
                scratch_error = mount_scratch(
                    cfg["scratch"], INITIAL_SCRATCH_MIB, uid=owner[0], gid=owner[1]
                )
            except OSError as exc:
                scratch_error = f"could not map ids in the user namespace: {exc}"
    else:
        facts["namespace_error"] = "namespaces off"
    facts["scratch_error"] = scratch_error
    facts["scratch_quota"] = not scratch_error
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    child = os.fork()
    if child == 0:
        _child_main(cfg, facts, run_fd, keeper_fd)
    os.close(run_fd)
    if not facts["scratch_quota"]:
        resize: Callable[[int], str] = lambda mib: "no scratch tmpfs"  # noqa: E731
    elif resizer is not None:
        resize = resizer.resize
    elif early_mount and sized is not None:
        resize = functools.partial(_sized_already, sized)
    else:
        scratch = cfg["scratch"]
        resize = lambda mib: resize_scratch(scratch, mib)  # noqa: E731
    return _keep(child, socket.socket(fileno=keeper_fd), bool(cfg["rlimits"]), resize)


def _sized_already(sized: int, mib: int) -> str:
    if mib == sized:
        return ""
    return f"the scratch tmpfs was made for {sized} MiB, and cannot be resized to {mib} MiB"


class _Resizer:
    """The keeper's end of the scratch resizer: one size out, one answer back."""

    def __init__(self, to_helper: int, from_helper: int, pid: int) -> None:
        self._to = to_helper
        self._from = from_helper
        self._pid = pid

    def resize(self, mib: int) -> str:
        try:
            os.write(self._to, f"{mib}\n".encode())
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = os.read(self._from, 4096)
                if not chunk:
                    return "the scratch resizer exited"
                answer += chunk
        except OSError as exc:
            return f"the scratch resizer is gone: {exc}"
        finally:
            for fd in (self._to, self._from):
                with contextlib.suppress(OSError):
                    os.close(fd)
            # Reaped now, not at the keeper's end: a pooled child is primed (and its
            # tmpfs sized) long before its run, and no zombie may wait that long.
            with contextlib.suppress(OSError):
                os.waitpid(self._pid, 0)
        return answer.decode("utf-8", "replace").strip()


def _start_resizer(scratch: str, keep: tuple[int, ...]) -> _Resizer | None:
    """Fork the helper (root, initial user namespace, the child's mount namespace): it reads
    one size, resizes the scratch tmpfs, answers "" or why not, and exits. It dies with the
    keeper (PDEATHSIG), holds none of the run's fds, and the keeper's sweep reaps it."""
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (to_r, to_w, from_r, from_w):
            os.close(fd)
        return None
    if pid == 0:
        code = 0
        try:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            for fd in (*keep, to_w, from_r):
                os.close(fd)
            data = os.read(to_r, 64)
            if data:
                os.write(from_w, resize_scratch(scratch, int(data)).encode() + b"\n")
        except BaseException:  # noqa: BLE001 - the keeper reports "exited"
            code = 1
        finally:
            os._exit(code)
    os.close(to_r)
    os.close(from_w)
    return _Resizer(to_w, from_r, pid)


def _send(sock: socket.socket, line: bytes) -> None:
    try:
        sock.sendall(line)
    except OSError:
        pass


def _keep(child: int, sock: socket.socket, rlimits: bool, resize: Callable[[int], str]) -> int:
    pidfd = os.pidfd_open(child)
    _send(sock, Hello(keeper_pid=os.getpid(), child_pid=child).to_line())
    buf = b""
    soft_s = 0.0
    while True:
        watched: list[Any] = [sock, pidfd]
        ready, _, _ = select.select(watched, [], [])
        if pidfd in ready:
            break
        data = sock.recv(65536)
        if not data:  # the host is gone or done with us
            os.kill(child, signal.SIGKILL)
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            ack = _apply_limits(child, line, rlimits)
            soft_s = ack.cpu_limit_s
            _send(sock, dataclasses.replace(ack, scratch_error=_resize(resize, line)).to_line())
    try:  # the exited child is a zombie until wait4: its CPU clock is still readable
        clock_s = cpu_clock_s(child)
    except OSError:
        clock_s = 0.0
    _, status, usage = os.wait4(child, 0)
    _sweep()
    report = ExitReport(
        status=status,
        cpu_ms=(usage.ru_utime + usage.ru_stime) * 1000.0,
        maxrss_kib=usage.ru_maxrss,
        cpu_limit=died_of_cpu_limit(status, clock_s=clock_s, soft_s=soft_s),
    )
    _send(sock, report.to_line())
    return 0


def cpu_clock_s(pid: int) -> float:
    """CPU seconds of process ``pid`` on the clock the kernel checks RLIMIT_CPU against
    (``CPUCLOCK_PROF``, user + system as the scheduler ticks count them)."""
    return time.clock_gettime(((~pid) << 3) | _CPUCLOCK_PROF)


def died_of_cpu_limit(status: int, *, clock_s: float, soft_s: float) -> bool:
    """Whether a child with wait ``status`` died of its soft CPU limit ``soft_s``: its CPU
    clock reached the limit, and it died the way only the limit makes it die here (the
    SIGXCPU handler's exit, SIGXCPU itself outside a pid namespace, the hard SIGKILL)."""
    if soft_s <= 0 or clock_s < soft_s:
        return False
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == EXIT_CPU_LIMIT


def _apply_limits(child: int, line: bytes, rlimits: bool) -> LimitsAck:
    if not rlimits:
        return LimitsAck(applied=False, error="rlimits off", cpu_limit_s=0)
    try:
        request = parse_limits_request(line)
        soft = math.ceil(cpu_clock_s(child) + request.cpu_seconds)
        # Soft below hard: SIGXCPU at the soft limit names the cause (the child handles
        # it, which a namespace init must); SIGKILL at the hard one if it is ignored.
        resource.prlimit(child, resource.RLIMIT_CPU, (soft, soft + CPU_HARD_MARGIN_S))
        as_bytes = (request.memory_mib + 1024) * 1024 * 1024
        resource.prlimit(child, resource.RLIMIT_AS, (as_bytes, as_bytes))
    except (OSError, ValueError, WorkerError) as exc:
        return LimitsAck(applied=False, error=str(exc), cpu_limit_s=0)
    return LimitsAck(applied=True, error="", cpu_limit_s=soft)


def _resize(resize: Callable[[int], str], line: bytes) -> str:
    """The run's scratch quota applied to the tmpfs: "" when it was, else why not."""
    try:
        request = parse_limits_request(line)
    except WorkerError as exc:
        return str(exc)
    return resize(request.scratch_mib)


def _sweep() -> None:
    """Kill and reap every remaining descendant (orphans reparent to us: subreaper)."""
    me = os.getpid()
    for _ in range(1000):
        try:
            with open(f"/proc/{me}/task/{me}/children", encoding="ascii") as fh:
                pids = [int(p) for p in fh.read().split()]
        except OSError:
            pids = []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG if pids else 0)[0]:
                pass
        except ChildProcessError:
            if not pids:
                return


def _child_main(
    cfg: dict[str, Any], facts: dict[str, Any], run_fd: int, keeper_fd: int
) -> NoReturn:
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
