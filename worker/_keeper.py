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
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import stat
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from . import _capabilities
from ._confine import child_main
from ._keeper_lines import SetupFailed
from ._keeper_watch import Keep, Quota
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
    map_own_ids,
    prctl,
    unshare,
    write_file,
)

NOBODY = 65534
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


def uid_drop_obstacle(install_paths: Sequence[str]) -> str:
    """Why this process, as root, could not drop to uid 65534 ("" when it can): it lacks
    a capability ``chown`` and the id changes need, or the interpreter is not readable by
    that uid. Asked once, by the zygote: its keepers have its capabilities and its files."""
    lacking = _capabilities.missing(_capabilities.UID_DROP_CAPS)
    if lacking:
        return f"no {'/'.join(lacking)} (capabilities dropped)"
    if not readable_by_nobody(install_paths):
        return "interpreter install not readable by uid 65534"
    return ""


def _uid_drop(cfg: dict[str, Any], facts: dict[str, Any]) -> bool:
    """Whether to drop to uid 65534: asked for, running as root, and able to (the
    zygote's :func:`uid_drop_obstacle`)."""
    if not cfg["drop_privileges"] or os.geteuid() != 0:
        return False
    if cfg["uid_drop_obstacle"]:
        facts["uid_note"] = cfg["uid_drop_obstacle"]
        return False
    return True


def _keeper(cfg: dict[str, Any], run_fd: int, keeper_fd: int) -> int:
    facts: dict[str, Any] = {"rlimits": bool(cfg["rlimits"])}
    _step("take a session of its own (setsid)", os.setsid)
    facts["setsid"] = True
    joined = []
    for name, procs in cfg["cgroups"]:
        try:
            write_file(procs, "0")
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
    gate: tuple[socket.socket, socket.socket] | None = None
    if facts["scratch_keeper"] and cfg["seccomp"] and cfg.get("scratch_gate"):
        # The child sends the listener of its write gate here (see _scratch_gate).
        gate = _step("make the write gate's socket", socket.socketpair)
    # The child checks that its parent is still this keeper once it has asked to die with
    # it; inside a pid namespace its parent is invisible (0) and the namespace ends with it.
    me = 0 if "pid" in facts.get("namespaces", ()) else os.getpid()
    child = _step("fork the child", os.fork)
    if child == 0:
        os.close(failed_r)
        gate_fd = -1
        if gate is not None:
            gate[0].close()
            gate_fd = gate[1].detach()
        child_main(cfg, facts, run_fd, keeper_fd, failed_w, gate_fd, keeper_pid=me)
    os.close(run_fd)
    os.close(failed_w)
    if gate is not None:
        gate[1].close()
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
        keeps = facts["scratch_keeper"]
        quota = Quota(cfg["scratch"], child, gate[0] if gate else None) if keeps else None
    keeper = Keep(child, socket.socket(fileno=keeper_fd), bool(cfg["rlimits"]), resize, quota)
    return keeper.run(failed_r)


def _become_nobody() -> None:
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)
