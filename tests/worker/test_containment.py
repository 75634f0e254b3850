"""Containment steps and the enforcement report: each mechanism off, and as an unprivileged user."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
import traceback
from typing import Any

import anyio
import pytest

from tests.security._support import run
from worker import Containment, Limits, SubprocessBackend
from worker._child._limits import CPU_HARD_MARGIN_S
from worker._host import _death_cause
from worker._host._cgroups import RunCgroups
from worker._kernel import _landlock, _seccomp, _syscalls
from worker._supervisor import _confine, _isolate


def _levels(enforcement: Any) -> dict[str, str]:
    return {d: e.level for d, e in enforcement.items()}


ALL_FULL = dict.fromkeys(("filesystem", "network", "processes", "memory", "cpu"), "full")


@pytest.mark.parametrize(
    ("switch", "expected", "probe"),
    [
        # No mount namespace, so no tmpfs: the keeper's scratch quota, which is partial.
        ("namespaces", {"filesystem": "partial"}, "import os\nreturn os.getpid() != 1"),
        # No memory cgroup: RLIMIT_DATA, with seccomp and Landlock closing shared memory.
        ("cgroups", {}, "return 1"),
        ("rlimits", {"cpu": "none"}, "import resource\nreturn resource.getrlimit(0)[0] == -1"),
        ("landlock", {"filesystem": "none"}, "return len(open('/etc/passwd').read()) > 0"),
        (
            "seccomp",
            {"processes": "partial", "network": "partial"},
            "import socket\nsocket.socketpair()\nreturn 1",
        ),
    ],
)
@pytest.mark.needs_root
@pytest.mark.anyio
async def test_each_mechanism_can_be_switched_off(
    switch: str, expected: dict[str, str], probe: str
) -> None:
    switches: dict[str, Any] = {switch: False}
    containment = dataclasses.replace(Containment(require=frozenset(), pool_size=0), **switches)
    async with SubprocessBackend(containment) as b:
        out = await run(b, probe)
    assert out.ok and out.value not in (False, None), out.detail
    assert _levels(out.enforcement) == {**ALL_FULL, **expected}
    mechanisms = " ".join(e.mechanism for e in out.enforcement.values())
    marker = {
        "namespaces": "namespace",
        "cgroups": "cgroup",
        "rlimits": "RLIMIT",
        "landlock": "Landlock",
        "seccomp": "seccomp",
    }[switch]
    if switch in ("namespaces", "rlimits"):
        assert marker not in mechanisms
    if switch == "landlock":
        assert "Landlock" not in mechanisms


@pytest.mark.needs_root
@pytest.mark.anyio
async def test_everything_off_still_runs_when_nothing_is_required() -> None:
    containment = Containment(
        require=frozenset(),
        namespaces=False,
        cgroups=False,
        rlimits=False,
        landlock=False,
        seccomp=False,
        drop_privileges=False,
        pool_size=0,
    )
    async with SubprocessBackend(containment) as b:
        out = await run(b, "return 'bare'")
        assert out.value == "bare"
        assert _levels(out.enforcement) == dict.fromkeys(ALL_FULL, "none")
    strict = dataclasses.replace(containment, require=frozenset({"network"}))
    async with SubprocessBackend(strict) as b:
        out = await run(b, "return 1")
    assert out.kind == "sandbox-unavailable" and "'network'" in out.detail


@pytest.mark.needs_root
@pytest.mark.anyio
async def test_per_run_rlimits_reach_a_pooled_child() -> None:
    code = (
        "import resource as r\n"
        "return [list(r.getrlimit(x)) for x in "
        "(r.RLIMIT_CPU, r.RLIMIT_AS, r.RLIMIT_NOFILE, r.RLIMIT_CORE, r.RLIMIT_FSIZE)]"
    )
    async with SubprocessBackend() as b:
        out = await run(b, code, Limits(wall_seconds=3, cpu_seconds=2.5, memory_mib=300))
    cpu, as_, nofile, core, fsize = out.value
    # soft below hard: SIGXCPU at the soft limit names the cause (the child handles it)
    assert cpu == [3, 3 + CPU_HARD_MARGIN_S]
    assert as_ == [(300 + 1024) << 20] * 2
    assert nofile == [64, 64] and core == [0, 0] and fsize == [64 << 20] * 2


def test_readable_by_nobody_checks_every_ancestor() -> None:
    folder = tempfile.mkdtemp()
    os.chmod(folder, 0o700)
    try:
        assert not _isolate.readable_by_nobody([os.path.join(folder, "x")])
        os.chmod(folder, 0o755)
        assert _isolate.readable_by_nobody([folder])
    finally:
        os.rmdir(folder)


def _as_nobody() -> dict[str, Any]:
    """Runs in a forked process that dropped to uid 65534: what containment is possible."""
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    facts: dict[str, Any] = {"uid": os.getuid()}
    cg = RunCgroups.create(f"ptc-nobody-{os.getpid()}")
    facts["cgroups"] = [n for n in ("memory", "pids", "unified") if getattr(cg, n)]
    cg.remove()
    facts["landlock_abi"] = _landlock.abi_version()
    facts["seccomp"] = _seccomp.available()
    pid = os.fork()
    if pid == 0:
        try:
            _syscalls.unshare(
                _syscalls.CLONE_NEWUSER | _syscalls.CLONE_NEWNET | _syscalls.CLONE_NEWPID
            )
            os._exit(0)
        except OSError:
            os._exit(1)
    facts["userns"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0

    async def attempt() -> dict[str, Any]:
        containment = Containment(require=frozenset({"network", "processes"}), pool_size=0)
        b = SubprocessBackend(containment)
        try:  # no warm-up: run() itself must turn a failed start into an outcome
            out = await run(b, "return 'as nobody'")
        finally:
            await b.aclose()
        return {
            "ok": out.ok,
            "kind": out.kind,
            "detail": out.detail,
            "levels": _levels(out.enforcement),
        }

    facts["run"] = anyio.run(attempt)
    return facts


@pytest.mark.needs_root
def test_as_an_unprivileged_user_runs_degrade_or_fail_closed() -> None:
    # A temp dir nobody can use (the suite's own is private to root): its scratch root.
    tmp = tempfile.mkdtemp(prefix="ptc-nobody-", dir="/tmp")
    os.chmod(tmp, 0o1777)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.environ["TMPDIR"] = tempfile.tempdir = tmp
            result = _as_nobody()
        except BaseException:  # report, never hang the parent
            result = {"error": traceback.format_exc()}
        os.write(write, json.dumps(result).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        facts = json.loads(fh.read())
    os.waitpid(pid, 0)
    shutil.rmtree(tmp, ignore_errors=True)
    assert "error" not in facts, facts
    assert facts["uid"] == 65534
    assert facts["cgroups"] == []  # no cgroup writes without root
    assert facts["userns"] and facts["landlock_abi"] > 0 and facts["seccomp"]
    run_facts = facts["run"]
    if _isolate.readable_by_nobody([sys.base_prefix, sys.prefix]):
        assert run_facts["ok"], run_facts
        assert run_facts["levels"]["memory"] == "partial"
        assert run_facts["levels"]["processes"] == "full"  # seccomp + pid namespace
    else:
        # this host keeps the interpreter under a 0700 home: no zygote can start as nobody,
        # and the run fails closed with a reason instead of hanging
        assert run_facts["kind"] == "worker-exit"
        assert "could not start the zygote" in run_facts["detail"]


@pytest.mark.anyio
async def test_the_child_handles_sigxcpu_and_only_its_own_exit_names_the_cpu_limit() -> None:
    code = "import signal\nreturn signal.getsignal(signal.SIGXCPU).__name__"
    async with SubprocessBackend() as b:
        assert (await run(b, code)).value == "_exit_at_cpu_limit"


SIGKILL_STATUS = 9  # wait status of a process killed by SIGKILL
SIGXCPU_STATUS = 24
HANDLER_EXIT_STATUS = _confine.EXIT_CPU_LIMIT << 8


@pytest.mark.parametrize(
    ("status", "clock_s", "soft_s", "expected"),
    [
        (HANDLER_EXIT_STATUS, 2.004, 2, True),  # the SIGXCPU handler's exit
        (SIGKILL_STATUS, 3.004, 2, True),  # SIGXCPU ignored: the hard limit's SIGKILL
        (SIGXCPU_STATUS, 2.004, 2, True),  # no pid namespace, no handler: SIGXCPU kills
        (HANDLER_EXIT_STATUS, 1.5, 2, False),  # the exit code forged before the limit
        (SIGKILL_STATUS, 1.99, 2, False),  # killed by something else before the limit
        (SIGKILL_STATUS, 9.0, 0, False),  # no CPU limit was applied
        (0, 2.5, 2, False),  # exited normally after the limit (SIGXCPU handled elsewhere)
        (1 << 8, 2.5, 2, False),  # any other exit status
        (11, 2.5, 2, False),  # SIGSEGV
    ],
)
def test_died_of_cpu_limit_needs_the_kernel_clock_and_a_limit_death(
    status: int, clock_s: float, soft_s: float, expected: bool
) -> None:
    assert _death_cause.died_of_cpu_limit(status, clock_s=clock_s, soft_s=soft_s) is expected


def test_the_cpu_clock_is_the_one_rlimit_cpu_counts() -> None:
    """The zygote's clock (CPUCLOCK_PROF) of a child the hard RLIMIT_CPU killed reads at
    least the limit, also while the child is a zombie; rusage (precise run time) may
    read less, which is why it is not the evidence."""
    import select
    import subprocess

    busy = "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (1, 1))\nwhile True: pass"
    proc = subprocess.Popen([sys.executable, "-I", "-c", busy])
    pidfd = os.pidfd_open(proc.pid)
    try:
        select.select([pidfd], [], [], 30)
        clock_s = _syscalls.cpu_clock_s(proc.pid)
    finally:
        os.close(pidfd)
        proc.kill()
        proc.wait()
    assert proc.returncode == -9
    assert clock_s >= 1.0
