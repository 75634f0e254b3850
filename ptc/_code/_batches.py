"""A run's batches of nested calls, from the worker's requests to its replies.

Each batch a program submits is answered by one job of the run's detached group: its tool
calls are numbered in submission order across batches (``<outer>:ptc:<n>``; a host
operation gets no number), answered from a replayed record or run through the run's one
:class:`~ptc._calls._scheduler.Scheduler` (each logged and recorded as it ends, its result then
dropped), and replied to in the batch's order.

A batch may hold 100,000 calls. Every loop over one is paced (``worker.Pacer``), so the
event loop runs at least once per slice of work; taking a batch in costs the caller
nothing (it may be the worker's reader callback): numbering happens in the job, batch
after batch in the order they came (each waits for its turn); and what a batch keeps until
its replies go out is one reply per call, in columns of plain values (a call's
:class:`~ptc._calls._scheduler.ToolCall` is made as it is reached, its result dropped once
logged), so a big batch does not leave the garbage collector a heap of objects to scan
again and again.
"""

from __future__ import annotations

import dataclasses
import time
from array import array
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import overload

import anyio

from worker import HOST_OPERATION_MARK, CallBatch, CallReply, CallRequest, Pacer

from .._calls._pipeline import CallSite
from .._calls._scheduler import OnResult, Scheduler, ToolCall
from .._calls._tools import ToolExecution
from .._detached import DetachedGroup
from .._json import JSON, thaw
from .._results import ToolResult
from .._scopes._scope import Scope, call_site
from .._signals import CancelSignal
from ._dispatch_log import DispatchLog
from ._replay import CallRecord

__all__ = ("Batches", "Replies")


