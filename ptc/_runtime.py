"""``ToolRuntime``: the scope tree's owner, listener registry and code-mode host."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from anyio.abc import TaskGroup

from worker import Containment, Limits, WorkerBackend

from ._decisions import ApprovalAnswer, ApprovalRequest
from ._events import CHANGE, Disposer, Listener, Listeners, describe, logger
from ._scopes import MODES, Mode, Scope
from ._tools import ToolDefinition

if TYPE_CHECKING:
    pass

Approver = Callable[[ApprovalRequest], Awaitable[ApprovalAnswer]]
PROFILES = ("python", "restricted")


class CodeModeHooks(Protocol):
    """What the runtime needs from code mode (``ptc._codemode.CodeMode``)."""

    def run_code_tool(self, scope: Scope, tools: Mapping[str, ToolDefinition]) -> ToolDefinition:
        """The scope's ``run_code``; ``tools`` are its visible native tools (the SDK's)."""

    def sdk(self, scope: Scope) -> str: ...
    def on_change(self, scope: Scope) -> None: ...
    async def aclose(self) -> None: ...


class ToolRuntime:
    """Owns the scope tree (``root``), listeners and code mode. Use as an async context manager.

    ``default_mode`` applies where no scope declared ``present_as``; ``profile``,
    ``limits`` and ``containment`` are the code-mode defaults; ``max_parallel_calls`` caps
    parallel bodies per ``call_many`` batch; ``backend`` is the worker backend code mode uses.
    """

    def __init__(
        self,
        default_mode: Mode = "native",
        approver: Approver | None = None,
        profile: str = "python",
        limits: Limits | None = None,
        containment: Containment | None = None,
        max_parallel_calls: int = 10,
        backend: WorkerBackend | None = None,
    ) -> None:
        if default_mode not in MODES:
            raise ValueError(f"default_mode must be one of {MODES}, got {default_mode!r}")
        if approver is not None and not callable(approver):
            raise TypeError("approver must be an async callable")
        if isinstance(max_parallel_calls, bool) or not isinstance(max_parallel_calls, int):
            raise TypeError("max_parallel_calls must be an int")
        if max_parallel_calls < 1:
            raise ValueError("max_parallel_calls must be at least 1")
        self._check_code_options(profile, limits)
        self.default_mode: Mode = default_mode
        self.approver = approver
        self.profile = profile
        self.limits = limits if limits is not None else Limits()
        self.containment = containment if containment is not None else Containment()
        self.max_parallel_calls = max_parallel_calls
        self.backend = backend
        self._listeners = Listeners()
        self._version = 0
        self._task_group: TaskGroup | None = None
        self._closed = False
        self.root = Scope(self, "root", None)
        # Imported lazily: code mode depends on this module, not the other way round.
        module = importlib.import_module("ptc._codemode")
        self._code_mode: CodeModeHooks = module.CodeMode(self)

    @staticmethod
    def _check_code_options(profile: str | None, limits: Limits | None) -> None:
        if profile is not None and profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError("limits must be ptc.Limits")

    # -- scopes and registration (delegating to root) ---------------------------------

    def scope(self, name: str) -> Scope:
        """A child of ``root``."""
        return self.root.scope(name)

    def register(self, definition: ToolDefinition) -> Disposer:
        return self.root.register(definition)

    def tool(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """``@runtime.tool``: define and register on ``root``."""
        return self.root.tool(fn, **options)

    def on(self, event: str, listener: Listener, *, scope: Scope | None = None) -> Disposer:
        """Register a listener; a scoped one sees only that scope and its descendants."""
        undo = self._listeners.add(event, listener, scope)
        return Disposer(undo)

    # -- changes ----------------------------------------------------------------------

    def _changed(self, scope: Scope) -> None:
        self._version += 1
        try:
            self._code_mode.on_change(scope)
        except Exception:
            logger.exception("code mode failed to handle a tools/change")
        for listener in self._listeners.for_scope(CHANGE, scope._chain):
            try:
                out = listener(scope)
            except Exception:
                logger.exception("%s listener %s failed", CHANGE, describe(listener))
                continue
            if inspect.isawaitable(out):
                self._spawn(out, listener)

    def _spawn(self, awaitable: Awaitable[object], listener: Listener) -> None:
        # Changes happen in sync code; a coroutine listener runs in the runtime's task group.
        if self._task_group is None:
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            logger.error(
                "%s listener %s is async but the runtime is not entered (async with)",
                CHANGE,
                describe(listener),
            )
            return

        async def run() -> None:
            try:
                await awaitable
            except Exception:
                logger.exception("%s listener %s failed", CHANGE, describe(listener))

        self._task_group.start_soon(run)

    # -- lifetime ---------------------------------------------------------------------

    async def __aenter__(self) -> ToolRuntime:
        group = anyio.create_task_group()
        await group.__aenter__()
        self._task_group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close code mode (workers, pools) and wait for pending change listeners. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._code_mode.aclose()
        finally:
            group, self._task_group = self._task_group, None
            if group is not None:
                await group.__aexit__(None, None, None)


__all__: Sequence[str] = ("ToolRuntime",)
