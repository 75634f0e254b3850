"""The floor of a run: a bare fork of a preloaded Python process that runs ``1`` and exits.

What the latency suite sets ptc's CPU per run against, measured in the same run (issue 29):
a process that imported what the zygote imports (the child's runtime and the worker
modules) and froze its objects forks children straight from libc, as the zygote does; each
child compiles and runs the program ``1`` and exits; the parent reaps it. No containment,
no protocol, no host: what one more Python process per run costs on this machine at the
least. The child's CPU and page faults come from ``wait4``'s rusage, the parent's CPU from
its own clock.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

FLOOR_NAME = "floor: a bare fork of a preloaded Python running 1 (fork to reaped)"

_SCRIPT = r"""
import gc, json, os, sys, time
# the zygote's imports
import worker._child._program, worker._child._runtime, worker._supervisor._confine
from worker._kernel import _syscalls
gc.freeze()
runs = int(sys.argv[1])
walls = []
child_cpu = faults = 0.0
start = time.process_time()
for _ in range(runs):
    began = time.perf_counter()
    pid = _syscalls.fork_bare()
    if pid == 0:
        exec(compile("1", "<program>", "exec"), {})
        os._exit(0)
    _, status, usage = os.wait4(pid, 0)
    walls.append((time.perf_counter() - began) * 1000)
    child_cpu += usage.ru_utime + usage.ru_stime
    faults += usage.ru_minflt
parent_ms = (time.process_time() - start) * 1000 / runs
print(json.dumps({"wall_ms": walls, "child_cpu_ms": child_cpu * 1000 / runs,
                  "child_minor_faults": faults / runs, "parent_cpu_ms": parent_ms}))
"""


def fork_floor(runs: int) -> dict[str, Any]:
    """``runs`` bare forks running ``1``, back to back: each one's wall time (ms, fork to
    reaped), and per run the child's CPU (ms) and minor page faults and the parent's CPU."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(runs)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result
