"""Sampling helpers, baseline executors and process-memory probes for the latency suite."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

#: CPU-bound programs; the value is the trailing expression (ptc and smolagents agree on it).
CPU_PROGRAMS = {
    "sum 1..10^6 loop": "total = 0\nfor i in range(1, 1000001):\n    total += i\ntotal",
    "sort 100k dicts": (
        "rows = [{'k': (i * 7919) % 100003, 'i': i} for i in range(100000)]\n"
        "rows.sort(key=lambda r: r['k'])\nrows[0]['i']"
    ),
}


async def sample_async(fn: Callable[[], Awaitable[None]], count: int, *,
                       gap_seconds: float = 0.0) -> list[float]:
    """Milliseconds per awaited call, ``count`` times, sleeping ``gap_seconds`` between."""
    samples = []
    for _ in range(count):
        if gap_seconds:
            await anyio.sleep(gap_seconds)
        started = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def sample_sync(fn: Callable[[], object], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def make_smolagents(functions: dict[str, Callable[..., Any]]) -> Callable[[str], Any]:
    """smolagents' ``LocalPythonExecutor`` (in-process AST interpreter, no isolation)."""
    from smolagents.local_python_executor import LocalPythonExecutor

    executor = LocalPythonExecutor(additional_authorized_imports=[],
                                   additional_functions=functions)
    executor.send_tools({})
    return executor  # type: ignore[no-any-return]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: the ppid follows the last ")".
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _pss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "?"


def descendant_pss_kib() -> list[dict[str, Any]]:
    """PSS of every process below this one, with its depth (1 = our child, e.g. the zygote).

    Read from ``/proc/<pid>/smaps_rollup`` while the runtime is idle, so the deeper
    processes are the pooled, never-used children.
    """
    tree, out = _children(), []
    stack = [(child, 1) for child in tree.get(os.getpid(), [])]
    while stack:
        pid, depth = stack.pop()
        out.append({"pid": pid, "depth": depth, "pss_kib": _pss_kib(pid), "cmd": _name(pid)})
        stack.extend((child, depth + 1) for child in tree.get(pid, []))
    return sorted(out, key=lambda p: (p["depth"], p["pid"]))


def _zygote_stats() -> list[list[str]]:
    """The ``/proc/<pid>/stat`` fields (after the command name) of this process's zygotes."""
    found = []
    for pid in _children().get(os.getpid(), []):
        if "worker._supervisor._zygote" not in _name(pid):
            continue
        try:
            found.append(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split())
        except OSError:
            continue
    return found


def cpu_seconds() -> dict[str, float]:
    """CPU seconds used so far: the machine's busy time (``/proc/stat``), this process's,
    and the zygote's own and its reaped children's (one process per run, and the scratch
    keeper where there is one)."""
    tick = os.sysconf("SC_CLK_TCK")
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    out = {"machine": (sum(fields) - idle) / tick, "host": time.process_time(),
           "zygote": 0.0, "children": 0.0}
    for stat in _zygote_stats():
        out["zygote"] += (int(stat[11]) + int(stat[12])) / tick
        out["children"] += (int(stat[13]) + int(stat[14])) / tick
    return out


def minor_faults() -> dict[str, int]:
    """Minor page faults so far, counted as :func:`cpu_seconds` counts CPU: the zygote's
    own and its reaped children's. Mostly copy-on-write copies of the zygote's
    pages, and unlike CPU time they do not move with the machine's load."""
    out = {"zygote": 0, "children": 0}
    for stat in _zygote_stats():
        out["zygote"] += int(stat[7])
        out["children"] += int(stat[8])
    return out
