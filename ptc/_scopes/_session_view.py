"""``Session``: a view of a scope whose ``run_code`` keeps the program's globals and files
from one run to the next, while every run is still a fresh, contained worker.

``scope.session()`` makes one (``scope.session(id=...)`` reopens it). Everything but
``run_code`` behaves as the scope's: ``call``, ``call_many``, ``model_tools``, ``sdk``,
``view``, ``on``, paused runs. Its ``run_code`` is the scope's with a description that says
what persists and an input that takes ``reset`` (start from an empty session); its body
runs with the session (``_session_runs``), one run at a time, in call order.

Scopes are the layer below: a session knows its scope through :class:`SessionScope`
(what it asks of it) and a callable that gives the scope's current call site.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Protocol

from worker import Limits, Profile

from .._calls._decisions import ApprovalAnswer
from .._calls._events import AnyListener, Disposer, Event, Listeners, OutputListener, only_call
from .._calls._pipeline import Call, CallSite
from .._calls._scheduler import Scheduler, ToolCall
from .._calls._tools import RUN_CODE, ToolContext, ToolDefinition
from .._errors import ClosedError, SessionError, UsageError
from .._json import JSON, FrozenDict, JSONLike
from .._results import ToolResult
from .._sessions._session_runs import (
    SessionCall,
    SessionKeeper,
    SessionKeepers,
    called_with_ticket,
    calling_session,
    take_ticket,
)
from .._sessions._session_store import DEFAULT_SESSION_TTL_SECONDS as DEFAULT_TTL
from .._sessions._session_store import SessionRecord, check_ttl, new_session_id
from .._signals import CancelSignal
from .._suspend._suspensions import Suspension
from ._layers import Mode, ModelFormat, ToolView, model_spec

__all__ = ("DEFAULT_TTL", "SESSION_INPUT_SCHEMA", "Session", "SessionScope", "open_session")

SESSION_NOTE = (
    "\nThis run_code keeps a session: variables, functions, classes, imports and files in "
    "the working directory persist from one call to the next (each run is still a fresh "
    "process), so fetch once and build on it in later calls. A run that fails with an "
    "exception keeps what it assigned before it; a run stopped by a limit keeps nothing of "
    "itself. Generators, open files, locks, threads and sockets do not persist (the result "
    "says what was dropped). Pass reset=true to start from an empty session.\n"
)
SESSION_INPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "minLength": 1,
            "description": "The Python program (module code, as the tool's description says).",
        },
        "description": {
            "type": "string",
            "description": "A short label (5-10 words) saying what the program does.",
        },
        "reset": {
            "type": "boolean",
            "description": "Start from an empty session: no variables, no files.",
        },
    },
    "required": ["code"],
    "additionalProperties": False,
}


class SessionScope(Protocol):
    """What a session asks of its scope (a :class:`ptc.Scope` is one)."""

    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @property
    def parent(self) -> SessionScope | None: ...
    @property
    def lineage(self) -> Sequence[SessionScope]: ...
    def code_options(self) -> tuple[Mode, Profile, Limits]: ...
    def on(self, event: Any, listener: Any) -> Disposer: ...
    def model_tools(
        self, format: ModelFormat = "raw", *, strict: bool = False
    ) -> list[dict[str, JSON]]: ...
    def sdk(self, tools: Iterable[str] | None = None) -> str: ...
    async def prepare(self) -> None: ...
    def suspension(self, call_id: str) -> Suspension | None: ...
    async def resume(self, call_id_or_token: str, answer: ApprovalAnswer) -> ToolResult: ...
    async def discard_suspension(self, call_id_or_token: str) -> Suspension: ...


class Session:
    """A view of ``scope`` that carries a session (see the module docstring). Made by
    ``scope.session()``; its ``run_code`` results carry ``meta["session"]``."""

    def __init__(
        self,
        scope: SessionScope,
        keeper: SessionKeeper,
        *,
        site: Callable[[], CallSite],
        listeners: Listeners,
        opener: Callable[[str], Session],
    ) -> None:
        self._scope = scope
        self._keeper = keeper
        self._site = site
        self._listeners = listeners
        self._opener = opener
        self._closed = False
        self._cached: tuple[ToolDefinition, ToolDefinition] | None = None

    def __repr__(self) -> str:
        return f"<Session {self.id} of {self._scope.path}>"

    @property
    def id(self) -> str:
        """The session's id: ``scope.session(id=...)`` reopens it (in the same scope)."""
        return self._keeper.id

    @property
    def scope(self) -> SessionScope:
        """The scope this session is a view of."""
        return self._scope

    @property
    def path(self) -> str:
        """The scope's path (a session is a view of it)."""
        return self._scope.path

    @property
    def parent(self) -> SessionScope | None:
        """The scope's parent (``None`` for the root)."""
        return self._scope.parent

    @property
    def closed(self) -> bool:
        """Closed by :meth:`close` here (a session may also expire or be evicted: its runs
        then answer ``SESSION_EXPIRED``)."""
        return self._closed

    # -- the scope's API, with run_code carrying the session ------------------------------

    def _call_site(self) -> CallSite:
        site = self._site()
        base = site.visible.get(RUN_CODE)
        if base is None:
            return site
        visible = dict(site.visible)
        visible[RUN_CODE] = self._run_code_tool(base)
        return replace(site, visible=MappingProxyType(visible))

    def _run_code_tool(self, base: ToolDefinition) -> ToolDefinition:
        cached = self._cached
        if cached is not None and cached[0] is base:
            return cached[1]
        keeper = self._keeper
        run = base.execute

        async def execute(arguments: FrozenDict, context: ToolContext) -> Any:
            call = SessionCall(keeper, arguments.get("reset") is True)
            # One at a time, in the order the runs were called (the ticket taken then).
            async with keeper.turn(take_ticket()):
                token = calling_session(call)
                try:
                    pending = run(arguments, context)
                    return await pending if inspect.isawaitable(pending) else pending
                finally:
                    token.var.reset(token)

        tool = replace(
            base,
            description=base.description + SESSION_NOTE,
            input_schema=SESSION_INPUT_SCHEMA,
            execute=execute,
        )
        self._cached = (base, tool)
        return tool

    def code_options(self) -> tuple[Mode, Profile, Limits]:
        """The scope's ``(mode, profile, limits)``."""
        return self._scope.code_options()

    def view(self) -> ToolView:
        """The scope's view, its ``run_code`` the session's."""
        site = self._call_site()
        names = frozenset(site.visible)
        return ToolView(visible=site.visible, known_names=names, restrictable_names=names)

    def model_tools(
        self, format: ModelFormat = "raw", *, strict: bool = False
    ) -> list[dict[str, JSON]]:
        """The scope's model tools, ``run_code`` as the session's (see ``Scope.model_tools``)."""
        specs = self._scope.model_tools(format, strict=strict)
        site = self._call_site()
        tool = site.visible.get(RUN_CODE)
        if tool is None:
            return specs
        session_spec = model_spec(tool, format, strict=strict)
        return [session_spec if _spec_name(s) == RUN_CODE else s for s in specs]

    def sdk(self, tools: Iterable[str] | None = None) -> str:
        """The scope's SDK text (or the stub of ``tools``), as ``Scope.sdk``."""
        return self._scope.sdk(tools)

    async def prepare(self) -> None:
        """The scope's ``prepare()``."""
        await self._scope.prepare()

    def on(self, event: Event, listener: AnyListener) -> Disposer:
        """Listen to ``event`` on the scope (see ``Scope.on``)."""
        return self._listeners.add(event, listener, self._scope)

    def on_output(self, call_id: str, listener: OutputListener) -> Disposer:
        """The output of one ``run_code`` call as it prints (see ``Scope.on_output``)."""
        return self.on("code/output", only_call(call_id, listener))

    async def call(
        self,
        name: str,
        arguments: Mapping[str, JSONLike],
        *,
        call_id: str | None = None,
        signal: CancelSignal | None = None,
    ) -> ToolResult:
        """``Scope.call``; ``run_code`` runs on this session (``SESSION_EXPIRED`` once it
        is closed, expired or evicted: a result, never an exception)."""
        call = Call.create(self._call_site(), name, arguments, call_id=call_id, signal=signal)
        if name != RUN_CODE:
            return await call.run()
        ticket = self._keeper.ticket()  # its place in line: taken now, in call order
        token = called_with_ticket(ticket)
        try:
            return await call.run()
        finally:
            token.var.reset(token)
            self._keeper.release(ticket)  # if it never ran (denied, invalid arguments)

    async def call_many(
        self, calls: Sequence[ToolCall], *, signal: CancelSignal | None = None
    ) -> list[ToolResult]:
        """``Scope.call_many``; ``run_code`` runs on this session."""
        limits = self._scope.code_options()[2]
        scheduler = Scheduler(limits.max_parallel_calls)
        return await scheduler.run(lambda _: self._call_site(), calls, signal=signal)

    async def run_code(
        self,
        code: str,
        *,
        description: str | None = None,
        reset: bool = False,
        call_id: str | None = None,
        signal: CancelSignal | None = None,
    ) -> ToolResult:
        """``call("run_code", {"code": code, ...})`` on this session; ``reset=True`` starts
        from an empty session (no variables, no files)."""
        arguments: dict[str, JSON] = {"code": code}
        if description:
            arguments["description"] = description
        if reset:
            arguments["reset"] = True
        return await self.call(RUN_CODE, arguments, call_id=call_id, signal=signal)

    def suspension(self, call_id: str) -> Suspension | None:
        """The scope's paused run with this call id, or ``None``."""
        return self._scope.suspension(call_id)

    async def resume(self, call_id_or_token: str, answer: ApprovalAnswer) -> ToolResult:
        """``Scope.resume``: a paused run of this session resumes on it (see
        docs/code-mode.md for when its state is saved)."""
        return await self._scope.resume(call_id_or_token, answer)

    async def discard_suspension(self, call_id_or_token: str) -> Suspension:
        """Drop the scope's paused run (see ``Scope.discard_suspension``); returns it."""
        return await self._scope.discard_suspension(call_id_or_token)

    # -- the session's own --------------------------------------------------------------

    async def fork(self) -> Session:
        """A new session with this one's state and files as they are now (after the runs
        already called), independent from here on."""
        self._check_open()
        async with self._keeper.turn():
            record = await self._keeper.fork(new_session_id())
        return self._opener(record.id)

    async def reset(self) -> None:
        """Empty the session (no variables, no files), as the next version."""
        self._check_open()
        async with self._keeper.turn():
            await self._keeper.reset()

    async def close(self) -> None:
        """Forget the session's state; its later runs answer ``SESSION_EXPIRED``."""
        if self._closed:
            return
        self._closed = True
        async with self._keeper.turn():
            await self._keeper.close()

    def discard(self, reason: str = "closed by the host") -> None:
        """:meth:`close` from sync code, at once (not after the runs already called):
        the state is forgotten and later runs answer ``SESSION_EXPIRED`` with ``reason``."""
        self._closed = True
        self._keeper.store.remove(self._keeper.key, reason)

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"{self!r} is closed")


