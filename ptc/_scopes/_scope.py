"""Scopes: a tree of layers (tools, restrictions, guards, mode), each with its ``view()``,
its model-facing tool list and its calls.

A :class:`Scope` knows nothing of the runtime above it: what the tree shares (the listener
registry, the approver, the code options, the change counter and the code-mode hooks)
lives in one :class:`~ptc._scopes._scope_tree.ScopeTree` the runtime creates. How ``present_as``'s
options are checked and resolved along the chain is ``_presentation``'s; what a scope asks
of code mode (its SDK, tool search, paused runs) is the half of its API it inherits from
:class:`~ptc._scopes._scope_code.ScopeCodeMode`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, overload

from typing_extensions import Unpack

from worker import Limits, Profile

from .._calls._decorator import ToolOptions, tool_decorator
from .._calls._events import (
    AnyListener,
    DispatchLogListener,
    Disposer,
    Event,
    ExecuteListener,
    OutputListener,
    PostExecuteListener,
    PreExecuteListener,
    ResultListener,
    only_call,
    remove_identical,
)
from .._calls._lifetime import Lifetime
from .._calls._pipeline import Call, CallSite
from .._calls._policy import Guard
from .._calls._scheduler import Scheduler, ToolCall
from .._calls._tools import RUN_CODE, ToolDefinition
from .._errors import ClosedError, ScopeError, UsageError
from .._json import JSON, JSONLike
from .._results import ToolResult
from .._signals import CancelSignal
from ._layers import (
    Discovery,
    DiscoveryMode,
    Layer,
    Mode,
    ModelFormat,
    Restriction,
    ToolView,
    model_spec,
    names_of,
    visible_tools,
)
from ._presentation import declare, resolved_code_options, resolved_discovery
from ._scope_code import ScopeCodeMode
from ._scope_tree import ScopeTree
from ._session_view import DEFAULT_TTL, Session, open_session

__all__ = ("ChangeListener", "Scope", "call_site")

ChangeListener: TypeAlias = "Callable[[Scope], object]"
"""A ``tools/change`` listener: a plain function or a coroutine function of the scope."""


class Scope(ScopeCodeMode):
    """A node in the scope tree. Create with ``runtime.scope(name)`` / ``scope.scope(name)``."""

    def __init__(self, tree: ScopeTree[Scope], name: str, parent: Scope | None) -> None:
        self._tree: ScopeTree[Scope] = tree
        self._name = name
        self._parent = parent
        self._chain: tuple[Scope, ...] = (*parent._chain, self) if parent else (self,)
        self._layer = Layer()
        layers = parent._layers if parent else ()
        self._layers: tuple[Layer, ...] = (*layers, self._layer)  # root first, as _chain
        self._children: dict[str, Scope] = {}
        self._disposers: list[Disposer] = []
        self._closed = False
        self._cache: tuple[tuple[int, int], ToolView, CallSite] | None = None

    def __repr__(self) -> str:
        return f"<Scope {self.path}>"

    # -- the tree -----------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The name this scope was created with (``"root"`` for the root)."""
        return self._name

    @property
    def parent(self) -> Scope | None:
        """The scope this one was created from; ``None`` for the root."""
        return self._parent

    @property
    def path(self) -> str:
        """The names from the root down, joined by ``/`` (``"root/researcher"``)."""
        return "/".join(s._name for s in self._chain)

    @property
    def lineage(self) -> tuple[Scope, ...]:
        """This scope and its ancestors, root first: the scopes whose changes change what
        this one sees (its ``tools/change`` listeners see them all)."""
        return self._chain

    @property
    def children(self) -> tuple[Scope, ...]:
        """The open child scopes, in creation order."""
        return tuple(self._children.values())

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ended this scope (the root is emptied, never closed)."""
        return self._closed

    @property
    def lifetime(self) -> Lifetime:
        """The runtime's background tasks and close hooks (for integrations)."""
        return self._tree.lifetime

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group changes: ``tools/change`` is emitted once per changed scope when the
        block ends, not once per ``register``/dispose inside it."""
        with self._tree.batch():
            yield

    def scope(self, name: str) -> Scope:
        """Create a child scope (a live sibling with the same name is an error)."""
        self._check_open()
        if not isinstance(name, str) or not name:
            raise ScopeError("a scope name must be a non-empty string")
        if name in self._children:
            raise ScopeError(f"{self!r} already has an open child scope named {name!r}")
        child = Scope(self._tree, name, self)
        self._children[name] = child
        return child

    def close(self) -> None:
        """Dispose everything this scope registered, close its children, forget its mode.

        The root stays usable (it is emptied); any other scope is closed for good.
        """
        if self._closed:
            return
        for child in list(self._children.values()):
            child.close()
        for dispose in reversed(self._disposers):
            dispose()
        self._tree.listeners.remove_scope(self)
        self._disposers.clear()
        self._layer.clear_options()
        if self._parent is not None:
            self._parent._children.pop(self._name, None)
            self._closed = True
        self._changed()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"{self!r} is closed")

    def _changed(self) -> None:
        self._tree.changed(self)

    def _track(self, undo: Callable[[], None]) -> Disposer:
        def run() -> None:
            undo()
            self._changed()

        disposer = Disposer(run)
        self._disposers.append(disposer)
        return disposer

    # -- registration -------------------------------------------------------------------

    def register(self, definition: ToolDefinition) -> Disposer:
        """Add a tool to this scope's layer; return its disposer."""
        self._check_open()
        if not isinstance(definition, ToolDefinition):
            raise UsageError("register() takes a ToolDefinition (see define_tool / @tool)")
        name = definition.name
        tools = self._layer.tools
        if name == RUN_CODE:
            raise ScopeError(f"`{RUN_CODE}` is reserved and cannot be registered")
        if name in tools:
            raise ScopeError(f"tool {name!r} is already registered in {self!r}")
        tools[name] = definition

        def undo() -> None:
            if tools.get(name) is definition:
                del tools[name]

        disposer = self._track(undo)
        self._changed()
        return disposer

    @overload
    def tool(self, fn: Callable[..., Any], /, **options: Unpack[ToolOptions]) -> ToolDefinition: ...

    @overload
    def tool(
        self, /, **options: Unpack[ToolOptions]
    ) -> Callable[[Callable[..., Any]], ToolDefinition]: ...

    def tool(
        self, fn: Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]
    ) -> ToolDefinition | Callable[[Callable[..., Any]], ToolDefinition]:
        """``@scope.tool`` / ``@scope.tool(...)``: ``ptc.tool`` plus ``register``."""
        return tool_decorator(fn, options, self.register)

    def restrict(
        self, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None
    ) -> Disposer:
        """Filter inherited tools (allow lists intersect, deny lists union). Not on root."""
        self._check_open()
        if self._parent is None:
            raise ScopeError("restrict() is for child scopes; the root has nothing to inherit")
        if allow is None and deny is None:
            raise ScopeError("restrict() needs allow=, deny= or both")
        allowed = None if allow is None else names_of(allow, "allow")
        denied = names_of(deny or (), "deny")
        named = (allowed or frozenset()) | denied
        if RUN_CODE in named:
            raise ScopeError(f"`{RUN_CODE}` cannot be restricted")
        restrictable = self.view().restrictable_names
        unknown = sorted(named - restrictable)
        if unknown:
            raise ScopeError(
                f"cannot restrict {unknown}: not inherited by {self!r}; restrictable names:"
                f" {sorted(restrictable)}"
            )
        restriction = Restriction(allowed, denied)
        restrictions = self._layer.restrictions
        restrictions.append(restriction)
        disposer = self._track(lambda: remove_identical(restrictions, restriction))
        self._changed()
        return disposer

    def guard(self, fn: Guard) -> Disposer:
        """Add a deny-only guard ``fn(execution) -> str | None`` (a string denies)."""
        self._check_open()
        if not callable(fn):
            raise UsageError("guard() takes a callable")
        guards = self._layer.guards
        guards.append(fn)
        disposer = self._track(lambda: remove_identical(guards, fn))
        self._changed()
        return disposer

    @overload
    def on(self, event: Literal["tools/pre-execute"], listener: PreExecuteListener) -> Disposer: ...
    @overload
    def on(self, event: Literal["tools/execute"], listener: ExecuteListener) -> Disposer: ...
    @overload
    def on(
        self, event: Literal["tools/post-execute"], listener: PostExecuteListener
    ) -> Disposer: ...
    @overload
    def on(
        self, event: Literal["tools/ptc-dispatch-log"], listener: DispatchLogListener
    ) -> Disposer: ...
    @overload
    def on(self, event: Literal["tools/result"], listener: ResultListener) -> Disposer: ...
    @overload
    def on(self, event: Literal["tools/change"], listener: ChangeListener) -> Disposer: ...
    @overload
    def on(self, event: Literal["code/output"], listener: OutputListener) -> Disposer: ...

    def on(self, event: Event, listener: AnyListener) -> Disposer:
        """Listen to ``event`` for this scope and its descendants (see ``ToolRuntime.on``)."""
        return self._tree.listeners.add(event, listener, self)

    def on_output(self, call_id: str, listener: OutputListener) -> Disposer:
        """``on("code/output", listener)`` for one ``run_code`` call: ``listener`` gets the
        chunks of the run whose call id is ``call_id``, as it prints."""
        return self.on("code/output", only_call(call_id, listener))

    def present_as(
        self,
        mode: Mode,
        *,
        profile: Profile | None = None,
        limits: Limits | None = None,
        discovery: DiscoveryMode | None = None,
        inline_tokens: int | None = None,
        pin: Iterable[str] | None = None,
    ) -> None:
        """Declare how this scope and its subtree present their tools to the model.

        ``mode``: ``"native"`` (the tools themselves), ``"code"`` (only ``run_code``: the
        tools are called from its programs; a direct call of one is ``UNKNOWN_TOOL``) or
        ``"both"`` (the tools and ``run_code``). Once per scope (a second call raises
        ``ScopeError``; not on the root: ``ToolRuntime(default_mode=...)``); the nearest
        declaration wins. ``profile`` and ``limits``: the code runs'; ``discovery``
        (``"auto"`` by default), ``inline_tokens`` (6000) and ``pin``: how ``run_code``'s
        description shows the tools (see :class:`ptc.Discovery`). Each option is inherited
        unless declared nearer. Returns nothing; a ``tools/change`` follows."""
        self._check_open()
        if self._parent is None:
            raise ScopeError("present_as() is per scope; set ToolRuntime(default_mode=...)")
        declare(
            self._layer,
            self,
            mode,
            profile=profile,
            limits=limits,
            discovery=discovery,
            inline_tokens=inline_tokens,
            pin=pin,
        )
        self._changed()

    # -- reading ------------------------------------------------------------------------

    @property
    def declared_mode(self) -> Mode | None:
        """The mode this scope itself declared with ``present_as`` (``None``: inherited)."""
        return self._layer.mode

    def code_options(self) -> tuple[Mode, Profile, Limits]:
        """``(mode, profile, limits)``, each resolved nearest declaration first."""
        tree = self._tree
        return resolved_code_options(self._layers, (tree.default_mode, tree.profile, tree.limits))

    def discovery(self) -> Discovery:
        """How ``run_code``'s description shows the tools, each option nearest first."""
        return resolved_discovery(self._layers)

    def view(self) -> ToolView:
        """The four-step visibility algorithm (cached until the next change)."""
        return self._resolved()[0]

    def _resolved(self) -> tuple[ToolView, CallSite]:
        tree = self._tree
        code_mode = tree.code_mode
        version = (tree.version, code_mode.revision if code_mode is not None else 0)
        cached = self._cache
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        visible, restrictable = visible_tools(self._layers)
        mode = self.code_options()[0]
        if mode != "native":
            # Code mode sees the native tools only: run_code's SDK is built from them.
            natives = MappingProxyType(dict(visible))
            visible[RUN_CODE] = tree.code_mode_hooks().run_code_tool(self, natives)
        frozen = MappingProxyType(visible)
        view = ToolView(
            visible=frozen,
            known_names=restrictable | frozenset(self._layer.tools),
            restrictable_names=restrictable,
        )
        site = CallSite(
            scope=self,
            chain=self._chain,
            visible=frozen,
            guards=tuple(g for layer in self._layers for g in layer.guards),
            collapse=mode == "code",
            registry=tree.listeners,
            approver=tree.approver,
        )
        self._cache = (version, view, site)
        return view, site

    def model_tools(
        self, format: ModelFormat = "raw", *, strict: bool = False
    ) -> list[dict[str, JSON]]:
        """The tool specs for the model: name, description and input schema only.

        ``strict=True`` (``format="openai"``): OpenAI strict-mode schemas, every property
        required and the optional ones nullable; a ``null`` the model sends for an optional
        parameter then means "not sent" (the pipeline drops it where the tool's own schema
        does not allow ``null``).

        In code or both mode ``run_code``'s description embeds the SDK: built in the
        background after a change, and built here (blocking) if it is not ready yet —
        ``await prepare()`` first to never block.
        """
        mode = self.code_options()[0]
        if mode != "native":
            self._tree.code_mode_hooks().ensure_ready(self)
        visible = self.view().visible
        if mode == "code":
            visible = {k: v for k, v in visible.items() if k == RUN_CODE}
        return [model_spec(d, format, strict=strict) for d in visible.values()]

    # -- calling ------------------------------------------------------------------------

    async def call(
        self,
        name: str,
        arguments: Mapping[str, JSONLike],
        *,
        call_id: str | None = None,
        signal: CancelSignal | None = None,
    ) -> ToolResult:
        """Run one call through the pipeline. Never raises for policy or tool failures."""
        call = Call.create(self._resolved()[1], name, arguments, call_id=call_id, signal=signal)
        return await call.run()

    async def call_many(
        self, calls: Sequence[ToolCall], *, signal: CancelSignal | None = None
    ) -> list[ToolResult]:
        """Run a batch under the scheduler's rules; results in submission order."""
        scheduler = Scheduler(self._tree.max_parallel_calls)
        return await scheduler.run(lambda _: self._resolved()[1], calls, signal=signal)

    async def run_code(
        self,
        code: str,
        *,
        description: str | None = None,
        call_id: str | None = None,
        signal: CancelSignal | None = None,
    ) -> ToolResult:
        """Run ``code`` as a model's ``run_code`` call would: ``call("run_code", {"code":
        code, "description": description?})``. Never raises: the result's value is
        ``{result, stdout}``, a failed run is ``CODE_RUN_FAILED`` (its kind in the message),
        and a scope whose mode is ``native`` answers ``UNKNOWN_TOOL`` (declare
        ``present_as("code")`` or ``"both"`` first)."""
        arguments: dict[str, JSON] = {"code": code}
        if description:
            arguments["description"] = description
        return await self.call(RUN_CODE, arguments, call_id=call_id, signal=signal)

    def session(
        self,
        id: str | None = None,
        *,
        ttl_seconds: float = DEFAULT_TTL,
        create: bool = False,
    ) -> Session:
        """A new :class:`ptc.Session` (``run_code`` keeping globals and files between runs),
        or ``id`` of this scope reopened (``create=True``: started if gone); ``open_session``."""
        tree, site = self._tree, lambda: self._resolved()[1]
        return open_session(self, tree.sessions, site=site, listeners=tree.listeners, id=id,
                            ttl_seconds=ttl_seconds, create=create)  # fmt: skip


def call_site(scope: Scope) -> CallSite:
    """The scope's current :class:`CallSite` (code mode dispatches nested calls with it,
    so visibility is re-checked at dispatch time)."""
    return scope._resolved()[1]
