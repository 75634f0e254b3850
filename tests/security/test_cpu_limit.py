"""A run past ``cpu_seconds`` is always ``cpu-limit`` (issue 10, item 7).

The keeper sets the soft RLIMIT_CPU at the budget and the hard one a second above; the
child handles SIGXCPU (a namespace init must) by exiting; a program that ignores or blocks
SIGXCPU meets the hard SIGKILL. The keeper reads the kernel's RLIMIT_CPU clock before
reaping and reports ``cpu_limit``; the host never guesses from rusage, which reads up to
~10% under the limit on a loaded host (that was the flake: ``worker-exit``, "killed by
SIGKILL", about one run in five).
"""

from __future__ import annotations

import socket
import tempfile
import time
from collections.abc import AsyncIterator

import anyio
import pytest

from tests.security._support import SDK, echo_calls, run
from worker import Containment, Limits, RunOutcome, RunRequest
from worker._host._backend import SubprocessBackend
from worker._host._cgroups import RunCgroups
from worker._host._child_handle import ChildHandle
from worker._host._runloop import RunLoop
from worker._protocol._keeper_lines import ExitReport, Hello
from worker._supervisor._confine import EXIT_CPU_LIMIT

pytestmark = pytest.mark.anyio

BUSY = "while True:\n    pass"


@pytest.fixture
async def backend() -> AsyncIterator[SubprocessBackend]:
    async with SubprocessBackend(Containment(pool_size=2)) as b:
        yield b


async def _repeat(backend: SubprocessBackend, code: str, limits: Limits, times: int) -> list[str]:
    """Run ``code`` ``times`` times, two at a time (the load is part of the test)."""
    kinds: list[str] = []

    async def one() -> None:
        out = await run(backend, code, limits)
        kinds.append(f"{out.kind}: {out.detail} ({out.stats.cpu_ms:.0f} ms)")

    for _ in range(0, times, 2):
        async with anyio.create_task_group() as tg:
            for _ in range(min(2, times - len(kinds))):
                tg.start_soon(one)
    return kinds


@pytest.mark.slow
@pytest.mark.parametrize("cpu_seconds", [0.5, 1])
async def test_a_busy_loop_is_always_a_cpu_limit(
    backend: SubprocessBackend, cpu_seconds: float
) -> None:
    limits = Limits(wall_seconds=20, cpu_seconds=cpu_seconds)
    kinds = await _repeat(backend, BUSY, limits, 10)
    assert all(k.startswith("cpu-limit: ") for k in kinds), kinds


@pytest.mark.parametrize(
    "setup",
    [
        # The program runs in a thread of its own: it cannot install a handler (that needs
        # the main thread, which waits for it and takes SIGXCPU), and blocking the signal
        # in its own thread leaves the main thread to take it.
        pytest.param(
            "try:\n    signal.signal(signal.SIGXCPU, signal.SIG_IGN)\nexcept ValueError:\n"
            "    print('no handler from the program thread')",
            id="ignored",
        ),
        pytest.param("signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGXCPU])", id="blocked"),
    ],
)
async def test_a_program_that_dodges_sigxcpu_is_still_a_cpu_limit(
    backend: SubprocessBackend, setup: str
) -> None:
    out = await run(backend, f"import signal\n{setup}\n{BUSY}", Limits(cpu_seconds=0.5))
    assert out.kind == "cpu-limit", out.detail


async def test_a_long_c_call_past_the_soft_limit_is_a_cpu_limit(
    backend: SubprocessBackend,
) -> None:
    # One C call: the Python-level SIGXCPU handler cannot run before the hard limit.
    out = await run(backend, "sum(range(10**12))", Limits(cpu_seconds=0.5))
    assert out.kind == "cpu-limit", out.detail


async def test_a_busy_restricted_program_is_a_cpu_limit(backend: SubprocessBackend) -> None:
    request = RunRequest(
        code=BUSY, sdk_module=SDK, limits=Limits(cpu_seconds=0.5), profile="restricted"
    )
    out = await backend.run(request, on_calls=echo_calls)
    assert out.kind == "cpu-limit", out.detail


async def test_the_handlers_exit_code_alone_is_not_a_cpu_limit(
    backend: SubprocessBackend,
) -> None:
    out = await run(backend, f"import os\nos._exit({EXIT_CPU_LIMIT})")
    assert out.kind == "worker-exit", out.detail
    assert str(EXIT_CPU_LIMIT) in out.detail


async def test_the_wall_clock_still_wins_when_it_comes_first(backend: SubprocessBackend) -> None:
    out = await run(backend, BUSY, Limits(wall_seconds=0.5, cpu_seconds=5))
    assert out.kind == "timeout"


async def test_memory_limit_is_unaffected(backend: SubprocessBackend) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))"
    out = await run(backend, code, Limits(wall_seconds=10, memory_mib=128))
    assert out.kind == "memory-limit"


# --- the host's diagnosis in isolation: the kernel's clock decides, rusage never --------


async def _diagnose(report: ExitReport) -> RunOutcome:
    """A child that set a soft RLIMIT_CPU of 1 s and closes its channel at once; the zygote
    reports ``report``."""
    host, fake_child = socket.socketpair()
    keeper_host, keeper_child = socket.socketpair()
    child = ChildHandle(
        run=host,
        keeper=keeper_host,
        cgroups=RunCgroups(),
        scratch=tempfile.mkdtemp(prefix="ptc-run-"),
    )
    child.cpu_limit_s = 1.0
    keeper_child.sendall(Hello(keeper_pid=1, child_pid=2).to_line() + report.to_line())
    fake_child.close()
    request = RunRequest(code="return 1", sdk_module=SDK, limits=Limits(cpu_seconds=1))
    now = time.monotonic()
    loop = RunLoop(
        request, on_calls=echo_calls, on_stdout=None, abort=None, deadline=now + 5, started=now
    )
    try:
        return loop.finish(await loop.drive(child), child)
    finally:
        await child.close()
        keeper_child.close()


@pytest.mark.parametrize(
    ("report", "kind"),
    [
        # rusage under the limit, the kernel's clock past it: the limit ended it
        (ExitReport(status=9, cpu_ms=880.0, maxrss_kib=1, cpu_clock_s=2.01), "cpu-limit"),
        (
            ExitReport(status=EXIT_CPU_LIMIT << 8, cpu_ms=990.0, maxrss_kib=1, cpu_clock_s=1.0),
            "cpu-limit",
        ),
        # rusage at or past the limit is not evidence
        (ExitReport(status=9, cpu_ms=5000.0, maxrss_kib=1, cpu_clock_s=0.5), "worker-exit"),
        (ExitReport(status=24, cpu_ms=5000.0, maxrss_kib=1, cpu_clock_s=0.5), "worker-exit"),
        # the handler's exit status alone (a program can os._exit(152))
        (ExitReport(status=EXIT_CPU_LIMIT << 8, cpu_ms=1.0, maxrss_kib=1), "worker-exit"),
    ],
)
async def test_the_host_takes_the_kernels_clock_not_rusage(report: ExitReport, kind: str) -> None:
    out = await _diagnose(report)
    assert out.kind == kind, out.detail
