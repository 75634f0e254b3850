"""The per-dimension enforcement report, built from what actually applied, and ``require``.

``full`` follows the design (docs/security.md): filesystem - Landlock; network - a net namespace, or
Landlock TCP + seccomp; processes - seccomp + (pid namespace or cgroup.kill); memory - a
cgroup limit (RLIMIT_AS alone is ``partial``); cpu - RLIMIT_CPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._types import DIMENSIONS, Containment, Dimension, Enforcement


@dataclass(frozen=True, kw_only=True)
class Facts:
    """What the containment steps achieved in one child (plain data, JSON-able)."""

    setsid: bool = False
    namespaces: tuple[str, ...] = ()
    namespace_error: str = ""
    cgroups: tuple[str, ...] = ()
    uid_dropped: bool = False
    uid_note: str = ""
    rlimits: bool = False
    landlock_abi: int = 0
    landlock_error: str = ""
    seccomp: bool = False
    seccomp_error: str = ""
    scratch_quota: bool = False
    scratch_error: str = ""
    notes: tuple[str, ...] = field(default=())


def _e(level: str, mechanism: str, gap: str = "") -> dict[str, str]:
    return {"level": level, "mechanism": mechanism, "gap": gap}


def report(f: Facts) -> dict[str, dict[str, str]]:
    """The enforcement report (the ``ready`` frame's ``enforcement`` field)."""
    ns = set(f.namespaces)
    out: dict[str, dict[str, str]] = {}

    uid = "" if f.uid_dropped or not f.uid_note else f"; {f.uid_note}"
    # The scratch quota: a tmpfs of Limits.scratch_mib in the child's mount namespace.
    quota = " + scratch tmpfs quota (Limits.scratch_mib, held in memory)" if f.scratch_quota else ""
    no_quota = (
        ""
        if f.scratch_quota
        else f"no scratch quota ({f.scratch_error or 'not mounted'}): RLIMIT_FSIZE per file only"
    )
    if f.landlock_abi:
        out["filesystem"] = _e(
            "full",
            f"Landlock ABI {f.landlock_abi}: read-only interpreter + libraries, read-write scratch"
            + quota,
            "; ".join(
                filter(
                    None,
                    [
                        ("uid 65534" if f.uid_dropped else "uid not dropped") + uid,
                        "mount namespace" if "mount" in ns else "",
                        no_quota,
                    ],
                )
            ),
        )
    elif f.uid_dropped:
        gap = "; ".join(filter(None, [f.landlock_error, no_quota]))
        out["filesystem"] = _e("partial", "uid 65534 (file permissions only)" + quota, gap)
    else:
        gap = "; ".join(filter(None, [f.landlock_error or "Landlock off", no_quota]))
        out["filesystem"] = _e("none", "none" + quota, gap)

    tcp = f.landlock_abi >= 4
    if "net" in ns:
        gaps = [] if f.seccomp else ["socket() allowed (seccomp off)"]
        out["network"] = _e(
            "full",
            "net namespace (no interfaces)"
            + (" + seccomp socket() deny" if f.seccomp else "")
            + (" + Landlock TCP deny" if tcp else ""),
            "; ".join(gaps),
        )
    elif f.seccomp and tcp:
        out["network"] = _e("full", "Landlock TCP deny + seccomp socket() deny", "")
    elif f.seccomp:
        out["network"] = _e("partial", "seccomp socket() deny", "no Landlock TCP rule")
    elif tcp:
        out["network"] = _e(
            "partial", "Landlock TCP deny", "UDP and path unix sockets not covered (no netns)"
        )
    else:
        out["network"] = _e("none", "none", f.namespace_error or "no netns, seccomp or Landlock")

    killer = []
    if "pid" in ns:
        killer.append("pid namespace")
    if "unified" in f.cgroups:
        killer.append("cgroup.kill")
    if "pids" in f.cgroups:
        killer.append("pids.max")
    if f.seccomp and ("pid" in ns or "unified" in f.cgroups):
        out["processes"] = _e("full", "seccomp fork/exec deny + " + " + ".join(killer))
    elif f.seccomp or killer:
        mech = " + ".join((["seccomp fork/exec deny"] if f.seccomp else []) + killer)
        gap = (
            f.seccomp_error or "no seccomp" if not f.seccomp else "no pid namespace or cgroup.kill"
        )
        out["processes"] = _e("partial", mech + " + keeper subreaper sweep", gap)
    else:
        out["processes"] = _e("none", "keeper subreaper sweep", "no seccomp, pid ns or cgroup")

    if "memory" in f.cgroups:
        out["memory"] = _e(
            "full",
            "cgroup v1 memory (+memsw) limit" + (" + RLIMIT_AS backstop" if f.rlimits else ""),
        )
    elif f.rlimits:
        out["memory"] = _e("partial", "RLIMIT_AS", "virtual memory only, no cgroup limit")
    else:
        out["memory"] = _e("none", "none", "no cgroup, rlimits off")

    if f.rlimits:
        out["cpu"] = _e("full", "RLIMIT_CPU", "whole-second granularity")
    else:
        out["cpu"] = _e("none", "none", "rlimits off; only the host wall clock")
    return out


def from_json(data: Mapping[str, Any]) -> dict[Dimension, Enforcement]:
    """Typed view of a (validated) enforcement mapping; missing dimensions are ``none``."""
    result: dict[Dimension, Enforcement] = {}
    for dim in DIMENSIONS:
        item = data.get(dim)
        if isinstance(item, Mapping) and item.get("level") in ("full", "partial", "none"):
            result[dim] = Enforcement(
                level=item["level"], mechanism=str(item["mechanism"]), gap=str(item["gap"])
            )
        else:
            result[dim] = Enforcement(level="none", mechanism="unknown", gap="not reported")
    return result


def missing(containment: Containment, enforcement: Mapping[Dimension, Enforcement]) -> str | None:
    """``None`` when every required dimension is ``full``; else a message for the caller,
    naming the relaxation both as ``Containment(require=...)`` and as ``--require``."""
    short = [d for d in DIMENSIONS if d in containment.require and enforcement[d].level != "full"]
    if not short:
        return None
    parts = [
        f"{d} is {enforcement[d].level} ({enforcement[d].mechanism}"
        + (f"; gap: {enforcement[d].gap})" if enforcement[d].gap else ")")
        for d in short
    ]
    without = ", ".join(repr(d) for d in short)
    # One wording for both callers: a host's Python, and the `ptc` command (whose flag it is).
    rest = ",".join(d for d in DIMENSIONS if d in containment.require and d not in short)
    return (
        "required containment is not available on this host: "
        + "; ".join(parts)
        + f". To accept this, pass Containment(require=...) without {without}"
        + f" (ptc run / ptc serve: --require {rest or 'none'})."
    )
