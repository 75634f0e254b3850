"""``ToolRuntime``: the top of the stack. It owns the scope tree, the listener registry and
code mode, and closes them."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Literal, overload

import anyio
from typing_extensions import Unpack

from worker import Containment, Limits, Profile, WorkerBackend

from ._calls._decisions import Approver
from ._calls._decorator import ToolOptions
from ._calls._events import (
    CHANGE,
    AnyListener,
    DispatchLogListener,
    Disposer,
    Event,
    ExecuteListener,
    OutputListener,
    PostExecuteListener,
    PreExecuteListener,
    ResultListener,
    describe,
    logger,
)
from ._calls._lifetime import CloseHook, Lifetime
from ._calls._tools import ToolDefinition
from ._code._codemode import CodeMode
from ._detached import Detached, start_detached
from ._errors import ConfigurationError, UsageError
from ._scopes._layers import MODES, Mode
from ._scopes._presentation import check_code_options
from ._scopes._scope import ChangeListener, Scope
from ._scopes._scope_tree import ScopeTree
from ._sessions._session_runs import SessionKeepers
from ._sessions._session_store import MemorySessionStore, SessionStore
from ._suspend._suspensions import SuspensionStore

__all__ = ("ToolRuntime",)


class ToolRuntime:
    """Owns the scope tree (``root``), listeners and code mode. Use as an async context manager.

    ``default_mode`` applies where no scope declared ``present_as``; ``approver`` answers
    ``Ask`` decisions; ``profile``, ``limits`` and ``containment`` are the code-mode
    defaults; ``max_parallel_calls`` caps parallel bodies per ``call_many`` batch;
    ``backend`` is the worker backend code mode runs programs with (default: a
    :class:`worker.SubprocessBackend` with ``containment``, started on first use);
    ``suspensions`` keeps runs suspended on a deferred approval (default: in memory; use
    :class:`ptc.FileSuspensionStore` to resume them after a restart); ``sessions`` keeps
    the state of sessions (``scope.session()``; default: a :class:`ptc.MemorySessionStore`;
    :class:`ptc.FileSessionStore` keeps them across restarts).
    """

    def __init__(
        self,
        *,
        default_mode: Mode = "native",
        approver: Approver | None = None,
        profile: Profile = "python",
        limits: Limits | None = None,
        containment: Containment | None = None,
        max_parallel_calls: int = 10,
        backend: WorkerBackend | None = None,
        suspensions: SuspensionStore | None = None,
        sessions: SessionStore | None = None,
    ) -> None:
        if default_mode not in MODES:
            raise ConfigurationError(f"default_mode must be one of {MODES}, got {default_mode!r}")
        if approver is not None and not callable(approver):
            raise UsageError("approver must be an async callable")
        if isinstance(max_parallel_calls, bool) or not isinstance(max_parallel_calls, int):
            raise UsageError("max_parallel_calls must be an int")
        if max_parallel_calls < 1:
            raise ConfigurationError("max_parallel_calls must be at least 1")
        if containment is not None and not isinstance(containment, Containment):
            raise UsageError("containment must be ptc.Containment")
        if backend is not None and not isinstance(backend, WorkerBackend):
            raise UsageError("backend must be a worker.WorkerBackend")
        if suspensions is not None and not isinstance(suspensions, SuspensionStore):
            raise UsageError("suspensions must be a ptc.SuspensionStore")
        if sessions is not None and not isinstance(sessions, SessionStore):
            raise UsageError("sessions must be a ptc.SessionStore")
        check_code_options(profile, limits)
        self._lifetime = Lifetime()
        self._tree = ScopeTree[Scope](
            default_mode=default_mode,
            approver=approver,
            profile=profile,
            limits=limits if limits is not None else Limits(),
            max_parallel_calls=max_parallel_calls,
            changed=self._changed,
            lifetime=self._lifetime,
            sessions=SessionKeepers(sessions if sessions is not None else MemorySessionStore()),
        )
        self._containment = containment if containment is not None else Containment()
        self._suspensions = suspensions if suspensions is not None else SuspensionStore()
        self._code_mode = CodeMode(
            default_mode=default_mode,
            backend=backend,
            containment=self._containment,
            suspensions=self._suspensions,
        )
        self._tree.code_mode = self._code_mode
        self._entered = False
        self._listener_tasks: set[Detached] = set()
        self._lifetime_host: Detached | None = None
        self._closed = False
        self.root = Scope(self._tree, "root", None)

    # -- options ------------------------------------------------------------------------

    @property
    def default_mode(self) -> Mode:
        """The mode a scope presents as unless it or an ancestor declares one."""
        return self._tree.default_mode

    @property
    def approver(self) -> Approver | None:
        """What answers ``Ask`` decisions; ``None``: every ask is ``ASK_UNAVAILABLE``."""
        return self._tree.approver

    @property
    def profile(self) -> Profile:
        """The language profile code mode uses unless a scope declares one."""
        return self._tree.profile

    @property
    def limits(self) -> Limits:
        """The run limits code mode uses unless a scope declares its own."""
        return self._tree.limits

    @property
    def containment(self) -> Containment:
        """What every run's containment must achieve (``require``) and the pool's size."""
        return self._containment

    @property
    def suspensions(self) -> SuspensionStore:
        """Where suspended runs are kept until they are resumed."""
        return self._suspensions

    @property
    def sessions(self) -> SessionStore:
        """Where the sessions' state is kept."""
        return self._tree.sessions.store

    @property
    def max_parallel_calls(self) -> int:
        """How many parallel-safe bodies one batch runs at once."""
        return self._tree.max_parallel_calls

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran (or began)."""
        return self._closed

    @property
    def lifetime(self) -> Lifetime:
        """Background tasks and close hooks that live as long as the runtime."""
        return self._lifetime

    def on_close(self, hook: CloseHook) -> Disposer:
        """Run ``hook`` (sync or async, no arguments) when the runtime closes, after code
        mode has stopped and before the runtime's task group ends; last registered first."""
        return self._lifetime.on_close(hook)

    # -- scopes and registration (delegating to root) -----------------------------------

    def scope(self, name: str) -> Scope:
        """A child of ``root``."""
        return self.root.scope(name)

    def register(self, definition: ToolDefinition) -> Disposer:
        """Register ``definition`` on ``root``."""
        return self.root.register(definition)

    @overload
    def tool(self, fn: Callable[..., Any], /, **options: Unpack[ToolOptions]) -> ToolDefinition: ...

    @overload
    def tool(
        self, /, **options: Unpack[ToolOptions]
    ) -> Callable[[Callable[..., Any]], ToolDefinition]: ...

    def tool(
        self, fn: Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]
    ) -> ToolDefinition | Callable[[Callable[..., Any]], ToolDefinition]:
        """``@runtime.tool`` / ``@runtime.tool(...)``: define and register on ``root``."""
        if fn is not None:
            return self.root.tool(fn, **options)
        return self.root.tool(**options)

    @overload
    def on(
        self,
        event: Literal["tools/pre-execute"],
        listener: PreExecuteListener,
        *,
        scope: Scope | None = None,
    ) -> Disposer: ...
    @overload
    def on(
        self,
        event: Literal["tools/execute"],
        listener: ExecuteListener,
        *,
        scope: Scope | None = None,
    ) -> Disposer: ...
    @overload
    def on(
        self,
        event: Literal["tools/post-execute"],
        listener: PostExecuteListener,
        *,
        scope: Scope | None = None,
    ) -> Disposer: ...
    @overload
    def on(
        self,
        event: Literal["tools/ptc-dispatch-log"],
        listener: DispatchLogListener,
        *,
        scope: Scope | None = None,
    ) -> Disposer: ...
    @overload
    def on(
        self,
        event: Literal["tools/result"],
        listener: ResultListener,
        *,
        scope: Scope | None = None,
    ) -> Disposer: ...
    @overload
    def on(
        self,
        event: Literal["tools/change"],
        listener: ChangeListener,
        *,
        scope: Scope | None = None,
    ) -> Disposer: ...
    @overload
    def on(
        self,
        event: Literal["code/output"],
        listener: OutputListener,
        *,
        scope: Scope | None = None,
    ) -> Disposer: ...

    def on(self, event: Event, listener: AnyListener, *, scope: Scope | None = None) -> Disposer:
        """Register a listener; a scoped one sees only that scope and its descendants."""
        return self._tree.listeners.add(event, listener, scope)

    # -- changes ------------------------------------------------------------------------

    def _changed(self, scope: Scope) -> None:
        try:
            self._code_mode.on_change(scope)
        except Exception:
            logger.exception("code mode failed to handle a tools/change")
        for listener in self._tree.listeners.for_chain(CHANGE, scope.lineage):
            try:
                out = listener(scope)
            except Exception:
                logger.exception("%s listener %s failed", CHANGE, describe(listener))
                continue
            if inspect.isawaitable(out):
                self._spawn(out, listener)

    def _spawn(self, awaitable: Awaitable[object], listener: AnyListener) -> None:
        # Changes happen in sync code; a coroutine listener runs in a task of its own that
        # close() waits for (detached, so closing works from any task or nesting).
        if not self._entered or self._closed:
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
            finally:
                self._listener_tasks.discard(task)

        task = start_detached(run, name=f"ptc-change-listener:{describe(listener)}")
        self._listener_tasks.add(task)

    # -- lifetime -----------------------------------------------------------------------

    async def __aenter__(self) -> ToolRuntime:
        self._entered = True
        # Background tasks of integrations (ptc.mcp mounts) run in a task group that lives
        # in a detached task of its own, so closing works from any task or nesting.
        ready = anyio.Event()
        self._lifetime_host = start_detached(
            self._host_lifetime, ready, name="ptc-runtime-lifetime"
        )
        await ready.wait()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close code mode (workers, pools), run the close hooks (``on_close``), then stop
        background tasks and wait for pending change listeners. Idempotent, and callable
        from any task, inside or outside ``async with runtime`` (which calls it on exit).
        Never raises for a hook's failure (it is logged)."""
        if self._closed:
            return
        self._closed = True
        try:
            try:
                await self._code_mode.aclose()
            finally:
                await self._lifetime.close()
        finally:
            self._lifetime.detach()
            host, self._lifetime_host = self._lifetime_host, None
            if host is not None:
                host.cancel()  # what the close hooks did not stop
                await host.done.wait()
            while self._listener_tasks:
                await next(iter(self._listener_tasks)).done.wait()

    async def _host_lifetime(self, ready: anyio.Event) -> None:
        async with anyio.create_task_group() as group:
            self._lifetime.attach(group)
            ready.set()
            await anyio.sleep_forever()
