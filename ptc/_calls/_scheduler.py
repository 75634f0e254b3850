"""The batch scheduler (docs/guide.md, "Batches").

Consecutive parallel-safe calls form a group (a sliding pool capped at ``max_parallel``);
an exclusive call is a barrier that waits for in-flight parallel bodies and holds until its
post-execute is done. Pre-execute phases never overlap. One :class:`Scheduler` may serve
several concurrent ``run()`` batches (code mode does) and keeps these rules across them.
The scheduler only decides *when* a call may start its stages; :class:`~ptc._calls._pipeline.Call`
runs them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskStatus

from worker import Pacer

from .._json import JSONLike
from .._results import ToolResult
from .._signals import CancelSignal
from ._pipeline import (
    Call,
    CallSite,
    Unstarted,
    aborted_before_dispatch,
    new_call_id,
    results_in_order,
)
from ._tools import ExecutionToken

__all__ = ("OnResult", "Scheduler", "ToolCall")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of a batch: ``ToolCall(name, arguments, call_id=None)``."""

    name: str
    arguments: Mapping[str, JSONLike] = field(default_factory=dict)
    call_id: str | None = None


OnResult = Callable[[int, "ToolCall", ToolResult], Awaitable[None]]
"""Takes each result of :meth:`Scheduler.stream`: its call's index in the batch, the call
and its result."""


class _Barrier:
    """A readers-writer lock: parallel bodies share it, an exclusive call owns it.

    Writers are preferred so a stream of parallel calls cannot starve an exclusive one.
    Uncontended acquisitions and releases touch only the counters (a check-and-set between
    two awaits is atomic on the event loop); the condition is used only to wait and wake.
    """

    def __init__(self) -> None:
        self._condition = anyio.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0
        self._waiters = 0

    async def acquire_shared(self) -> None:
        if not (self._writer or self._writers_waiting):
            self._readers += 1
            return
        async with self._condition:
            self._waiters += 1
            try:
                while self._writer or self._writers_waiting:
                    await self._condition.wait()
            finally:
                self._waiters -= 1
            self._readers += 1

    def release_shared(self) -> bool:
        """Release a share; ``True`` when waiters must be woken (:meth:`wake`)."""
        self._readers -= 1
        return self._waiters > 0

    async def acquire_exclusive(self) -> None:
        if not (self._writer or self._readers or self._writers_waiting):
            self._writer = True
            return
        async with self._condition:
            self._writers_waiting += 1
            self._waiters += 1
            try:
                while self._writer or self._readers:
                    await self._condition.wait()
            finally:
                self._writers_waiting -= 1
                self._waiters -= 1
            self._writer = True

    def release_exclusive(self) -> bool:
        """Release ownership; ``True`` when waiters must be woken (:meth:`wake`)."""
        self._writer = False
        return self._waiters > 0

    async def wake(self) -> None:
        """Wake every waiter (after a release that said so), shielded from cancellation."""
        with anyio.CancelScope(shield=True):
            async with self._condition:
                self._condition.notify_all()


class _Shared:
    """Admission of a parallel-safe call: a slot of the pool and a share of the barrier.

    A class rather than a generator-based context manager: it is on every code-mode call's
    path, and an uncontended entry and exit cost no event-loop round and no cancel scope."""

    __slots__ = ("barrier", "halt", "signal", "slots")

    def __init__(
        self,
        slots: anyio.Semaphore,
        barrier: _Barrier,
        signal: CancelSignal | None,
        halt: CancelSignal | None,
    ) -> None:
        self.slots = slots
        self.barrier = barrier
        self.signal = signal
        self.halt = halt

    async def __aenter__(self) -> None:
        try:
            self.slots.acquire_nowait()  # no event-loop round when a slot is free
        except anyio.WouldBlock:
            await self.slots.acquire()
        try:
            await self.barrier.acquire_shared()
        except BaseException:
            self.slots.release()
            raise
        if _fired(self.signal, self.halt):
            await self._release()
            raise Unstarted  # aborted while waiting for a slot: never started

    async def __aexit__(self, *exc_info: object) -> None:
        await self._release()

    async def _release(self) -> None:
        try:
            if self.barrier.release_shared():
                await self.barrier.wake()
        finally:
            self.slots.release()


class _Exclusive:
    """Admission of an exclusive call: the barrier, owned until its post-execute is done."""

    __slots__ = ("barrier",)

    def __init__(self, barrier: _Barrier) -> None:
        self.barrier = barrier

    async def __aenter__(self) -> None:
        await self.barrier.acquire_exclusive()

    async def __aexit__(self, *exc_info: object) -> None:
        if self.barrier.release_exclusive():
            await self.barrier.wake()


class FastLock:
    """A FIFO lock that costs no event-loop round, and no task lookup, when it is free.

    A flag, not an ``anyio.Lock``: on every call's path, and anyio's lock asks for the
    current task on each acquire and release (to know its owner). A check-and-set between
    two awaits is atomic on the event loop; only a contended acquire waits, on an event of
    its own, and a release hands the lock straight to the first waiter."""

    __slots__ = ("_held", "_waiters")

    def __init__(self) -> None:
        self._held = False
        self._waiters: deque[anyio.Event] = deque()

    def locked(self) -> bool:
        return self._held

    async def __aenter__(self) -> None:
        if not self._held:  # a waiter is only queued while the lock is held
            self._held = True
            return
        waiter = anyio.Event()
        self._waiters.append(waiter)
        try:
            await waiter.wait()
        except BaseException:
            if waiter.is_set():  # handed the lock as it was cancelled: pass it on
                self._release()
            else:
                self._waiters.remove(waiter)
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self._release()

    def _release(self) -> None:
        if self._waiters:
            self._waiters.popleft().set()  # still held: now by the first waiter
        else:
            self._held = False


