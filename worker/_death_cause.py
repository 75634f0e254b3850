"""Why a child's run channel closed without ``done``, in the run's failure kind and words.

The memory cgroup's OOM counter names a kill at the memory limit; otherwise the keeper's
exit report says how the child ended (a cause the keeper enforced, its CPU limit, a
signal, a status). A keeper that is gone without a report (killed, or crashed) is named
as the process that died: the child went with it (it kills the child when it goes).
"""

from __future__ import annotations

import os
import signal

import anyio

from ._child_handle import ChildHandle
from ._errors import WorkerError
from ._types import FailureKind, Limits

DEATH_REPORT_S = 1.0
"""How long the host waits for the keeper's exit report on a child whose channel closed."""


async def death_cause(child: ChildHandle, limits: Limits) -> tuple[FailureKind, str]:
    """The kind and detail of a child's death (its channel closed without ``done``)."""
    broken = ""
    gone = False
    with anyio.move_on_after(DEATH_REPORT_S):
        try:
            await child.keeper.wait_exit()
            gone = child.keeper.exit is None  # its socket ended before a report
        except WorkerError as exc:
            broken = f" (the keeper broke its protocol: {exc})"
    if child.cgroups.oom_killed():
        return ("memory-limit", f"killed at the memory limit of {limits.memory_mib} MiB")
    report = child.keeper.exit
    if report is None:
        keeper = f"the run's keeper (pid {child.keeper_pid})" if child.keeper_pid else "the keeper"
        if gone:
            return (
                "worker-exit",
                f"{keeper} died before it reported the child's exit (it was killed or "
                "crashed); the child was killed with it",
            )
        return ("worker-exit", f"{keeper} reported no exit status for the child{broken}")
    if report.cause:  # the keeper killed it (its scratch quota), and says for what
        return ("worker-exit", f"the child was {report.cause}")
    if report.cpu_limit:
        # The keeper's finding: the kernel's RLIMIT_CPU clock passed the soft limit and
        # the child died of SIGXCPU (its handler), or of the hard limit's SIGKILL.
        return ("cpu-limit", f"CPU time limit of {limits.cpu_seconds:g} s exceeded")
    status = report.status
    if os.WIFSIGNALED(status):
        return ("worker-exit", f"the child was killed by {_signal_name(os.WTERMSIG(status))}")
    return ("worker-exit", f"the child exited with status {os.waitstatus_to_exitcode(status)}")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # a real-time signal, say
        return f"signal {number}"
