"""The keeper: the process between the zygote and the child, inside the containment and
outside the program.

Two processes per run. The *keeper* (forked by the zygote) takes its own session, joins the
run's cgroups, mounts the scratch tmpfs (``_scratch``), drops to uid 65534 where that
works (root with CAP_CHOWN, CAP_SETUID and CAP_SETGID), unshares user/net/ipc/mount and pid
namespaces and forks the *child*, which becomes pid 1 of the new pid namespace, applies
what it applies to itself (``_confine``) and runs the program via ``worker._child.serve``.
The keeper stays outside: it lowers the child's per-run rlimits (CPU, DATA, AS) when the
host takes it from the pool (a same-credential ``prlimit``: the host itself lacks
CAP_SYS_RESOURCE here), sizes the scratch tmpfs for the run or, where there is none, keeps
the scratch quota itself (``_scratch_quota``), reports the child's exit status and rusage,
and as a subreaper sweeps any process left behind. Keeper <-> host messages are JSON lines
(``_keeper_lines``).

A step of the setup that fails is reported on the keeper's line before it exits
(:class:`~worker._keeper_lines.SetupFailed`: the step, the error, its errno), so the host
names the cause at once instead of waiting for a child that will never come; a failure of
the child's own setup reaches the host in the exit report's ``cause``.

CPU limit: soft RLIMIT_CPU at the run's budget, hard one second above; the child exits with
:data:`~worker._confine.EXIT_CPU_LIMIT` at the soft limit, or meets the hard limit's
SIGKILL. Either way the keeper reads the child's CPU clock that the kernel checks
RLIMIT_CPU against (``CPUCLOCK_PROF``) before reaping it and reports ``cpu_limit`` when it
passed the soft limit. Rusage is not evidence: it counts precise run time, while the limit
counts scheduler ticks (it reads up to ~10% lower).
"""

from __future__ import annotations

import contextlib
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

from . import _capabilities
from ._confine import EXIT_CPU_LIMIT, FSIZE_BYTES, child_main
from ._errors import WorkerError
from ._keeper_lines import ExitReport, Hello, LimitsAck, SetupFailed, parse_limits_request
from ._scratch import (
    INITIAL_SCRATCH_MIB,
    Resizer,
    mount_scratch,
    resize_scratch,
    sized_already,
    start_resizer,
)
from ._scratch_quota import ScratchQuota
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


class _SetupError(Exception):
    """A step of the keeper's setup failed; the host gets it as a ``SetupFailed`` line."""

    def __init__(self, step: str, exc: OSError) -> None:
        super().__init__(step)
        self.line = SetupFailed(step=step, error=str(exc), errno=exc.errno or 0)


