"""The per-dimension enforcement report, built from what actually applied, and ``require``.

A dimension is ``full`` when every guarantee of it holds, through whichever mechanism this
host allows (DESIGN section 7, "Where hosts run"; the table in docs/security.md):

- filesystem: Landlock (reads and writes outside the allowed paths) and a scratch quota
  (a tmpfs of ``scratch_mib``, or the keeper's quota where no tmpfs can be mounted);
- network: seccomp refusing ``socket()`` and every way to a unix socket by path or abstract
  name (``connect``, ``bind``, ``sendto`` with an address, datagram socketpairs), with a net
  namespace and Landlock's TCP rule on top where they exist (a net namespace alone leaves
  the filesystem's unix sockets reachable);
- processes: seccomp (no fork, no exec, every call that names a process only on the child
  itself: signals, rlimits, priorities, scheduling), so killing
  the child ends everything; a pid namespace and ``cgroup.kill`` on top where they exist;
  and the host's processes out of reach through ``/proc`` (Landlock, a user namespace or
  another uid);
- memory: a cgroup limit, or RLIMIT_DATA (private memory) with seccomp refusing the shared
  memory it does not count and Landlock keeping ``/dev/shm`` out;
- cpu: RLIMIT_CPU.

Each gap names what is missing and what the host can do about it. The texts carry no
per-run numbers, so ``probe()`` and a run report the same words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._types import DIMENSIONS, Containment, Dimension, Enforcement


@dataclass(frozen=True, kw_only=True)
class Facts:
    """What the containment steps achieved in one child (plain data, JSON-able)."""

    setsid: bool = False
    namespaces: tuple[str, ...] = ()
    namespace_error: str = ""
    cgroups: tuple[str, ...] = ()
    """The run cgroups the keeper joined: ``memory``, ``pids`` (v1), ``unified`` (v2)."""
    cgroup_v2_controllers: tuple[str, ...] = ()
    """Controllers (``memory``, ``pids``) the run's v2 cgroup has."""
    cgroup_note: str = ""
    """Why there is no memory cgroup, when there is none."""
    uid_dropped: bool = False
    uid_note: str = ""
    rlimits: bool = False
    landlock_abi: int = 0
    landlock_error: str = ""
    seccomp: bool = False
    seccomp_error: str = ""
    scratch_quota: bool = False
    """A tmpfs of ``scratch_mib`` holds the scratch dir."""
    scratch_keeper: bool = False
    """No tmpfs: the keeper watches the scratch dir and refuses writes past the quota."""
    scratch_gate: bool = False
    """...and every call that could grow a scratch file waits for its yes (no threads)."""
    scratch_gate_error: str = ""
    scratch_error: str = ""
    notes: tuple[str, ...] = field(default=())


def _e(level: str, mechanism: str, gap: str = "") -> dict[str, str]:
    return {"level": level, "mechanism": mechanism, "gap": gap}


def _join(parts: list[str], sep: str = "; ") -> str:
    return sep.join(p for p in parts if p)


_KEEPER_QUOTA_GAP = (
    "no tmpfs: {why}; the keeper refuses writes once the files pass the quota, but a burst "
    "between two of its checks can pass it{gate} (docs/deployment.md: how to get a tmpfs)"
)
_GATE_GAP = (
    "no tmpfs: {why}; the keeper answers each growing write itself (about 50-90 us each), and "
    "the program has no threads meanwhile (require no full filesystem to have them)"
)


def _filesystem(f: Facts) -> dict[str, str]:
    quota = ""
    if f.scratch_quota:
        quota = " + scratch tmpfs quota (Limits.scratch_mib, held in memory)"
    elif f.scratch_keeper and f.scratch_gate:
        quota = (
            " + keeper scratch quota (Limits.scratch_mib: every write that could grow a "
            "scratch file waits for the keeper's yes, seccomp user notification)"
        )
    elif f.scratch_keeper:
        quota = " + keeper scratch quota (Limits.scratch_mib, RLIMIT_FSIZE per file)"
    no_quota = (
        ""
        if quota
        else f"no scratch quota ({f.scratch_error or 'not set up'}): RLIMIT_FSIZE per file only"
    )
    # Only root has a uid to drop: say what happened to it.
    uid = "uid 65534" if f.uid_dropped else f"uid not dropped ({f.uid_note})" if f.uid_note else ""
    if f.landlock_abi:
        # The keeper's quota without its gate acts after the writes it sees, so it cannot
        # promise the bound; with the gate it decides each one before it happens.
        hard = f.scratch_quota or (f.scratch_keeper and f.scratch_gate)
        mechanism = (
            f"Landlock ABI {f.landlock_abi}: read-only interpreter + libraries, "
            "read-write scratch" + quota
        )
        if f.scratch_keeper and f.scratch_gate:
            keeper = _GATE_GAP.format(why=f.scratch_error)
        elif f.scratch_keeper:
            gate = f" ({f.scratch_gate_error})" if f.scratch_gate_error else ""
            keeper = _KEEPER_QUOTA_GAP.format(why=f.scratch_error, gate=gate)
        else:
            keeper = ""
        return _e("full" if hard else "partial", mechanism, _join([uid, keeper, no_quota]))
    landlock = f.landlock_error or "Landlock off"
    if f.uid_dropped:
        return _e(
            "partial", "uid 65534 (file permissions only)" + quota, _join([landlock, no_quota])
        )
    return _e("none", "none" + quota, _join([landlock, no_quota]))


