"""A batch of calls as the run loop hands it to a handler, kept light for big batches.

A program may submit 100,000 calls at once, and the host holds them until their replies go
out. Kept as :class:`~worker.CallRequest` objects, each would be one more object for the
garbage collector to scan at every full collection while the batch lives (and a batch of
100,000 sets off several, each scanning everything the host holds). :class:`PackedCalls`
keeps the calls in columns of plain values instead and makes the ``CallRequest`` when it is
read.
"""

from __future__ import annotations

from array import array
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import overload

from .._types import JSON, CallReply, CallRequest
from ._pacing import Pacer

__all__ = ("PackedCalls", "StartedBatch")


class PackedCalls(Sequence[CallRequest]):
    """The calls of one batch, in order; ``CallRequest``s made as they are read."""

    __slots__ = ("_arguments", "_ids", "_tools")

    def __init__(self) -> None:
        # Columns, not an object per call: the ids packed, the tool names and the
        # arguments (dicts of plain values, which the collector does not track) in one list
        # each. (A tuple per call would stay tracked: one holding a dict always does.)
        self._ids = array("q")
        self._tools: list[str] = []
        self._arguments: list[dict[str, JSON]] = []

    def add(self, call_id: int, tool: str, arguments: dict[str, JSON]) -> None:
        self._ids.append(call_id)
        self._tools.append(tool)
        self._arguments.append(arguments)

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> CallRequest: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[CallRequest]: ...

    def __getitem__(self, index: int | slice) -> CallRequest | Sequence[CallRequest]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._ids)))]
        return CallRequest(
            id=self._ids[index], tool=self._tools[index], arguments=self._arguments[index]
        )

    def __iter__(self) -> Iterator[CallRequest]:
        for call_id, tool, arguments in zip(self._ids, self._tools, self._arguments, strict=True):
            yield CallRequest(id=call_id, tool=tool, arguments=arguments)

    def ids(self) -> Iterator[int]:
        """The calls' ids, in order (without making requests)."""
        return iter(self._ids)

    async def drop(self) -> None:
        """Let go of the calls (their replies are out), a piece at a time: freeing the
        arguments of 100,000 calls at once holds the event loop for 10 ms and more."""
        pacer = Pacer()
        while self._arguments:
            del self._arguments[-_DROP_AT_ONCE:]
            del self._tools[-_DROP_AT_ONCE:]
            await pacer.tick()
        self._ids = array("q")


_DROP_AT_ONCE = 1024


class StartedBatch:
    """A batch handed to a :class:`~worker.CallStarter`: its calls, and the way back for its
    replies (or its handler's failure) through the run loop."""

    __slots__ = ("_fail", "_reply", "calls")

    def __init__(
        self,
        calls: PackedCalls,
        reply: Callable[[PackedCalls, Sequence[CallReply]], Awaitable[None]],
        fail: Callable[[BaseException], None],
    ) -> None:
        self.calls = calls
        self._reply = reply
        self._fail = fail

    async def reply(self, replies: Sequence[CallReply]) -> None:
        await self._reply(self.calls, replies)

    def fail(self, error: BaseException) -> None:
        self._fail(error)
