"""A host script (run in each reference environment, not imported): the containment suite.

``sys.argv[1]`` is a JSON file: ``{"cases": {name: {"code": str, "limits": {...}, "strict":
bool}}, "abi_limit": int | null}``; in the code, ``BYSTANDER`` becomes the bystander's pid,
``CANARY`` the path of ``canary.txt`` beside this script (the host can read it, no program
may), ``OUTSIDE`` a path in the host's temp dir (no program may write it), ``HOSTPID`` the
host's own pid, ``DGRAMPATH`` the path of a datagram unix socket the host binds in its temp
dir (mode 0777, as ``/dev/log`` is: only the sandbox stands between a program and it) and
``ABSTRACT`` the abstract name of another. The host starts a bystander process of its own uid,
runs every case with
``Containment(require=())`` (so each attack runs, whatever the default would refuse), the
default ``Containment()`` on ``return 1`` and, where that runs, on each ``strict`` case, and
``probe()`` for both. It prints one JSON object: each outcome (kind, value, detail, levels,
peak memory), the probes, whether the bystander survived, whether anything appeared
outside, what its daemon sockets received, and the host's and the bystander's scheduling
state (nice, CPU mask, policy, rlimits) before and after the runs. Uses the public API of
``worker`` only.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
from typing import Any

import anyio

import worker
from worker import Containment, Limits, RunRequest, SubprocessBackend


async def no_calls(calls: Any) -> list[Any]:
    raise AssertionError("the suite's programs call no tool")


def outcome(out: worker.RunOutcome) -> dict[str, Any]:
    return {
        "ok": out.ok,
        "kind": out.kind,
        "value": out.value,
        "detail": out.detail[-1500:],
        "enforcement": out.enforcement_json(),
        "peak_memory_kib": out.stats.peak_memory_kib,
    }


def outside() -> str:
    return os.path.join(tempfile.gettempdir(), "ptc-escaped.txt")


def plain(enforcement: Any) -> dict[str, Any]:
    return {d: e.as_json() for d, e in enforcement.items()}


def dgram_path() -> str:
    return os.path.join(tempfile.gettempdir(), "ptc-daemon.sock")


ABSTRACT = f"ptc-suite-daemon-{os.getpid()}"


def daemons() -> list[socket.socket]:
    """Two datagram sockets a host daemon could own (syslog, journald, a notify socket): one
    by path, writable by everyone, and one by abstract name."""
    by_path = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    by_path.bind(dgram_path())
    os.chmod(dgram_path(), 0o777)
    by_name = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    by_name.bind("\0" + ABSTRACT)
    for sock in (by_path, by_name):
        sock.setblocking(False)
    return [by_path, by_name]


def received(socks: list[socket.socket]) -> list[str]:
    got = []
    for sock in socks:
        while True:
            try:
                got.append(sock.recv(4096).decode("utf-8", "replace"))
            except BlockingIOError:
                break
        sock.close()
    os.unlink(dgram_path())
    return got


def sched_state(pid: int) -> dict[str, Any]:
    """What a program could change in another process if it could name it."""
    return {
        "nice": os.getpriority(os.PRIO_PROCESS, pid),
        "affinity": sorted(os.sched_getaffinity(pid)),
        "policy": os.sched_getscheduler(pid),
        "cpu": resource.prlimit(pid, resource.RLIMIT_CPU),
        "nofile": resource.prlimit(pid, resource.RLIMIT_NOFILE),
    }


def program(case: dict[str, Any], bystander: int, canary: str) -> RunRequest:
    code = (
        case["code"]
        .replace("BYSTANDER", str(bystander))
        .replace("CANARY", canary)
        .replace("OUTSIDE", outside())
        .replace("HOSTPID", str(os.getpid()))
        .replace("DGRAMPATH", dgram_path())
        .replace("ABSTRACT", ABSTRACT)
    )
    return RunRequest(code=code, sdk_module="", limits=Limits(**case["limits"]))


async def run_all(inputs: dict[str, Any], bystander: int) -> dict[str, Any]:
    if inputs["abi_limit"] is not None:
        from worker._kernel import _landlock  # the test seam: an older kernel's Landlock

        _landlock.ABI_LIMIT = inputs["abi_limit"]
    canary = os.path.abspath("canary.txt")  # noqa: ASYNC240 - before any run, no loop work
    results: dict[str, Any] = {}
    relaxed = Containment(require=frozenset(), pool_size=1)
    async with SubprocessBackend(relaxed) as backend:
        for name, case in inputs["cases"].items():
            request = program(case, bystander, canary)
            results[name] = outcome(await backend.run(request, on_calls=no_calls))
        probe = plain(backend.probe())
    strict_results: dict[str, Any] = {}
    strict = SubprocessBackend(Containment(pool_size=0))
    try:
        request = RunRequest(code="return 1", sdk_module="")
        default = outcome(await strict.run(request, on_calls=no_calls))
        for name, case in inputs["cases"].items():
            if case.get("strict") and default["ok"]:
                request = program(case, bystander, canary)
                strict_results[name] = outcome(await strict.run(request, on_calls=no_calls))
        default_probe = plain(strict.probe())
    finally:
        await strict.aclose()
    return {
        "cases": results,
        "strict": strict_results,
        "probe": probe,
        "default": default,
        "default_probe": default_probe,
    }


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        inputs = json.load(fh)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    socks = daemons()
    try:
        before = {"host": sched_state(os.getpid()), "bystander": sched_state(bystander.pid)}
        report = anyio.run(run_all, inputs, bystander.pid)
        report["bystander_alive"] = bystander.poll() is None
        report["sched_before"] = before
        report["sched_after"] = {
            "host": sched_state(os.getpid()),
            "bystander": sched_state(bystander.pid),
        }
        report["daemons_received"] = received(socks)
    finally:
        bystander.kill()
        bystander.wait()
    report["outside_exists"] = os.path.exists(outside())
    print(json.dumps(report))


if __name__ == "__main__":
    main()