_SOCKETS = "seccomp socket()/connect() deny (connected socketpairs only)"


def _network(f: Facts) -> dict[str, str]:
    tcp = " + Landlock TCP deny" if f.landlock_abi >= 4 else ""
    if f.seccomp:
        # No socket can be made and none reached by path or name, whatever the Landlock ABI;
        # a net namespace and Landlock's TCP rule are defence in depth on top.
        netns = "net namespace (no interfaces) + " if "net" in f.namespaces else ""
        return _e("full", netns + _SOCKETS + tcp)
    why = f.seccomp_error or "seccomp off"
    if "net" in f.namespaces:
        return _e(
            "partial",
            "net namespace (no interfaces)" + tcp,
            f"unix sockets by path reachable, and abstract ones without Landlock scope ({why})",
        )
    if tcp:
        return _e(
            "partial",
            "Landlock TCP deny",
            "UDP and unix sockets not covered (no netns, no seccomp)",
        )
    return _e("none", "none", _join([f.namespace_error, f.seccomp_error]) or "no netns or seccomp")


def _processes(f: Facts) -> dict[str, str]:
    ns = set(f.namespaces)
    signals = ["seccomp pid filter"] if f.seccomp else []
    if f.landlock_abi >= 6:
        signals.append("Landlock scope")
    if "pid" in ns:
        signals.append("pid namespace")
    killers = []
    if "pid" in ns:
        killers.append("pid namespace")
    if "unified" in f.cgroups:
        killers.append("cgroup.kill")
    if "pids" in f.cgroups or "pids" in f.cgroup_v2_controllers:
        killers.append("pids.max")
    signal_text = (
        f"calls naming a process reach itself only ({' + '.join(signals)})" if signals else ""
    )
    # Same uid, same user namespace, /proc visible: the host's /proc/<pid>/mem is open to it.
    exposed = not (f.landlock_abi or "user" in ns or f.uid_dropped)
    if f.seccomp and exposed:
        mechanism = _join(["seccomp fork/exec deny", signal_text, *killers], " + ")
        return _e(
            "partial",
            mechanism,
            "the host's processes are reachable through /proc (same uid, no user namespace, "
            f"no Landlock: {f.landlock_error or 'off'})",
        )
    if f.seccomp:
        # Without fork or exec the child is the whole tree: killing its pid ends the run,
        # and the zygote (its parent, a subreaper) reaps it.
        deny = "seccomp fork/exec/thread deny" if f.scratch_gate else "seccomp fork/exec deny"
        mechanism = _join([deny, signal_text, *killers, "zygote kill + reap"], " + ")
        return _e("full", mechanism)
    gap = f.seccomp_error or "no seccomp"
    if killers or signal_text:
        return _e("partial", _join([*killers, signal_text, "zygote kill + reap"], " + "), gap)
    return _e("none", "zygote kill + reap", _join([gap, "no pid namespace or cgroup"]))


def _memory(f: Facts) -> dict[str, str]:
    data = " + RLIMIT_DATA backstop" if f.rlimits else ""
    if "memory" in f.cgroups:
        return _e("full", "cgroup v1 memory (+memsw) limit" + data)
    if "unified" in f.cgroups and "memory" in f.cgroup_v2_controllers:
        return _e("full", "cgroup v2 memory.max (+swap.max)" + data)
    if not f.rlimits:
        return _e("none", "none", _join([f.cgroup_note or "no memory cgroup", "rlimits off"]))
    uncounted = "kernel buffers of pipes and sockets (64 fds at most)"
    if f.scratch_quota:
        uncounted += " and the scratch tmpfs (Limits.scratch_mib)"
    no_cgroup = _join(
        [
            f"no memory cgroup ({f.cgroup_note or 'none writable'})",
            f"RLIMIT_DATA counts private memory; {uncounted} are bounded apart",
        ]
    )
    missing = []
    if not f.seccomp:
        missing.append(f"shared memory not refused ({f.seccomp_error or 'seccomp off'})")
    if not f.landlock_abi:
        missing.append("/dev/shm reachable (no Landlock)")
    if missing:
        return _e("partial", "RLIMIT_DATA (private memory)", _join([*missing, no_cgroup]))
    return _e(
        "full",
        "RLIMIT_DATA (private memory) + seccomp shared-memory deny + Landlock (no /dev/shm)",
        no_cgroup,
    )


def _cpu(f: Facts) -> dict[str, str]:
    if f.rlimits:
        return _e("full", "RLIMIT_CPU", "whole-second granularity")
    return _e("none", "none", "rlimits off; only the host wall clock")


def report(f: Facts) -> dict[str, dict[str, str]]:
    """The enforcement report (the ``ready`` frame's ``enforcement`` field)."""
    return {
        "filesystem": _filesystem(f),
        "network": _network(f),
        "processes": _processes(f),
        "memory": _memory(f),
        "cpu": _cpu(f),
    }


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
        + ". docs/deployment.md says what the host can change. To accept this, pass "
        + f"Containment(require=...) without {without}"
        + f" (ptc run / ptc serve: --require {rest or 'none'})."
    )