class _InFlight:
    """How many of one batch's parallel calls still run, and a way to wait until none
    does (one counter per batch, not an event per call: a batch may hold 100,000)."""

    __slots__ = ("_drained", "count")

    def __init__(self) -> None:
        self.count = 0
        self._drained: anyio.Event | None = None

    def ended(self) -> None:
        self.count -= 1
        if self.count == 0 and self._drained is not None:
            self._drained.set()

    async def drained(self) -> None:
        if self.count:
            self._drained = anyio.Event()
            await self._drained.wait()
            self._drained = None


def _fired(signal: CancelSignal | None, halt: CancelSignal | None) -> bool:
    return (signal is not None and signal.cancelled) or (halt is not None and halt.cancelled)


class Scheduler:
    """Runs batches of calls; create one per ``call_many`` or one per ``run_code`` run."""

    def __init__(self, max_parallel: int) -> None:
        if max_parallel < 1:
            raise ValueError("max_parallel must be at least 1")
        self.max_parallel = max_parallel
        self._slots = anyio.Semaphore(max_parallel)
        self._prepare_lock = FastLock()
        self._barrier = _Barrier()

    async def run(
        self,
        site: Callable[[ToolCall], CallSite],
        calls: Sequence[ToolCall],
        *,
        signal: CancelSignal | None = None,
        parent: ExecutionToken | None = None,
        root_call_id: str | None = None,
        halt: CancelSignal | None = None,
    ) -> list[ToolResult]:
        """Run ``calls``; results in submission order. Calls not started when ``signal``
        fires are ``ABORTED_BEFORE_DISPATCH`` (not emitted); started ones drain.

        ``site(call)`` is asked as each call is created, so a tool disposed by an earlier
        call of the batch is already gone for a later one. ``halt`` stops calls that have
        not begun pre-execute (``ABORTED_BEFORE_DISPATCH``, not emitted) without touching
        started ones; a call whose approval is deferred fires it.
        """
        results: list[ToolResult | None] = [None] * len(calls)

        async def keep(index: int, spec: ToolCall, result: ToolResult) -> None:
            results[index] = result

        await self.stream(
            site, calls, keep, signal=signal, parent=parent, root_call_id=root_call_id, halt=halt
        )
        return results_in_order(results)

    async def stream(
        self,
        site: Callable[[ToolCall], CallSite],
        calls: Iterable[ToolCall],
        on_result: OnResult,
        *,
        signal: CancelSignal | None = None,
        parent: ExecutionToken | None = None,
        root_call_id: str | None = None,
        halt: CancelSignal | None = None,
    ) -> None:
        """:meth:`run`, but each result goes to ``await on_result(index, call, result)`` as
        its call ends (in the call's own task), and none is kept: a batch of any size holds
        only the calls in flight. ``calls`` is taken one at a time, as each may start."""

        def start(spec: ToolCall) -> Call | ToolResult:
            """The call of ``spec``, or its result when it may not even be created."""
            call_id = spec.call_id or new_call_id()
            if _fired(signal, halt):
                return aborted_before_dispatch(call_id, spec.name)
            return Call.create(
                site(spec),
                spec.name,
                spec.arguments,
                call_id=call_id,
                root_call_id=root_call_id,
                parent=parent,
                signal=signal,
            )

        if isinstance(calls, Sequence) and len(calls) == 1:
            # Nothing to overlap with: no task group (the hot path of code-mode calls).
            spec = calls[0]
            only = start(spec)
            if isinstance(only, ToolResult):
                await on_result(0, spec, only)
            elif only.final:
                await on_result(0, spec, await only.run())
            else:
                admission = self._shared(signal, halt) if only.parallel else self._exclusive()
                result = await only.run(
                    admission=admission, prepare_lock=self._prepare_lock, halt=halt
                )
                await on_result(0, spec, result)
            return
        in_flight = _InFlight()
        pacer = Pacer()  # calls that end without an event-loop round (exclusive async
        # bodies, early failures) would otherwise hold the loop for the whole batch
        async with anyio.create_task_group() as group:
            for index, spec in enumerate(calls):
                await pacer.tick()
                call = start(spec)
                if isinstance(call, ToolResult):
                    await on_result(index, spec, call)
                elif call.final:
                    await on_result(index, spec, await call.run())
                elif not call.parallel:
                    # Exclusive: wait for this batch's parallel calls, then own the barrier.
                    await in_flight.drained()
                    result = await call.run(
                        admission=self._exclusive(), prepare_lock=self._prepare_lock, halt=halt
                    )
                    await on_result(index, spec, result)
                else:
                    in_flight.count += 1
                    # start() returns once the call's pre-execute is over: the next call's
                    # pre-execute begins only then, and a full pool holds the loop here.
                    await group.start(
                        self._run_parallel, call, spec, index, on_result, in_flight, signal, halt
                    )

    async def _run_parallel(
        self,
        call: Call,
        spec: ToolCall,
        index: int,
        on_result: OnResult,
        in_flight: _InFlight,
        signal: CancelSignal | None,
        halt: CancelSignal | None,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            result = await call.run(
                admission=self._shared(signal, halt),
                prepare_lock=self._prepare_lock,
                prepared=task_status.started,
                halt=halt,
            )
            await on_result(index, spec, result)
        finally:
            in_flight.ended()

    def _shared(self, signal: CancelSignal | None, halt: CancelSignal | None) -> _Shared:
        return _Shared(self._slots, self._barrier, signal, halt)

    def _exclusive(self) -> _Exclusive:
        return _Exclusive(self._barrier)