def _spec_name(spec: Mapping[str, JSON]) -> object:
    function = spec.get("function")
    if isinstance(function, Mapping):
        return function.get("name")
    return spec.get("name")


def check_session_id(value: object) -> str:
    """A session id a caller names: 1-128 characters of ``[A-Za-z0-9_.:-]``."""
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= 128
        or not all(c.isascii() and (c.isalnum() or c in "_.:-") for c in value)
    ):
        raise UsageError("a session id is 1-128 characters of letters, digits and _ . : -")
    return value


def open_session(
    scope: SessionScope,
    keepers: SessionKeepers,
    *,
    site: Callable[[], CallSite],
    listeners: Listeners,
    id: str | None,
    ttl_seconds: float,
    create: bool,
) -> Session:
    """``scope.session(...)``: a new session (``id=None``), expiring ``ttl_seconds`` (at
    most 24 h) after its last run; or the session ``id`` of this scope (never another
    scope's) reopened, else :class:`ptc.SessionError` saying why it is gone; with
    ``create=True`` a session that is not there is started empty under that id (one
    session per conversation id)."""
    ttl = check_ttl(ttl_seconds)
    store = keepers.store
    if id is not None:
        id = check_session_id(id)
        key = (scope.path, id)
        if not store.alive(key) and not create:
            why = store.gone(key) or "is unknown in this scope (or expired)"
            why = why if why.startswith("is ") else f"was {why}"
            raise SessionError(f"session {id!r} {why}")
    if id is None or not store.alive((scope.path, id)):
        record = SessionRecord.new(
            id=id or new_session_id(),
            scope_path=scope.path,
            profile=scope.code_options()[1],
            ttl_seconds=ttl,
            now=store.clock(),
        )
        id = store.save(record).id

    def opener(session_id: str) -> Session:
        keeper = keepers.keeper((scope.path, session_id))
        return Session(scope, keeper, site=site, listeners=listeners, opener=opener)

    return opener(id)
