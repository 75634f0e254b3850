"""The benchmarks record the host state their figures depend on (benchmarks/_host.py), and
several latency runs are reported side by side (``python -m benchmarks latency --runs N``)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import _host
from benchmarks._floor import fork_floor
from benchmarks._latency_report import render_runs

HYBRID = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime{extra} 0 0
proc /proc proc rw,nosuid 0 0
"""
PURE_V2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"


@pytest.mark.parametrize(
    ("mounts", "version", "favordynmods"),
    [
        (HYBRID.format(extra=""), "hybrid (v1 controllers, v2 at /sys/fs/cgroup/unified)", False),
        (HYBRID.format(extra=",favordynmods"), "hybrid", True),
        (PURE_V2, "v2", False),
        ("proc /proc proc rw 0 0\n", "none mounted", False),
    ],
)
def test_the_cgroup_hierarchy_and_favordynmods_are_read_from_the_mounts(
    mounts: str, version: str, favordynmods: bool
) -> None:
    facts = _host.cgroup_facts(mounts)
    assert facts["version"].startswith(version)
    assert facts["cgroup2_favordynmods"] is favordynmods
    assert ("favordynmods ON" in facts["summary"]) is favordynmods


def test_host_facts_name_what_changes_the_figures() -> None:
    facts = _host.host_facts()
    assert {"kernel", "cpu_count", "virtualisation", "cgroups", "load_average", "python"} <= set(
        facts
    )
    assert {"1m", "5m", "15m"} <= set(facts["load_average"])
    text = _host.describe({**facts, "load_average_at_end": _host.load()})
    assert facts["kernel"] in text and "favordynmods" in text
    assert "at the start" in text and "at the end" in text


def payload(figure: str, verdict: str, load: float, *, faults: bool = True) -> dict[str, Any]:
    machine = {**_host.host_facts(), "load_average": {"1m": load}}
    cpu = {"machine": 20.0, "host": 2.0, "zygote": 1.0, "children": 7.0}
    facts: dict[str, Any] = {"cpu_ms_per_back_to_back_run": cpu}
    if faults:  # results from before the suite counted them have none
        facts["minor_faults_per_back_to_back_run"] = {"zygote": 150, "children": 1850}
    return {
        "machine": machine,
        "targets": [["run_code constant p50, 50 ms apart", figure, "<= 2 ms", verdict, ""]],
        "facts": facts,
    }


def test_runs_side_by_side_with_each_runs_host_state() -> None:
    markdown, data = render_runs(
        [payload("1.900 ms", "met", 0.5), payload("2.300 ms", "NOT met", 3.25)]
    )
    assert "| run_code constant p50, 50 ms apart | <= 2 ms | 1.900 ms | 2.300 ms | 1 of 2 |" in (
        markdown
    )
    assert "load average (1 min) 0.5 at the start" in markdown
    assert "load average (1 min) 3.25 at the start" in markdown
    assert "| 10.0 ms | 10.0 ms |" in markdown  # ours: host + zygote + children
    faults = "| page faults per back-to-back run: zygote, children | - |"
    assert f"{faults} 2,000 | 2,000 |" in markdown
    assert len(data["runs"]) == 2


def test_runs_from_before_the_fault_counts_show_none() -> None:
    markdown, _ = render_runs([payload("1.900 ms", "met", 0.5, faults=False)])
    faults = "| page faults per back-to-back run: zygote, children | - |"
    assert f"{faults} - | - |" in markdown


def test_the_floor_is_a_bare_fork_measured_per_run() -> None:
    floor = fork_floor(5)
    assert len(floor["wall_ms"]) == 5 and all(ms > 0 for ms in floor["wall_ms"])
    assert floor["child_cpu_ms"] >= 0 and floor["parent_cpu_ms"] > 0
    assert floor["child_minor_faults"] > 0  # a child writes pages, however few


def test_runs_set_the_cpu_per_run_against_the_floor_of_the_same_run() -> None:
    run = payload("1.900 ms", "met", 0.5)
    run["facts"]["floor_per_run"] = {"child_cpu_ms": 1.5, "parent_cpu_ms": 0.5}
    markdown, _ = render_runs([run, payload("2.300 ms", "NOT met", 3.25)])
    assert "| the same / the floor (a bare fork running 1, same run) | <= 2x | 5.0x | - |" in (
        markdown
    )
