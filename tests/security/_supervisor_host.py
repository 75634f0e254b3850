"""A host script (run in each reference environment, not imported): a child dies with the
process that supervises it, the zygote.

It starts a backend with one pooled child, kills that child's supervisor (the pids come from
the backend's own handle on the child it started: nothing is found by scanning), and waits
for the child's end on a pidfd it opened while the child was alive. Then it runs a program,
to show the backend goes on (with a new zygote). Prints one JSON object: whether the child
followed its supervisor, and the run's outcome.
"""

from __future__ import annotations

import json
import os
import select
import signal
from typing import Any

import anyio

from worker import Containment, RunRequest, SubprocessBackend


async def no_calls(calls: Any) -> list[Any]:
    raise AssertionError("no tool is called")


async def main() -> dict[str, Any]:
    async with SubprocessBackend(Containment(require=frozenset(), pool_size=1)) as backend:
        await backend.start()
        (child,) = backend.pooled
        pidfd = os.pidfd_open(child.pid)
        try:
            os.kill(child.keeper_pid, signal.SIGKILL)
            # The child is a process the host holds a channel to: without a death signal it
            # would wait on that channel for as long as the host lives, unsupervised.
            followed = bool(select.select([pidfd], [], [], 5.0)[0])
        finally:
            os.close(pidfd)
        out = await backend.run(RunRequest(code="return 1", sdk_module=""), on_calls=no_calls)
        return {"followed": followed, "next_run": [out.ok, out.value], "detail": out.detail}


if __name__ == "__main__":
    print(json.dumps(anyio.run(main)))
