"""Background work of the pool, off the runs' critical path: teardown, refill, priming.

On asyncio each chore is a task of its own, awaited by :meth:`Chores.wait`; elsewhere
:meth:`Chores.start` says no and the caller does the work inline. A chore's exception is
logged (``ptc.worker``), never lost and never raised into an unrelated run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import anyio

logger = logging.getLogger("ptc.worker")


class Chores:
    """Background work (teardown, refill, priming). On asyncio each chore is a task of its
    own, awaited by :meth:`wait`; elsewhere :meth:`start` says no and the caller does the
    work inline."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._scopes: dict[str, set[anyio.CancelScope]] = {}

    def start(self, fn: Callable[[], Awaitable[None]], name: str) -> bool:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        scope = anyio.CancelScope()
        task = loop.create_task(self._guard(fn, name, scope), name=f"ptc-worker-{name}")
        self._tasks.add(task)
        self._scopes.setdefault(name, set()).add(scope)

        def done(task: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            self._scopes[name].discard(scope)

        task.add_done_callback(done)
        return True

    def cancel(self, name: str) -> None:
        """Cancel the chores of this kind still running (work a closing pool no longer
        needs, such as priming a child it is about to close).

        Through each chore's anyio cancel scope, never ``Task.cancel``: the cleanup a
        chore does under a shielded scope (closing a child: its sockets, cgroups,
        scratch) runs to its end."""
        for scope in list(self._scopes.get(name, ())):
            scope.cancel()

    async def wait(self) -> None:
        """Wait until no chore is left (chores may start others)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    @staticmethod
    async def _guard(
        fn: Callable[[], Awaitable[None]], name: str, scope: anyio.CancelScope
    ) -> None:
        try:
            with scope:
                await fn()
        except Exception:
            logger.exception("background %s failed", name)
