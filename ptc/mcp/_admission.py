"""How many ``run_code`` runs a served scope runs at once, and how many may wait.

Every run is a contained subprocess with up to ``Limits.memory_mib`` of memory: 400 runs
asked for at once by one client made 56 fail to start and 16 runs of 256 MiB took 4 GB
(DESIGN section 9, "Hostile peers"). ``serve`` admits ``max_concurrent_runs`` at a time;
up to ``max_queued_runs`` more wait for a slot (a cancelled one stops waiting); the rest
are answered at once with a busy error.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import anyio

import ptc

__all__ = ("Admission", "default_max_runs")

_MIB = 1 << 20


def default_max_runs(memory_mib: int) -> int:
    """Runs at once by default: two per CPU this process may use, and no more than half of
    the machine's (or its cgroup's) memory allows at ``memory_mib`` each; at least one."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    by_memory = _memory_bytes() // 2 // (memory_mib * _MIB)
    return max(1, min(2 * (cpus or 1), by_memory))


def _memory_bytes() -> int:
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    # A container's own limit, when it has one (cgroup v2, then v1).
    for limit_file in ("memory.max", "memory/memory.limit_in_bytes"):
        with suppress(OSError, ValueError):
            total = min(total, int((Path("/sys/fs/cgroup") / limit_file).read_text()))
    return total


class Admission:
    """The admission of runs to one served scope (see the module docstring)."""

    def __init__(self, max_running: int, max_queued: int) -> None:
        self.max_running = max_running
        self.max_queued = max_queued
        self._slots = anyio.Semaphore(max_running)
        self._admitted = 0  # running or waiting

    def reserve(self) -> str | None:
        """Take a place for one run (``None``), or say why there is none."""
        if self._admitted >= self.max_running + self.max_queued:
            return (
                f"busy: {self.max_running} runs are running and {self.max_queued} waiting"
                f" (max_concurrent_runs={self.max_running}, max_queued_runs={self.max_queued});"
                " try again later"
            )
        self._admitted += 1
        return None

    @asynccontextmanager
    async def slot(self, signal: ptc.CancelSignal) -> AsyncIterator[None]:
        """Run the body with a slot, once one is free; a run whose ``signal`` fires while it
        waits goes on without one (the call then ends ``ABORTED`` at once). Releases the
        place taken by :meth:`reserve`."""
        held = False
        try:
            async with anyio.create_task_group() as group:

                async def stop_waiting() -> None:
                    await signal.wait()
                    group.cancel_scope.cancel()

                group.start_soon(stop_waiting)
                await self._slots.acquire()
                held = True
                group.cancel_scope.cancel()
            yield
        finally:
            if held:
                self._slots.release()
            self._admitted -= 1
