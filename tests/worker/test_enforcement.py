"""The enforcement report from facts: each dimension is ``full`` through whichever mechanism
the host allows, and every gap says what is missing and what the host can do."""

from __future__ import annotations

import dataclasses

import pytest

from worker import Containment, Enforcement
from worker._kernel._enforcement import Facts, from_json, missing, report
from worker._kernel._landlock import unavailable_reason

ALL_NS = ("user", "net", "ipc", "mount", "pid")
NO_NS = "unshare: Operation not permitted"
FULL = dict.fromkeys(("filesystem", "network", "processes", "memory", "cpu"), "full")

# What a child reports in each environment of DESIGN section 7 (before the host's priming).
ENVIRONMENTS = {
    "E1": Facts(
        namespaces=ALL_NS,
        cgroups=("memory", "pids", "unified"),
        rlimits=True,
        landlock_abi=7,
        seccomp=True,
        scratch_quota=True,
    ),
    "E2": Facts(
        namespaces=ALL_NS,
        cgroup_note="/sys/fs/cgroup/unified/user.slice is not writable by uid 1000",
        rlimits=True,
        landlock_abi=7,
        seccomp=True,
        scratch_quota=True,
    ),
    "E3": Facts(
        namespace_error=NO_NS,
        rlimits=True,
        landlock_abi=7,
        seccomp=True,
        scratch_keeper=True,
        scratch_error="no mount namespace",
    ),
    "E3-gated": Facts(
        namespace_error=NO_NS,
        rlimits=True,
        landlock_abi=7,
        seccomp=True,
        scratch_keeper=True,
        scratch_gate=True,
        scratch_error="no mount namespace",
    ),
    "E4-old": Facts(
        namespace_error=NO_NS,
        uid_dropped=True,
        rlimits=True,
        landlock_error=unavailable_reason(1),
        seccomp=True,
        scratch_keeper=True,
    ),
}
LEVELS = {
    "E1": FULL,
    "E2": FULL,
    "E3": {**FULL, "filesystem": "partial"},
    "E3-gated": FULL,
    "E4-old": {**FULL, "filesystem": "partial", "memory": "partial"},
}


def _levels(facts: Facts) -> dict[str, str]:
    return {d: e["level"] for d, e in report(facts).items()}


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_each_environment_gets_its_levels(env: str) -> None:
    assert _levels(ENVIRONMENTS[env]) == LEVELS[env]


def test_without_namespaces_or_cgroups_seccomp_carries_network_and_processes() -> None:
    out = report(ENVIRONMENTS["E3"])
    assert out["network"] == {
        "level": "full",
        "mechanism": "seccomp socket()/connect() deny (connected socketpairs only)"
        " + Landlock TCP deny",
        "gap": "",
    }
    assert out["processes"]["mechanism"] == (
        "seccomp fork/exec deny + calls naming a process reach itself only (seccomp pid filter"
        " + Landlock scope) + zygote kill + reap"
    )


def test_a_net_namespace_alone_leaves_unix_sockets_reachable() -> None:
    # The red team's datagrams reached a host daemon's unix socket from inside a net
    # namespace: it separates interfaces, not the filesystem's sockets.
    no_seccomp = dataclasses.replace(ENVIRONMENTS["E1"], seccomp=False, seccomp_error="x")
    network = report(no_seccomp)["network"]
    assert network["level"] == "partial"
    assert "unix sockets by path reachable" in network["gap"]
    assert report(ENVIRONMENTS["E1"])["network"]["mechanism"].startswith(
        "net namespace (no interfaces) + seccomp socket()/connect() deny"
    )


