"""The run's rlimits, set by the child itself before any program runs (the host's ``limits``
frame): RLIMIT_CPU from its own CPU clock, RLIMIT_DATA and RLIMIT_AS.

Lowering one's own limits needs no privilege, and the program cannot raise a hard limit
again. Soft RLIMIT_CPU sits below the hard one: SIGXCPU at the soft limit names the cause
(the child's handler exits with ``_confine.EXIT_CPU_LIMIT``), the hard limit's SIGKILL a
second later ends a program that ignores it. Both are read on the clock the kernel checks
(``CPUCLOCK_PROF``), as the zygote reads it again from the zombie when the child is gone.
"""

from __future__ import annotations

import math
import resource
import time
from typing import Any

CPU_HARD_MARGIN_S = 1
"""Hard RLIMIT_CPU minus soft: CPU seconds a program that ignores SIGXCPU gets extra."""
_OWN_PROF_CLOCK = ((~0) << 3) | 0
"""``clock_gettime`` id of the calling process's ``CPUCLOCK_PROF`` (pid 0: itself)."""


def apply_limits(frame: dict[str, Any], *, enabled: bool) -> dict[str, Any]:
    """Set the limits of a validated ``limits`` frame; the answer frame (``applied``, why
    not, the soft RLIMIT_CPU in CPU seconds since the child started)."""
    if not enabled:
        return _answer(False, "rlimits off", 0)
    try:
        soft = math.ceil(time.clock_gettime(_OWN_PROF_CLOCK) + frame["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + CPU_HARD_MARGIN_S))
        # Private memory (heap, anonymous mappings, thread stacks as reserved): what bounds
        # a program where no cgroup does; below a cgroup limit, a MemoryError comes before
        # the OOM killer. Address space only as a backstop (libraries, guard pages).
        data = frame["data_mib"] * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_DATA, (data, data))
        space = frame["as_mib"] * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (space, space))
    except (OSError, ValueError, OverflowError) as exc:
        return _answer(False, str(exc)[:500], 0)
    return _answer(True, "", soft)


def _answer(applied: bool, error: str, cpu_limit_s: float) -> dict[str, Any]:
    return {"type": "applied", "applied": applied, "error": error, "cpu_limit_s": cpu_limit_s}
