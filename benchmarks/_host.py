"""The host facts that change the figures, recorded with every result.

A run's cost is mostly processes made and torn down: the kernel, the cgroup hierarchy and
its mount options (cgroup2's ``favordynmods`` makes moving a process between cgroups cheap
and forks and exits dearer), virtualisation, the CPUs and what else the machine is doing
(the load average) move the figures more than most code changes do. Nothing here changes
the host; it only reads it.
"""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


def host_facts() -> dict[str, Any]:
    """What the figures depend on, read now (the load average too: see :func:`load`)."""
    return {
        "date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "platform": platform.platform(),
        "kernel": platform.release(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "virtualisation": _virtualisation(),
        "cgroups": cgroup_facts(_read("/proc/mounts")),
        "load_average": load(),
    }


def load() -> dict[str, Any]:
    """The 1, 5 and 15 minute load averages and the runnable/total task counts."""
    try:
        fields = Path("/proc/loadavg").read_text(encoding="ascii").split()
    except OSError:
        one, five, fifteen = os.getloadavg()
        return {"1m": one, "5m": five, "15m": fifteen}
    return {
        "1m": float(fields[0]),
        "5m": float(fields[1]),
        "15m": float(fields[2]),
        "runnable/total tasks": fields[3],
    }


def describe(facts: dict[str, Any]) -> str:
    """One paragraph a reader of a figure needs: which machine, in which state."""
    cgroups = facts.get("cgroups", {})
    virt = facts.get("virtualisation", {})
    start = facts.get("load_average", {})
    end = facts.get("load_average_at_end")
    loads = f"{start.get('1m', '?')} at the start" + (
        f", {end['1m']} at the end" if end else ""
    )
    return (
        f"{facts.get('date_utc', '?')}: Linux {facts.get('kernel', '?')}, "
        f"{facts.get('cpu_count', '?')} CPUs ({facts.get('cpu_model', '?')}), "
        f"{virt.get('summary', 'virtualisation unknown')}; cgroups {cgroups.get('summary', '?')}; "
        f"{facts.get('python', '?')}; load average (1 min) {loads}."
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _virtualisation() -> dict[str, Any]:
    facts: dict[str, Any] = {}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8")
        facts["hypervisor_cpu_flag"] = " hypervisor" in cpuinfo
    except OSError:
        pass
    detect = shutil.which("systemd-detect-virt")
    for kind in ("vm", "container"):
        if detect is not None:
            done = subprocess.run(
                [detect, f"--{kind}"], capture_output=True, text=True, check=False, timeout=5
            )
            facts[kind] = done.stdout.strip() or "none"
    product = Path("/sys/class/dmi/id/product_name")
    if product.exists():
        facts["dmi_product"] = product.read_text(encoding="utf-8", errors="replace").strip()
    try:
        cmdline = Path("/proc/cmdline").read_text(encoding="utf-8", errors="replace")
        if "firecracker" in cmdline:
            facts["kernel_cmdline"] = "mentions firecracker"
    except OSError:
        pass
    kinds = [facts[k] for k in ("vm", "container") if facts.get(k) not in (None, "none")]
    if facts.get("kernel_cmdline"):
        kinds.append(f"the kernel command line {facts['kernel_cmdline']}")
    guest = "a VM guest" if facts.get("hypervisor_cpu_flag") else "no hypervisor CPU flag"
    facts["summary"] = f"{guest} ({'; '.join(kinds) or 'type unknown'})"
    return facts


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cgroup_facts(mounts_text: str) -> dict[str, Any]:
    """The cgroup hierarchy as ``/proc/mounts`` (its text) shows it: version, mounts and
    their options, and whether cgroup2 is mounted ``favordynmods``."""
    mounts = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
            mounts.append({"path": fields[1], "type": fields[2], "options": fields[3]})
    v1 = [m for m in mounts if m["type"] == "cgroup"]
    v2 = [m for m in mounts if m["type"] == "cgroup2"]
    if v1 and v2:
        version = "hybrid (v1 controllers, v2 at " + ", ".join(m["path"] for m in v2) + ")"
    elif v2:
        version = "v2"
    elif v1:
        version = "v1"
    else:
        version = "none mounted"
    favordynmods = any("favordynmods" in m["options"].split(",") for m in v2)
    v2_options = "; ".join(f"{m['path']} {m['options']}" for m in v2) or "no cgroup2"
    return {
        "version": version,
        "cgroup2_favordynmods": favordynmods,
        "mounts": mounts,
        "summary": f"{version}, cgroup2 mounted {v2_options}"
        + (" (favordynmods ON)" if favordynmods else " (favordynmods off)"),
    }
