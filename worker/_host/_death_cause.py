"""Why a child's run channel closed without ``done``, in the run's failure kind and words.

The memory cgroup's OOM counter names a kill at the memory limit; otherwise the child's
supervisor line says how it ended: the scratch keeper's kill (and for what), or the exit
report the zygote wrote when it reaped the child (its status and CPU clock, which decide a
CPU-limit death). A line that ends without a report because the zygote died (the child dies
with it) names the zygote.
"""

from __future__ import annotations

import os
import signal

import anyio

from .._errors import WorkerError
from .._supervisor._confine import EXIT_CPU_LIMIT
from .._types import FailureKind, Limits
from ._child_handle import ChildHandle

DEATH_REPORT_S = 1.0
"""How long the host waits for the exit report on a child whose channel closed."""
ZYGOTE_EXIT_S = 0.5
"""How long a line that ended without a report waits to see whether its zygote died."""


async def death_cause(child: ChildHandle, limits: Limits) -> tuple[FailureKind, str]:
    """The kind and detail of a child's death (its channel closed without ``done``)."""
    broken = ""
    with anyio.move_on_after(DEATH_REPORT_S):
        try:
            await child.keeper.wait_exit()
        except WorkerError as exc:
            broken = f" (its supervisor line broke its protocol: {exc})"
    if child.cgroups.oom_killed():
        return ("memory-limit", f"killed at the memory limit of {limits.memory_mib} MiB")
    if child.keeper.killed:  # the scratch keeper killed it, and says for what
        return ("worker-exit", f"the child was killed by the scratch keeper: {child.keeper.killed}")
    report = child.keeper.exit
    if report is None:
        if await child.zygote_gone(ZYGOTE_EXIT_S):
            return (
                "worker-exit",
                f"the zygote (pid {child.keeper_pid}), the child's supervisor, died before it "
                "reported the child's exit (it was killed or crashed); the child was killed "
                "with it",
            )
        return ("worker-exit", f"the child exited without an exit status{broken}")
    if died_of_cpu_limit(report.status, clock_s=report.cpu_clock_s, soft_s=child.cpu_limit_s):
        return ("cpu-limit", f"CPU time limit of {limits.cpu_seconds:g} s exceeded")
    status = report.status
    if os.WIFSIGNALED(status):
        return ("worker-exit", f"the child was killed by {_signal_name(os.WTERMSIG(status))}")
    return ("worker-exit", f"the child exited with status {os.waitstatus_to_exitcode(status)}")


def died_of_cpu_limit(status: int, *, clock_s: float, soft_s: float) -> bool:
    """Whether a child with wait ``status`` died of its soft CPU limit ``soft_s``: its CPU
    clock (read by the zygote from the zombie) reached the limit, and it died the way only
    the limit makes it die here (the SIGXCPU handler's exit, SIGXCPU itself outside a pid
    namespace, the hard limit's SIGKILL). Rusage is not evidence: it counts precise run
    time, while the limit counts scheduler ticks (it reads up to ~10% lower)."""
    if soft_s <= 0 or clock_s < soft_s:
        return False
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == EXIT_CPU_LIMIT


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # a real-time signal, say
        return f"signal {number}"