def _step(step: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except OSError as exc:
        raise _SetupError(step, exc) from exc


def keeper_main(cfg: dict[str, Any], run_fd: int, keeper_fd: int) -> NoReturn:
    """Entry of the keeper process (in the zygote's fork). Never returns."""
    code = 70
    try:
        code = _keeper(cfg, run_fd, keeper_fd)
    except _SetupError as exc:
        with contextlib.suppress(OSError):
            os.write(keeper_fd, exc.line.to_line())
    finally:
        os._exit(code)


def _uid_drop(cfg: dict[str, Any], facts: dict[str, Any]) -> bool:
    """Whether to drop to uid 65534: asked for, running as root, and able to (the
    interpreter readable by that uid, the capabilities ``chown`` and the id changes need)."""
    if not cfg["drop_privileges"] or os.geteuid() != 0:
        return False
    lacking = _capabilities.missing(_capabilities.UID_DROP_CAPS)
    if lacking:
        facts["uid_note"] = f"no {'/'.join(lacking)} (capabilities dropped)"
        return False
    if not readable_by_nobody(cfg["install_paths"]):
        facts["uid_note"] = "interpreter install not readable by uid 65534"
        return False
    return True


def _keeper(cfg: dict[str, Any], run_fd: int, keeper_fd: int) -> int:
    facts: dict[str, Any] = {"rlimits": bool(cfg["rlimits"])}
    _step("take a session of its own (setsid)", os.setsid)
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
    if "unified" in joined:
        facts["cgroup_v2_controllers"] = tuple(cfg.get("cgroup_v2_controllers", ()))
    facts["cgroup_note"] = cfg.get("cgroup_note", "") or (
        "" if "memory" in joined else "could not join the run's memory cgroup"
    )
    root = os.geteuid() == 0
    drop = _uid_drop(cfg, facts)
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
            scratch_error = f"no mount namespace ({exc})"
        if early_mount:
            scratch_error = mount_scratch(
                cfg["scratch"], sized or INITIAL_SCRATCH_MIB, uid=owner[0], gid=owner[1]
            )
        if early_mount and not scratch_error and sized is None:
            # Only a process still in the initial user namespace may resize this tmpfs
            # once the keeper has its own user namespace: a helper that waits for one size.
            resizer = start_resizer(cfg["scratch"], keep=(run_fd, keeper_fd))
    if drop:
        _step("chown the scratch dir to uid 65534", lambda: os.chown(cfg["scratch"], *owner))
        _step("drop to uid 65534", _become_nobody)
        facts["uid_dropped"] = True
    if cfg["namespaces"]:
        namespaces, facts["namespace_error"] = _unshare_namespaces(skip_mount=early_mount)
        if early_mount:
            namespaces = (*namespaces, "mount")
        facts["namespaces"] = namespaces
        if "mount" not in namespaces and not early_mount:
            scratch_error = (
                f"no mount namespace ({facts['namespace_error']}): user namespaces are refused"
            )
        if not early_mount and "mount" in namespaces and "user" in namespaces:
            # Unprivileged: the mount namespace belongs to the child's user namespace.
            try:
                map_own_ids(*owner)
                scratch_error = mount_scratch(
                    cfg["scratch"], INITIAL_SCRATCH_MIB, uid=owner[0], gid=owner[1]
                )
            except OSError as exc:
                scratch_error = (
                    "root cannot be mapped into the child's user namespace: run the host as "
                    "another user, or keep CAP_SETUID, CAP_SETGID and CAP_CHOWN (the child "
                    "then drops to uid 65534)"
                    if owner[0] == 0
                    else f"could not map ids in the user namespace: {exc}"
                )
    else:
        facts["namespace_error"] = "namespaces off"
    facts["scratch_error"] = scratch_error
    facts["scratch_quota"] = not scratch_error
    # No tmpfs: the keeper keeps the quota itself (it lowers RLIMIT_FSIZE to refuse growth).
    facts["scratch_keeper"] = bool(scratch_error and cfg["rlimits"])
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    failed_r, failed_w = _step("make the child's error pipe", os.pipe)
    child = _step("fork the child", os.fork)
    if child == 0:
        os.close(failed_r)
        child_main(cfg, facts, run_fd, keeper_fd, failed_w)
    os.close(run_fd)
    os.close(failed_w)
    if facts["scratch_quota"]:
        if resizer is not None:
            resize: Callable[[int], str] = resizer.resize
        elif early_mount and sized is not None:
            resize = functools.partial(sized_already, sized)
        else:
            scratch = cfg["scratch"]
            resize = lambda mib: resize_scratch(scratch, mib)  # noqa: E731
        quota = None
    else:
        resize = lambda mib: "no scratch tmpfs"  # noqa: E731
        quota = _Quota(cfg["scratch"], child) if facts["scratch_keeper"] else None
    keeper = _Keep(child, socket.socket(fileno=keeper_fd), bool(cfg["rlimits"]), resize, quota)
    return keeper.run(failed_r)


def _become_nobody() -> None:
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)


def _send(sock: socket.socket, line: bytes) -> None:
    try:
        sock.sendall(line)
    except OSError:
        pass


