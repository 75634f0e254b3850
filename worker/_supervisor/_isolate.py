"""The child's first steps, in the zygote's fork, while it still has the zygote's powers:
its own session, its cgroups, its scratch (a tmpfs in a mount namespace of its own, or a
directory of its own), uid 65534, a user namespace of its own. ``_confine`` then takes the
rest of those powers away before the program runs.

A step that fails raises :class:`SetupError`; the child writes it on its supervisor line
(``_keeper_lines.SetupFailed``) and exits, so the host names the cause at once instead of
waiting for a child that will never be ready.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from typing import Any

from .._kernel import _capabilities
from .._kernel._syscalls import CLONE_NEWNS, CLONE_NEWUSER, unshare, write_file
from .._protocol._keeper_lines import SetupFailed
from .._protocol._spawn_config import ChildConfig
from ._domain import MOUNT_POINT, NOBODY, become_nobody
from ._scratch import mount_scratch


class SetupError(Exception):
    """A step of the child's setup failed; the host gets it as a ``SetupFailed`` line."""

    def __init__(self, step: str, exc: OSError) -> None:
        super().__init__(step)
        self.line = SetupFailed(step=step, error=str(exc), errno=exc.errno or 0)


def step(name: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, its ``OSError`` turned into a :class:`SetupError` naming the step."""
    try:
        return fn()
    except OSError as exc:
        raise SetupError(name, exc) from exc


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


def uid_drop_obstacle(install_paths: Sequence[str]) -> str:
    """Why this process, as root, could not drop to uid 65534 ("" when it can): it lacks
    a capability ``chown`` and the id changes need, or the interpreter is not readable by
    that uid. Asked once, by the zygote: its children have its capabilities and its files."""
    lacking = _capabilities.missing(_capabilities.UID_DROP_CAPS)
    if lacking:
        return f"no {'/'.join(lacking)} (capabilities dropped)"
    if not readable_by_nobody(install_paths):
        return "interpreter install not readable by uid 65534"
    return ""


def isolate(cfg: ChildConfig) -> tuple[dict[str, Any], str]:
    """Take the child's own session, cgroups, scratch and uid; the facts for the enforcement
    report so far, and the scratch dir. Raises :class:`SetupError`."""
    facts: dict[str, Any] = {"rlimits": bool(cfg["rlimits"])}
    step("take a session of its own (setsid)", os.setsid)
    facts["setsid"] = True
    _join_cgroups(cfg, facts)
    drop = _uid_drop(cfg, facts)
    owner = (NOBODY, NOBODY) if drop else (os.geteuid(), os.getegid())
    namespaces = [*cfg["zygote_namespaces"], *(("pid",) if cfg["pidns"] else ())]
    if cfg["tmpfs"]:
        scratch = os.path.join(cfg["root"], MOUNT_POINT)
        step("enter a mount namespace of its own", lambda: unshare(CLONE_NEWNS))
        why = mount_scratch(scratch, cfg["scratch_mib"], uid=owner[0], gid=owner[1])
        if why:
            raise SetupError("mount its scratch tmpfs", OSError(why))
        namespaces.append("mount")
    else:
        scratch = cfg["scratch"]
        step(f"make its scratch dir {scratch}", lambda: os.mkdir(scratch, 0o700))
        if drop:
            step("give its scratch dir to uid 65534", lambda: os.chown(scratch, *owner))
    if drop:
        step("drop to uid 65534", become_nobody)
        facts["uid_dropped"] = True
    if cfg["zygote_namespaces"]:
        # Capabilities only inside a namespace of its own: none over the zygote's.
        try:
            unshare(CLONE_NEWUSER)
            if "user" not in namespaces:
                namespaces.append("user")
        except OSError as exc:
            facts["namespace_error"] = f"no user namespace of its own ({exc})"
    facts["namespaces"] = tuple(namespaces)
    facts.setdefault("namespace_error", cfg["namespace_error"])
    facts["scratch_error"] = "" if cfg["tmpfs"] else cfg["tmpfs_error"]
    facts["scratch_quota"] = bool(cfg["tmpfs"])
    # No tmpfs: the scratch keeper keeps the quota (``_gatekeeper``).
    facts["scratch_keeper"] = not cfg["tmpfs"] and bool(cfg["rlimits"])
    return facts, scratch


def _join_cgroups(cfg: ChildConfig, facts: dict[str, Any]) -> None:
    joined = []
    for name, procs in cfg["cgroups"]:
        try:
            write_file(procs, "0")
            joined.append(name)
        except OSError:
            pass
    facts["cgroups"] = tuple(joined)
    if "unified" in joined:
        facts["cgroup_v2_controllers"] = tuple(cfg["cgroup_v2_controllers"])
    facts["cgroup_note"] = cfg["cgroup_note"] or (
        "" if "memory" in joined else "could not join the run's memory cgroup"
    )


def _uid_drop(cfg: ChildConfig, facts: dict[str, Any]) -> bool:
    """Whether to drop to uid 65534: asked for, running as root, and able to (the
    zygote's :func:`uid_drop_obstacle`). A zygote that dropped itself already (to enter a
    user namespace as root may not) has children that are 65534 from the start."""
    if os.geteuid() == NOBODY and cfg["zygote_uid_dropped"]:
        facts["uid_dropped"] = True
        return False
    if not cfg["drop_privileges"] or os.geteuid() != 0:
        return False
    if cfg["uid_drop_obstacle"]:
        facts["uid_note"] = cfg["uid_drop_obstacle"]
        return False
    return True
