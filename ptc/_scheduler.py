"""The batch scheduler (DESIGN section 4).

Consecutive parallel-safe calls form a group (a sliding pool capped at ``max_parallel``);
an exclusive call is a barrier that waits for in-flight parallel bodies and holds until its
post-execute is done. Pre-execute phases never overlap. One :class:`Scheduler` may serve
several concurrent ``run()`` batches (code mode does) and keeps these rules across them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from ._json import JSON
from ._pipeline import PendingCall, create, dispatch, finish, is_parallel, new_call_id
from ._policy import finalize, prepare
from ._results import ToolResult, error_result
from ._signals import CancelSignal
from ._tools import ExecutionToken

if TYPE_CHECKING:
    from ._scopes import Scope


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of a batch: ``ToolCall(name, arguments, call_id=None)``."""

    name: str
    arguments: Mapping[str, JSON] = field(default_factory=dict)
    call_id: str | None = None


class _Barrier:
    """A readers-writer lock: parallel bodies share it, an exclusive call owns it.

    Writers are preferred so a stream of parallel calls cannot starve an exclusive one.
    """

    def __init__(self) -> None:
        self._condition = anyio.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    async def acquire_shared(self) -> None:
        async with self._condition:
            while self._writer or self._writers_waiting:
                await self._condition.wait()
            self._readers += 1

    async def release_shared(self) -> None:
        async with self._condition:
            self._readers -= 1
            self._condition.notify_all()

    async def acquire_exclusive(self) -> None:
        async with self._condition:
            self._writers_waiting += 1
            try:
                while self._writer or self._readers:
                    await self._condition.wait()
            finally:
                self._writers_waiting -= 1
            self._writer = True

    async def release_exclusive(self) -> None:
        async with self._condition:
            self._writer = False
            self._condition.notify_all()


class Scheduler:
    """Runs batches of calls; create one per ``call_many`` or one per ``run_code`` run."""

    def __init__(self, max_parallel: int) -> None:
        if max_parallel < 1:
            raise ValueError("max_parallel must be at least 1")
        self.max_parallel = max_parallel
        self._slots = anyio.Semaphore(max_parallel)
        self._prepare_lock = anyio.Lock()
        self._barrier = _Barrier()

    async def run(
        self,
        scope: Scope,
        calls: Sequence[ToolCall],
        *,
        signal: CancelSignal | None = None,
        parent: ExecutionToken | None = None,
        root_call_id: str | None = None,
    ) -> list[ToolResult]:
        """Run ``calls``; results in submission order. Unstarted calls on abort are
        ``ABORTED_BEFORE_DISPATCH`` (not emitted); started ones drain."""
        results: list[ToolResult | None] = [None] * len(calls)
        in_flight: list[anyio.Event] = []
        async with anyio.create_task_group() as group:
            for index, spec in enumerate(calls):
                call_id = spec.call_id or new_call_id()
                if signal is not None and signal.cancelled:
                    results[index] = error_result(
                        call_id,
                        spec.name,
                        "ABORTED_BEFORE_DISPATCH",
                        "tool call aborted before dispatch",
                    )
                    continue
                call = create(
                    scope,
                    spec.name,
                    spec.arguments,
                    call_id=call_id,
                    root_call_id=root_call_id,
                    parent=parent,
                    signal=signal,
                )
                if call.final:
                    results[index] = await finish(call)
                elif is_parallel(call):
                    await self._slots.acquire()
                    await self._barrier.acquire_shared()
                    if signal is not None and signal.cancelled:
                        # Aborted while waiting for a slot: unstarted, abandoned unlogged.
                        await self._release_parallel()
                        results[index] = error_result(
                            call_id,
                            spec.name,
                            "ABORTED_BEFORE_DISPATCH",
                            "tool call aborted before dispatch",
                        )
                        continue
                    try:
                        async with self._prepare_lock:
                            await prepare(call)
                    except BaseException:
                        await self._release_parallel()
                        raise
                    done = anyio.Event()
                    if len(calls) == 1:
                        # Nothing to overlap with in this batch: skip a task spawn (hot path
                        # of sequential calls from code mode).
                        await self._finish_parallel(call, results, index, done)
                        continue
                    in_flight.append(done)
                    group.start_soon(self._finish_parallel, call, results, index, done)
                else:
                    # Exclusive: wait for this batch's parallel calls, then own the barrier.
                    for done in in_flight:
                        await done.wait()
                    in_flight.clear()
                    results[index] = await self._run_exclusive(call)
        return [r for r in results if r is not None]

    async def _run_exclusive(self, call: PendingCall) -> ToolResult:
        await self._barrier.acquire_exclusive()
        try:
            async with self._prepare_lock:
                await prepare(call)
            if not call.final:
                await dispatch(call)
                await finalize(call)
        finally:
            await self._barrier.release_exclusive()
        return await finish(call)

    async def _finish_parallel(
        self, call: PendingCall, results: list[ToolResult | None], index: int, done: anyio.Event
    ) -> None:
        try:
            try:
                if not call.final:
                    await dispatch(call)
                    await finalize(call)
            finally:
                await self._release_parallel()
            results[index] = await finish(call)
        finally:
            done.set()

    async def _release_parallel(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._barrier.release_shared()
        self._slots.release()