class _Quota:
    """The keeper's scratch quota of one child, set up when the run's size arrives."""

    def __init__(self, scratch: str, child: int) -> None:
        self._scratch = scratch
        self._child = child
        self.watch: ScratchQuota | None = None

    def start(self, mib: int) -> str:
        """Watch the scratch dir with a quota of ``mib`` MiB; "" or why not. One file can
        never pass it alone: the child's RLIMIT_FSIZE comes down to the quota too."""
        if self.watch is not None:
            return "the scratch quota was set already"
        limit = mib * 1024 * 1024
        try:
            fsize = min(FSIZE_BYTES, limit)
            resource.prlimit(self._child, resource.RLIMIT_FSIZE, (fsize, fsize))
            self.watch = ScratchQuota(self._scratch, self._child, limit)
        except OSError as exc:
            return f"the keeper's scratch quota could not be set up: {exc}"
        return ""


class _Keep:
    """The keeper's life after the fork: it answers the host, watches the child (and its
    scratch quota), and reports its end."""

    def __init__(
        self,
        child: int,
        sock: socket.socket,
        rlimits: bool,
        resize: Callable[[int], str],
        quota: _Quota | None,
    ) -> None:
        self._child = child
        self._sock = sock
        self._rlimits = rlimits
        self._resize = resize
        self._quota = quota
        self._soft_s = 0.0
        self._cause = ""

    def run(self, failed_fd: int) -> int:
        pidfd = os.pidfd_open(self._child)
        _send(self._sock, Hello(keeper_pid=os.getpid(), child_pid=self._child).to_line())
        buf = b""
        while True:
            watch = self._quota.watch if self._quota is not None else None
            watched: list[Any] = [self._sock, pidfd, *([watch] if watch else [])]
            ready, _, _ = select.select(watched, [], [])
            if pidfd in ready:
                break
            if watch is not None and watch in ready:
                reason = watch.check()
                if reason:
                    self._cause = f"killed by the keeper: {reason}"
                    os.kill(self._child, signal.SIGKILL)
            if self._sock not in ready:
                continue
            data = self._sock.recv(65536)
            if not data:  # the host is gone or done with us
                os.kill(self._child, signal.SIGKILL)
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                _send(self._sock, self._limits(line).to_line())
        try:  # the exited child is a zombie until wait4: its CPU clock is still readable
            clock_s = cpu_clock_s(self._child)
        except OSError:
            clock_s = 0.0
        _, status, usage = os.wait4(self._child, 0)
        _sweep()
        if not self._cause:
            self._cause = _child_failure(failed_fd)
        report = ExitReport(
            status=status,
            cpu_ms=(usage.ru_utime + usage.ru_stime) * 1000.0,
            maxrss_kib=usage.ru_maxrss,
            cpu_limit=died_of_cpu_limit(status, clock_s=clock_s, soft_s=self._soft_s),
            cause=self._cause,
        )
        _send(self._sock, report.to_line())
        return 0

    def _limits(self, line: bytes) -> LimitsAck:
        """The host's limits request: the rlimits, then the scratch quota."""
        ack = _apply_limits(self._child, line, self._rlimits)
        self._soft_s = ack.cpu_limit_s
        try:
            mib = parse_limits_request(line).scratch_mib
        except WorkerError as exc:
            return dataclasses.replace(ack, scratch_error=str(exc))
        scratch = self._quota.start(mib) if self._quota is not None else self._resize(mib)
        return dataclasses.replace(ack, scratch_error=scratch)


def _child_failure(fd: int) -> str:
    """What the child wrote on its error pipe before it exited ("" when nothing)."""
    try:
        text = os.read(fd, 4096).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    finally:
        os.close(fd)
    return f"the child could not set itself up: {text}" if text else ""


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
        # Private memory (heap, anonymous mappings, thread stacks as reserved): what bounds
        # a program's memory where no cgroup does; below a cgroup limit, a MemoryError
        # comes before the OOM killer. Address space only as a backstop (libraries, guards).
        data_bytes = request.data_mib * 1024 * 1024
        resource.prlimit(child, resource.RLIMIT_DATA, (data_bytes, data_bytes))
        as_bytes = (request.memory_mib + 1024) * 1024 * 1024
        resource.prlimit(child, resource.RLIMIT_AS, (as_bytes, as_bytes))
    except (OSError, ValueError, WorkerError) as exc:
        return LimitsAck(applied=False, error=str(exc), cpu_limit_s=0)
    return LimitsAck(applied=True, error="", cpu_limit_s=soft)


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
