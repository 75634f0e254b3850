"""The keeper: the process between the zygote and the child, inside the containment and
outside the program.

Two processes per run. The *keeper* (forked by the zygote) takes its own session, joins the
run's cgroups, mounts the scratch tmpfs (``_scratch``), drops to uid 65534 where that
works, unshares user/net/ipc/mount and pid namespaces and forks the *child*, which becomes
pid 1 of the new pid namespace, applies what it applies to itself (``_confine``) and runs
the program via ``worker._child.serve``. The keeper stays outside: it lowers the child's
per-run rlimits (CPU, AS) when the host takes it from the pool (a same-credential
``prlimit``: the host itself lacks CAP_SYS_RESOURCE here), sizes the scratch tmpfs for the
run, reports the child's exit status and rusage, and as a subreaper sweeps any process left
behind. Keeper <-> host messages are JSON lines (``_keeper_lines``).

CPU limit: soft RLIMIT_CPU at the run's budget, hard one second above; the child exits with
:data:`~worker._confine.EXIT_CPU_LIMIT` at the soft limit, or meets the hard limit's
SIGKILL. Either way the keeper reads the child's CPU clock that the kernel checks
RLIMIT_CPU against (``CPUCLOCK_PROF``) before reaping it and reports ``cpu_limit`` when it
passed the soft limit. Rusage is not evidence: it counts precise run time, while the limit
counts scheduler ticks (it reads up to ~10% lower).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import resource
import select
import signal
import socket
import stat
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ._confine import EXIT_CPU_LIMIT, child_main
from ._errors import WorkerError
from ._keeper_lines import ExitReport, Hello, LimitsAck, parse_limits_request
from ._scratch import (
    INITIAL_SCRATCH_MIB,
    Resizer,
    mount_scratch,
    resize_scratch,
    sized_already,
    start_resizer,
)
from ._syscalls import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    PR_SET_CHILD_SUBREAPER,
    cpu_clock_s,
    map_own_ids,
    prctl,
    unshare,
)

NOBODY = 65534
CPU_HARD_MARGIN_S = 1
"""Hard RLIMIT_CPU minus soft: CPU seconds a program that ignores SIGXCPU gets extra."""
_NS_FLAGS = (
    ("user", CLONE_NEWUSER),
    ("net", CLONE_NEWNET),
    ("ipc", CLONE_NEWIPC),
    ("mount", CLONE_NEWNS),
    ("pid", CLONE_NEWPID),
)


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
    resizer: Resizer | None = None
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
            resizer = start_resizer(cfg["scratch"], keep=(run_fd, keeper_fd))
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
        child_main(cfg, facts, run_fd, keeper_fd)
    os.close(run_fd)
    if not facts["scratch_quota"]:
        resize: Callable[[int], str] = lambda mib: "no scratch tmpfs"  # noqa: E731
    elif resizer is not None:
        resize = resizer.resize
    elif early_mount and sized is not None:
        resize = functools.partial(sized_already, sized)
    else:
        scratch = cfg["scratch"]
        resize = lambda mib: resize_scratch(scratch, mib)  # noqa: E731
    return _keep(child, socket.socket(fileno=keeper_fd), bool(cfg["rlimits"]), resize)


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
