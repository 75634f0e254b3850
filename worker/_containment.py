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
"""

from __future__ import annotations

import ctypes
import math
import os
import resource
import select
import signal
import socket
import stat
from collections.abc import Sequence
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
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
NOBODY = 65534
NOFILE = 64
FSIZE_BYTES = 64 * 1024 * 1024
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


def _unshare_namespaces() -> tuple[tuple[str, ...], str]:
    """Try the full set, then without a user namespace (root only); report what held."""
    attempts: list[tuple[tuple[str, int], ...]] = [_NS_FLAGS]
    if os.geteuid() == 0:
        attempts.append(_NS_FLAGS[1:])
    error = ""
    for flags in attempts:
        try:
            unshare(sum(f for _, f in flags))
        except OSError as exc:
            error = str(exc)
            continue
        return tuple(name for name, _ in flags), ""
    return (), error or "unshare failed"


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
    if cfg["drop_privileges"] and os.geteuid() == 0:
        if readable_by_nobody(cfg["install_paths"]):
            os.chown(cfg["scratch"], NOBODY, NOBODY)
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            facts["uid_dropped"] = True
        else:
            facts["uid_note"] = "interpreter install not readable by uid 65534"
    if cfg["namespaces"]:
        facts["namespaces"], facts["namespace_error"] = _unshare_namespaces()
    else:
        facts["namespace_error"] = "namespaces off"
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    child = os.fork()
    if child == 0:
        _child_main(cfg, facts, run_fd, keeper_fd)
    os.close(run_fd)
    return _keep(child, socket.socket(fileno=keeper_fd), bool(cfg["rlimits"]))


def _send(sock: socket.socket, line: bytes) -> None:
    try:
        sock.sendall(line)
    except OSError:
        pass


def _keep(child: int, sock: socket.socket, rlimits: bool) -> int:
    pidfd = os.pidfd_open(child)
    _send(sock, Hello(keeper_pid=os.getpid(), child_pid=child).to_line())
    buf = b""
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
            _send(sock, _apply_limits(child, line, rlimits).to_line())
    _, status, usage = os.wait4(child, 0)
    _sweep()
    cpu_ms = (usage.ru_utime + usage.ru_stime) * 1000.0
    _send(sock, ExitReport(status=status, cpu_ms=cpu_ms, maxrss_kib=usage.ru_maxrss).to_line())
    return 0


def _apply_limits(child: int, line: bytes, rlimits: bool) -> LimitsAck:
    if not rlimits:
        return LimitsAck(applied=False, error="rlimits off", cpu_limit_s=0)
    try:
        request = parse_limits_request(line)
        with open(f"/proc/{child}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        used_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        cpu = math.ceil(used_s + request.cpu_seconds)
        # soft == hard: the child is pid 1 of its namespace, and a namespace init ignores
        # the soft limit's SIGXCPU; the hard limit's SIGKILL always lands.
        resource.prlimit(child, resource.RLIMIT_CPU, (cpu, cpu))
        as_bytes = (request.memory_mib + 1024) * 1024 * 1024
        resource.prlimit(child, resource.RLIMIT_AS, (as_bytes, as_bytes))
    except (OSError, ValueError, IndexError, WorkerError) as exc:
        return LimitsAck(applied=False, error=str(exc), cpu_limit_s=0)
    return LimitsAck(applied=True, error="", cpu_limit_s=cpu)


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
        from ._child import serve

        serve(socket.socket(fileno=run_fd), enforcement)
    finally:
        os._exit(71)


def _isolate_fds(keep: int) -> None:
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)
    os.set_inheritable(keep, False)