class Batches:
    """A run's nested calls, batch by batch (see the module docstring)."""

    def __init__(
        self,
        execution: ToolExecution,
        scope: Scope,
        *,
        max_parallel_calls: int,
        signal: CancelSignal,
        lifetime: CancelSignal,
        halt: CancelSignal,
        dispatch_log: DispatchLog,
        record: CallRecord,
        answer_operation: Callable[[CallRequest], Awaitable[CallReply]],
        group: DetachedGroup,
    ) -> None:
        self.execution = execution
        self.scope = scope
        self.scheduler = Scheduler(max_parallel_calls)
        self.signal = signal
        self.lifetime = lifetime
        self.halt = halt
        self.dispatch_log = dispatch_log
        self.record = record
        self._answer_operation = answer_operation
        self._group = group
        self._count = 0
        self._tickets = 0
        self._turn = 0
        self._turn_taken: anyio.Event | None = None
        self._in_flight: dict[int, tuple[Sequence[CallRequest], array[int], array[int]]] = {}

    def start(self, pending: CallBatch) -> None:
        """Answer ``pending`` in a job of the run's group; costs the caller nothing more
        (it may be the worker's reader callback, outside any task)."""
        ticket = self._tickets
        self._tickets += 1
        self._group.start_soon(self._answer, pending, ticket)

    def in_flight(self) -> str:
        """The calls of batches not answered yet, for a warning: ``id (name), ...``."""
        shown: list[str] = []
        total = 0
        for calls, numbers, live in self._in_flight.values():
            total += len(live)
            outer = self.execution.call_id
            shown += [f"{outer}:ptc:{numbers[i]} ({calls[i].tool})" for i in live[:10]]
        shown = shown[:10]
        more = total - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more else "")

    async def _answer(self, pending: CallBatch, ticket: int) -> None:
        calls = pending.calls
        try:
            if len(calls) == 1 and self._turn == ticket:
                replies: Replies | list[CallReply] = await self._answer_one(calls[0], ticket)
            else:
                await self._wait_for_turn(ticket)
                try:
                    numbers = await self._numbers(calls)
                finally:
                    self._next_turn()
                replies = await self._dispatch(calls, numbers, ticket)
        except Exception as exc:  # a host bug: the backend kills the run and re-raises it
            pending.fail(exc)
            raise
        await pending.reply(replies)
        if isinstance(replies, Replies):
            await replies.drop()

    async def _answer_one(self, request: CallRequest, ticket: int) -> list[CallReply]:
        """A batch of one call whose turn it is (a program's plain ``tools.x()``, the
        common case): what :meth:`_numbers` and :meth:`_dispatch` do, without the columns
        and pacers a big batch needs. Numbered at once, as those would."""
        try:
            if HOST_OPERATION_MARK in request.tool:
                n = 0
            else:
                self._count += 1
                n = self._count
        finally:
            self._next_turn()
        if n == 0:
            return [await self._answer_operation(request)]
        if self.record.replay is not None and (reply := self._replayed(n, request)) is not None:
            return [reply]
        answered: list[CallReply] = []
        started = time.perf_counter()

        async def ended(_: int, call: ToolCall, result: ToolResult) -> None:
            duration_ms = (time.perf_counter() - started) * 1000
            answered.append(await self._finished(n, call, result, duration_ms))

        self._in_flight[ticket] = ((request,), array("q", (n,)), array("q", (0,)))
        try:
            await self._stream([self._tool_call(request, n)], ended)
        finally:
            self._in_flight.pop(ticket, None)
        return answered

    async def _wait_for_turn(self, ticket: int) -> None:
        """Batches are numbered one after another, in the order they came."""
        while self._turn < ticket:
            if self._turn_taken is None:
                self._turn_taken = anyio.Event()
            await self._turn_taken.wait()

    def _next_turn(self) -> None:
        self._turn += 1
        taken, self._turn_taken = self._turn_taken, None
        if taken is not None:
            taken.set()

    async def _numbers(self, calls: Sequence[CallRequest]) -> array[int]:
        """Each tool call's number, from 1 in submission order across the run's batches
        (its ``<outer>:ptc:<n>``); 0 for a host operation. Packed: no object per call."""
        numbers = array("q")
        pacer = Pacer()
        for call in calls:
            if HOST_OPERATION_MARK in call.tool:
                numbers.append(0)
            else:
                self._count += 1
                numbers.append(self._count)
            await pacer.tick()
        return numbers

    def _tool_call(self, request: CallRequest, n: int) -> ToolCall:
        """Made as the call is reached, not for the whole batch at once (a batch of
        100,000 would keep as many objects alive for the garbage collector to scan)."""
        call_id = f"{self.execution.call_id}:ptc:{n}"
        return ToolCall(request.tool, request.arguments, call_id=call_id)

    async def _dispatch(
        self, calls: Sequence[CallRequest], numbers: array[int], ticket: int
    ) -> Replies:
        """The batch's replies in its order: tool calls first (replayed, or live through
        the scheduler), then its host operations."""
        replies = Replies(len(calls))
        live = array("q")
        operations: list[int] = []
        replaying = self.record.replay is not None
        pacer = Pacer()
        for index, n in enumerate(numbers):
            if n == 0:
                operations.append(index)
            elif replaying and (reply := self._replayed(n, calls[index])) is not None:
                replies[index] = reply
            else:
                live.append(index)
            await pacer.tick()
        if live:
            self._in_flight[ticket] = (calls, numbers, live)
            try:
                await self._run_live(calls, numbers, live, replies)
            finally:
                self._in_flight.pop(ticket, None)
        for index in operations:
            replies[index] = await self._answer_operation(calls[index])
        return replies

    def _replayed(self, n: int, request: CallRequest) -> CallReply | None:
        """A call's reply from the replayed record (or a diverged run's); ``None`` when it
        runs live."""
        record = self.record
        call = self._tool_call(request, n)
        recorded = record.replayed(n, call)
        if record.diverged:
            return CallReply.failure("CANCELLED", "the run is ending")
        if recorded is not None:
            self.dispatch_log.replayed(call, recorded)
            return record.answer_replayed(n, recorded)
        return None

    async def _run_live(
        self,
        calls: Sequence[CallRequest],
        numbers: array[int],
        live: array[int],
        replies: Replies,
    ) -> None:
        """Run the live calls through the run's scheduler; each is logged, recorded and
        answered as it ends (``duration_ms``: from the batch's submission to its end)."""
        started = time.perf_counter()

        async def ended(k: int, call: ToolCall, result: ToolResult) -> None:
            index = live[k]
            duration_ms = (time.perf_counter() - started) * 1000
            replies[index] = await self._finished(numbers[index], call, result, duration_ms)

        specs = (self._tool_call(calls[i], numbers[i]) for i in live)
        await self._stream(list(specs) if len(live) == 1 else specs, ended)

    async def _stream(self, specs: Iterable[ToolCall], ended: OnResult) -> None:
        # The site is taken per call: visibility is re-checked at dispatch time.
        await self.scheduler.stream(
            self._site,
            specs,
            ended,
            signal=self.signal,
            parent=self.execution.token,
            root_call_id=self.execution.root_call_id,
            halt=self.halt,
        )

    async def _finished(
        self, n: int, call: ToolCall, result: ToolResult, duration_ms: float
    ) -> CallReply:
        """A live call's reply; it is logged and recorded unless the run abandoned it."""
        if _code(result) == "SUSPENDED":
            self.record.suspend(n, call, result)
            return CallReply.failure("SUSPENDED", "the run is suspended")
        reply = _reply(result)
        ended = self.lifetime.cancelled or self.halt.cancelled
        if ended and _code(result) == "ABORTED_BEFORE_DISPATCH":
            return reply  # abandoned: never started, not logged
        logged = await self.dispatch_log.live(call, result, duration_ms)
        self.record.completed(n, call, reply, logged)
        return reply

    def _site(self, call: ToolCall) -> CallSite:
        site = call_site(self.scope)
        approver = self.record.approver(call)
        if approver is not None:
            site = dataclasses.replace(site, approver=approver)
        return site


