"""What lives as long as the runtime: background tasks and close hooks.

Integrations that hold a connection open (``ptc.mcp`` mounts) need two things a scope alone
cannot give them: a task that outlives the call that created it, and a say when the runtime
closes. :class:`Lifetime` offers both; the runtime owns one, every scope reaches it as
``scope.lifetime``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from anyio.abc import TaskGroup, TaskStatus

from .._errors import ClosedError, UsageError
from ._events import Disposer, describe, logger, remove_identical

__all__ = ("CloseHook", "Lifetime")

CloseHook: TypeAlias = Callable[[], "Awaitable[object] | object"]
"""A close hook: a plain function or a coroutine function without arguments."""


class _Status:
    """The ``task_status`` handed to a background task; remembers whether it started."""

    __slots__ = ("_inner", "started_called")

    def __init__(self, inner: TaskStatus[Any]) -> None:
        self._inner = inner
        self.started_called = False

    def started(self, value: object = None) -> None:
        self.started_called = True
        self._inner.started(value)


class Lifetime:
    """The runtime's background task group and close hooks (see the module docstring).

    Tasks can be started only while the runtime is entered (``async with``). Close hooks
    run when the runtime closes, last registered first; an exception in one is logged
    and the others still run.
    """

    def __init__(self) -> None:
        self._group: TaskGroup | None = None
        self._hooks: list[CloseHook] = []
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether the runtime closed: no task can start and no hook can be added any more."""
        return self._closed

    def on_close(self, hook: CloseHook) -> Disposer:
        """Run ``hook`` when the runtime closes; the disposer unregisters it."""
        if not callable(hook):
            raise UsageError("on_close() takes a callable")
        if self._closed:
            raise ClosedError("the runtime is closed")
        hooks = self._hooks
        hooks.append(hook)
        return Disposer(lambda: remove_identical(hooks, hook))

    async def start(self, fn: Callable[..., Awaitable[object]], *, name: str | None = None) -> Any:
        """Run ``fn(task_status=...)`` in the runtime's task group, as
        ``anyio.abc.TaskGroup.start`` does: return the value it passes to
        ``task_status.started(value)``. An exception before that is raised here; one after
        it is logged and never takes the runtime down.
        """
        group = self._group
        if group is None or self._closed:
            raise ClosedError(
                "the runtime is not running: enter it first (async with ptc.ToolRuntime() ...)"
            )

        async def guarded(*, task_status: TaskStatus[Any]) -> None:
            status = _Status(task_status)
            try:
                await fn(task_status=status)
            except Exception:
                if not status.started_called:
                    raise
                logger.exception("background task %s failed", name or describe(fn))

        return await group.start(guarded, name=name)

    # -- the runtime's side -------------------------------------------------------------

    def attach(self, group: TaskGroup) -> None:
        """The runtime entered: background tasks run in ``group``."""
        self._group = group

    async def close(self) -> None:
        """Run the close hooks, last registered first (the runtime's ``close()`` does).
        Idempotent; a hook's exception is logged, never raised."""
        if self._closed:
            return
        self._closed = True
        while self._hooks:
            hook = self._hooks.pop()
            try:
                out = hook()
                if inspect.isawaitable(out):
                    await out
            except Exception:
                logger.exception("close hook %s failed", describe(hook))

    def detach(self) -> None:
        """The runtime left its task group: :meth:`start` refuses from now on."""
        self._group = None