def test_memory_is_full_on_rlimit_data_only_with_shared_memory_closed() -> None:
    e2 = report(ENVIRONMENTS["E2"])["memory"]
    assert e2["level"] == "full" and e2["mechanism"].startswith("RLIMIT_DATA")
    assert "not writable by uid 1000" in e2["gap"] and "scratch tmpfs" in e2["gap"]
    no_landlock = dataclasses.replace(ENVIRONMENTS["E2"], landlock_abi=0)
    assert report(no_landlock)["memory"]["level"] == "partial"
    assert "/dev/shm reachable" in report(no_landlock)["memory"]["gap"]
    no_seccomp = dataclasses.replace(ENVIRONMENTS["E2"], seccomp=False, seccomp_error="x")
    assert "shared memory not refused" in report(no_seccomp)["memory"]["gap"]
    v2 = dataclasses.replace(
        ENVIRONMENTS["E2"], cgroups=("unified",), cgroup_v2_controllers=("memory", "pids")
    )
    assert report(v2)["memory"] == {
        "level": "full",
        "mechanism": "cgroup v2 memory.max (+swap.max) + RLIMIT_DATA backstop",
        "gap": "",
    }


def test_the_keeper_quota_is_partial_and_says_how_to_get_a_tmpfs() -> None:
    fs = report(ENVIRONMENTS["E3"])["filesystem"]
    assert fs["level"] == "partial"
    assert "keeper scratch quota" in fs["mechanism"]
    assert "a burst between two of its checks can pass it" in fs["gap"]
    assert "how to get a tmpfs" in fs["gap"]


def test_the_keepers_write_gate_is_a_hard_quota_that_costs_threads() -> None:
    out = report(ENVIRONMENTS["E3-gated"])
    assert "every write that could grow a scratch file waits" in out["filesystem"]["mechanism"]
    assert "no threads meanwhile" in out["filesystem"]["gap"]
    assert out["processes"]["mechanism"].startswith("seccomp fork/exec/thread deny")


def test_without_a_quota_the_filesystem_is_partial() -> None:
    bare = dataclasses.replace(ENVIRONMENTS["E3"], scratch_keeper=False, scratch_error="off")
    fs = report(bare)["filesystem"]
    assert fs["level"] == "partial" and "no scratch quota (off)" in fs["gap"]


@pytest.mark.parametrize(
    ("err", "words"),
    [
        (1, "refused by seccomp (EPERM: the container's seccomp profile)"),
        (38, "the kernel has no Landlock (ENOSYS)"),
        (95, "not enabled (EOPNOTSUPP)"),
    ],
)
def test_landlock_gaps_tell_a_refusing_profile_from_a_missing_kernel(err: int, words: str) -> None:
    facts = dataclasses.replace(
        ENVIRONMENTS["E3"], landlock_abi=0, landlock_error=unavailable_reason(err)
    )
    fs = report(facts)["filesystem"]
    assert fs["level"] == "none" and words in fs["gap"]


def test_processes_need_proc_out_of_reach_without_landlock() -> None:
    e3_old_kernel = dataclasses.replace(
        ENVIRONMENTS["E3"], landlock_abi=0, landlock_error=unavailable_reason(38)
    )
    processes = report(e3_old_kernel)["processes"]
    assert processes["level"] == "partial"
    assert "reachable through /proc" in processes["gap"] and "ENOSYS" in processes["gap"]
    e4_old = report(ENVIRONMENTS["E4-old"])["processes"]  # another uid: out of reach
    assert e4_old["level"] == "full"


def test_processes_without_seccomp_are_partial_at_best() -> None:
    facts = dataclasses.replace(ENVIRONMENTS["E1"], seccomp=False, seccomp_error="seccomp off")
    assert report(facts)["processes"]["level"] == "partial"
    bare = dataclasses.replace(ENVIRONMENTS["E3"], seccomp=False, landlock_abi=0)
    assert report(bare)["processes"]["level"] == "none"


def test_the_refusal_names_the_gaps_the_docs_and_the_relaxation() -> None:
    enforcement = from_json(report(ENVIRONMENTS["E3"]))
    message = missing(Containment(), enforcement)
    assert message is not None
    assert "filesystem is partial" in message and "docs/deployment.md" in message
    assert "without 'filesystem'" in message
    assert "--require network,processes,memory,cpu" in message
    assert missing(Containment(require=frozenset({"network"})), enforcement) is None


def test_a_missing_dimension_reads_as_none() -> None:
    assert from_json({})["cpu"] == Enforcement(
        level="none", mechanism="unknown", gap="not reported"
    )