class Replies(Sequence[CallReply]):
    """A batch's replies, in its order, kept in columns (no object per reply for the garbage
    collector to scan while a batch of 100,000 calls waits for its last ones) and made
    :class:`worker.CallReply` objects when they are read."""

    __slots__ = ("_codes", "_given", "_messages", "_oks", "_values")

    def __init__(self, count: int) -> None:
        self._given = bytearray(count)
        self._oks = bytearray(count)
        self._values: list[JSON] = [None] * count
        self._codes: list[str] = [""] * count
        self._messages: list[str] = [""] * count

    def __setitem__(self, index: int, reply: CallReply) -> None:
        self._given[index] = 1
        self._oks[index] = reply.ok
        self._values[index] = reply.value
        self._codes[index] = reply.code
        self._messages[index] = reply.message

    def __len__(self) -> int:
        return len(self._given)

    async def drop(self) -> None:
        """Let go of the replies (they are sent), a piece at a time: freeing 100,000 values
        at once would hold the event loop."""
        pacer = Pacer()
        for column in (self._values, self._codes, self._messages):
            while column:
                del column[-_DROP_AT_ONCE:]
                await pacer.tick()
        self._given = bytearray()
        self._oks = bytearray()

    @overload
    def __getitem__(self, index: int) -> CallReply: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[CallReply]: ...

    def __getitem__(self, index: int | slice) -> CallReply | Sequence[CallReply]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._given)))]
        if not self._given[index]:
            raise LookupError(f"reply {index} of the batch was never given")
        return CallReply(
            ok=bool(self._oks[index]),
            value=self._values[index],
            code=self._codes[index],
            message=self._messages[index],
        )


_DROP_AT_ONCE = 1024


def _code(result: ToolResult) -> str | None:
    return result.error.code if result.error is not None else None


def _reply(result: ToolResult) -> CallReply:
    if result.error is not None:
        return CallReply.failure(result.error.code, result.error.message)
    return CallReply.success(thaw(result.value))
