"""Tasks that outlive the task that started them, and may be left behind on purpose.

A task group makes its host wait for every child; a ``run_code`` that must return at its
wall-clock deadline cannot wait for a nested tool that shields itself from cancellation,
and ``ToolRuntime.close()`` must not exit a task group from inside a different cancel
scope than the one that entered it. :func:`start_detached` runs a coroutine function in a
task of its own (asyncio: ``loop.create_task``, a reference kept until it ends; trio: a
system task) inside a cancel scope the starter can cancel, and sets an event when it ends.
An exception it raises is logged, never lost and never raised into the starter.

:class:`DetachedGroup` runs many jobs in such tasks, started one at a time and ended
together (a run's nested calls, a batch per job): a task whose job ended waits for the
next one, so a stream of jobs costs one wake-up each rather than a task spawn (or a task
group's) each, which matters on the nested-call hot path; jobs that overlap get tasks of
their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

__all__ = ("Detached", "DetachedGroup", "start_detached")

logger = logging.getLogger("ptc")
_RUNNING: set[asyncio.Task[None]] = set()  # asyncio keeps only weak references to tasks


class Detached:
    """The handle on one detached task: ``cancel()``, ``done`` (an event), ``name``."""

    def __init__(self, name: str, on_done: Callable[[Detached], None] | None = None) -> None:
        self.name = name
        self.done = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._cancel_requested = False
        self._on_done = on_done

    def cancel(self) -> None:
        """Cancel the task (anyio cancellation: a shielded part still runs to its end)."""
        self._cancel_requested = True
        if self._scope is not None:
            self._scope.cancel()

    async def _run(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._cancel_requested:
                    scope.cancel()
                await fn(*args)
        except Exception:
            logger.exception("detached task %s failed", self.name)
        finally:
            self.done.set()
            if self._on_done is not None:
                self._on_done(self)


def start_detached(
    fn: Callable[..., Awaitable[Any]],
    *args: Any,
    name: str,
    on_done: Callable[[Detached], None] | None = None,
) -> Detached:
    """Run ``await fn(*args)`` in a task of its own, from the event loop's thread;
    ``on_done(handle)`` is called as it ends."""
    handle = Detached(name, on_done)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: anyio's other backend
        import trio

        trio.lowlevel.spawn_system_task(handle._run, fn, args, name=name)
        return handle
    task = loop.create_task(handle._run(fn, args), name=name)
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)
    return handle


class _Wake:
    """What wakes an idle slot's task: ``set()`` once, ``await wait()`` by that one task.

    On asyncio a bare future (an ``anyio.Event`` wraps an ``asyncio.Event`` that makes one
    per waiter anyway, and finding the backend for a new one costs a lookup: this is on
    every nested call's path); elsewhere an ``anyio.Event``. Awaited in the task's cancel
    scope, either is cancelled with it."""

    __slots__ = ("_event", "_future")

    def __init__(self) -> None:
        self._future: asyncio.Future[None] | None = None
        self._event: anyio.Event | None = None
        try:
            self._future = asyncio.get_running_loop().create_future()
        except RuntimeError:  # not asyncio: anyio's other backend
            self._event = anyio.Event()

    def set(self) -> None:
        if self._future is None:
            assert self._event is not None
            self._event.set()
        elif not self._future.done():  # (done: cancelled with its waiter, or set already)
            self._future.set_result(None)

    async def wait(self) -> None:
        if self._future is None:
            assert self._event is not None
            await self._event.wait()
        else:
            await self._future


class _Slot:
    """One task of a :class:`DetachedGroup`: the job it runs next and what wakes it."""

    __slots__ = ("job", "wake")

    def __init__(self, job: tuple[Callable[..., Awaitable[Any]], tuple[Any, ...]]) -> None:
        self.job: tuple[Callable[..., Awaitable[Any]], tuple[Any, ...]] | None = job
        self.wake: _Wake | None = None


class DetachedGroup:
    """Detached jobs started one at a time and ended together.

    ``close()`` says no more will start; ``done`` is set once the group is closed and every
    job has ended; ``cancel()`` cancels them all (and any started afterwards). A job runs in
    a detached task of the group; a task whose job ended waits for the next one, so a
    stream of short jobs (a run's nested calls, one at a time) costs one wake-up each
    rather than a task and a cancel scope each. Jobs that overlap get tasks of their own.
    Jobs that run in one task share its context (a copy of the context that started the
    task's first job), as the stages of one call already do.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.done = anyio.Event()
        self._running: set[Detached] = set()
        self._idle: list[_Slot] = []
        self._closed = False
        self._cancelled = False

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        if self._closed:
            raise RuntimeError(f"detached group {self.name} is closed")
        if self._idle:
            slot = self._idle.pop()
            slot.job = (fn, args)
            assert slot.wake is not None
            slot.wake.set()
            return
        handle = start_detached(
            self._work, _Slot((fn, args)), name=self.name, on_done=self._ended
        )
        self._running.add(handle)  # the task has not run yet: it ends after this
        if self._cancelled:
            handle.cancel()

    def close(self) -> None:
        self._closed = True
        self._release_idle()
        self._check_done()

    def cancel(self) -> None:
        self._cancelled = True
        self._release_idle()
        for handle in list(self._running):
            handle.cancel()

    async def _work(self, slot: _Slot) -> None:
        while slot.job is not None:
            fn, args = slot.job
            slot.job = None
            await fn(*args)
            if self._closed or self._cancelled:
                return
            slot.wake = wake = _Wake()
            self._idle.append(slot)
            await wake.wait()

    def _release_idle(self) -> None:
        for slot in self._idle:
            if slot.wake is not None:
                slot.wake.set()  # no job: the task ends
        self._idle.clear()

    def _ended(self, handle: Detached) -> None:
        self._running.discard(handle)
        self._check_done()

    def _check_done(self) -> None:
        if self._closed and not self._running:
            self.done.set()
