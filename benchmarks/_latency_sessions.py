"""The latency suite's session figures (docs/code-mode.md, "Sessions"): ``run_code`` on a
session holding 64 KiB and 1 MiB of state, paced like the sessionless constant run beside
it, and the host time of ``fork()`` of the 1 MiB session.

The program returns a constant and touches no state: every run on a session restores the
whole state in its child before the program and saves it after (the host sends and keeps
opaque bytes), so this is the cost a session adds to every run. The state is JSON-like
rows (``{"id", "name", "v"}``), the figure the targets are written for; the bytes actually
kept are reported.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import ptc

from ._latency_parts import sample_async

ROWS = {"64 KiB": 1_950, "1 MiB": 30_400}
"""Rows that make about that much state, pickled."""
PACED = "run_code constant on a session with {} of state, 50 ms apart"
FORK = "fork() of a session with 1 MiB of state (host)"


async def session_latency(
    scope: ptc.Scope,
    add: Callable[[str, list[float]], None],
    facts: dict[str, Any],
    n: Callable[[int], int],
) -> None:
    """Add the session samples (``add(name, samples)``) and the state sizes to ``facts``."""
    sizes: dict[str, int] = {}
    for label, rows in ROWS.items():
        session = scope.session()
        filled = await _ok(session.run_code(
            f"state = [{{'id': i, 'name': 'item %d' % i, 'v': i * 1.5}} for i in range({rows})]"
        ))
        kept = filled.meta["session"]
        assert isinstance(kept, dict) and isinstance(kept["bytes"], int)
        sizes[label] = kept["bytes"]

        async def constant(session: ptc.Session = session) -> None:
            await _ok(session.run_code("1"))

        add(PACED.format(label), await sample_async(constant, n(100), gap_seconds=0.05))
        if label == "1 MiB":
            await _forks(session, add, n(200))
        await session.close()
    facts["session_state_bytes"] = sizes


async def _forks(
    session: ptc.Session, add: Callable[[str, list[float]], None], count: int
) -> None:
    forks: list[ptc.Session] = []

    async def fork() -> None:
        forks.append(await session.fork())

    add(FORK, await sample_async(fork, count))
    for branch in forks:
        await branch.close()


async def _ok(awaitable: Awaitable[ptc.ToolResult]) -> ptc.ToolResult:
    result = await awaitable
    if result.is_error:
        raise RuntimeError(f"run_code on a session failed: {result.text}")
    return result
