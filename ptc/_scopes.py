"""Scopes: one layer each (tools, restrictions, guards, mode) and the four-step ``view()``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ._events import Disposer, Listener
from ._json import JSON
from ._results import ToolResult
from ._signals import CancelSignal
from ._tools import RESERVED_NAME, ExecutionToken, ToolDefinition, ToolExecution

if TYPE_CHECKING:
    from worker import Limits

    from ._runtime import ToolRuntime
    from ._scheduler import ToolCall

Mode: TypeAlias = Literal["native", "code", "both"]
MODES: tuple[Mode, ...] = ("native", "code", "both")
ModelFormat: TypeAlias = Literal["raw", "openai", "anthropic", "mcp"]
Guard: TypeAlias = Callable[[ToolExecution], "str | None"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolView:
    """What a scope sees: ``visible`` (ordered name -> definition) and the names it may name."""

    visible: Mapping[str, ToolDefinition]
    known_names: frozenset[str]
    restrictable_names: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Restriction:
    allow: frozenset[str] | None
    deny: frozenset[str]

    def admits(self, name: str) -> bool:
        return (self.allow is None or name in self.allow) and name not in self.deny


class Scope:
    """A node in the scope tree. Create with ``runtime.scope(name)`` / ``scope.scope(name)``."""

    def __init__(self, runtime: ToolRuntime, name: str, parent: Scope | None) -> None:
        self.runtime = runtime
        self.name = name
        self.parent = parent
        self._chain: tuple[Scope, ...] = (*parent._chain, self) if parent else (self,)
        self._tools: dict[str, ToolDefinition] = {}
        self._restrictions: list[_Restriction] = []
        self._guards: list[Guard] = []
        self._mode: Mode | None = None
        self._profile: str | None = None
        self._limits: Limits | None = None
        self._children: dict[str, Scope] = {}
        self._disposers: list[Disposer] = []
        self._closed = False
        self._view: tuple[int, ToolView] | None = None

    def __repr__(self) -> str:
        return f"<Scope {'/'.join(s.name for s in self._chain)}>"

    # -- tree -------------------------------------------------------------------------

    def scope(self, name: str) -> Scope:
        """Create a child scope (a live sibling with the same name is an error)."""
        self._check_open()
        if not isinstance(name, str) or not name:
            raise ValueError("a scope name must be a non-empty string")
        if name in self._children:
            raise ValueError(f"{self!r} already has an open child scope named {name!r}")
        child = Scope(self.runtime, name, self)
        self._children[name] = child
        return child

    def close(self) -> None:
        """Dispose everything this scope registered, close its children, forget its mode."""
        if self._closed:
            return
        for child in list(self._children.values()):
            child.close()
        for dispose in reversed(self._disposers):
            dispose()
        for undo in self.runtime._listeners.scoped_to(self):
            undo()
        self._disposers.clear()
        self._mode = self._profile = self._limits = None
        if self.parent is not None:
            self.parent._children.pop(self.name, None)
            self._closed = True
        self._changed()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")

    def _changed(self) -> None:
        self.runtime._changed(self)

    def _track(self, undo: Callable[[], None]) -> Disposer:
        def run() -> None:
            undo()
            self._changed()

        disposer = Disposer(run)
        self._disposers.append(disposer)
        return disposer

    # -- registration -----------------------------------------------------------------

    def register(self, definition: ToolDefinition) -> Disposer:
        """Add a tool to this scope's layer; return its disposer."""
        self._check_open()
        if not isinstance(definition, ToolDefinition):
            raise TypeError("register() takes a ToolDefinition (see define_tool / @tool)")
        name = definition.name
        if name == RESERVED_NAME:
            raise ValueError(f"`{RESERVED_NAME}` is reserved and cannot be registered")
        if name in self._tools:
            raise ValueError(f"tool {name!r} is already registered in {self!r}")
        self._tools[name] = definition

        def undo() -> None:
            if self._tools.get(name) is definition:
                del self._tools[name]

        disposer = self._track(undo)
        self._changed()
        return disposer

    def tool(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """``@scope.tool`` / ``@scope.tool(...)``: ``ptc.tool`` plus ``register``."""
        from ._decorator import tool as make_tool

        def build(func: Callable[..., Any]) -> ToolDefinition:
            definition = make_tool(**options)(func)
            self.register(definition)
            return definition

        return build(fn) if fn is not None else build

    def restrict(
        self, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None
    ) -> Disposer:
        """Filter inherited tools (allow lists intersect, deny lists union). Not on root."""
        self._check_open()
        if self.parent is None:
            raise ValueError("restrict() is for child scopes; the root has nothing to inherit")
        if allow is None and deny is None:
            raise ValueError("restrict() needs allow=, deny= or both")
        allowed = None if allow is None else frozenset(_names(allow, "allow"))
        denied = frozenset(_names(deny or (), "deny"))
        named = (allowed or frozenset()) | denied
        if RESERVED_NAME in named:
            raise ValueError(f"`{RESERVED_NAME}` cannot be restricted")
        restrictable = self.view().restrictable_names
        unknown = sorted(named - restrictable)
        if unknown:
            raise ValueError(
                f"cannot restrict {unknown}: not inherited by {self!r}; restrictable names:"
                f" {sorted(restrictable)}"
            )
        restriction = _Restriction(allowed, denied)
        self._restrictions.append(restriction)
        disposer = self._track(lambda: _remove(self._restrictions, restriction))
        self._changed()
        return disposer

    def guard(self, fn: Guard) -> Disposer:
        """Add a deny-only guard ``fn(execution) -> str | None`` (a string denies)."""
        self._check_open()
        if not callable(fn):
            raise TypeError("guard() takes a callable")
        self._guards.append(fn)
        disposer = self._track(lambda: _remove(self._guards, fn))
        self._changed()
        return disposer

    def on(self, event: str, listener: Listener) -> Disposer:
        """``runtime.on(event, listener, scope=self)``."""
        return self.runtime.on(event, listener, scope=self)

    def present_as(
        self, mode: Mode, *, profile: str | None = None, limits: Limits | None = None
    ) -> None:
        """Declare the presentation mode (and code options) for this scope and its subtree."""
        self._check_open()
        if self.parent is None:
            raise ValueError("present_as() is per scope; set ToolRuntime(default_mode=...)")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if self._mode is not None:
            raise ValueError(f"{self!r} already presents as {self._mode!r}")
        self.runtime._check_code_options(profile, limits)
        self._mode, self._profile, self._limits = mode, profile, limits
        self._changed()

    # -- reading ----------------------------------------------------------------------

    def code_options(self) -> tuple[Mode, str, Limits]:
        """``(mode, profile, limits)``, each resolved nearest declaration first."""
        runtime = self.runtime
        mode: Mode | None = None
        profile: str | None = None
        limits: Limits | None = None
        for layer in reversed(self._chain):
            mode = mode or layer._mode
            profile = profile or layer._profile
            limits = limits or layer._limits
        return (mode or runtime.default_mode, profile or runtime.profile, limits or runtime.limits)

    def view(self) -> ToolView:
        """The four-step visibility algorithm (cached until the next change)."""
        version = self.runtime._version
        cached = self._view
        if cached is not None and cached[0] == version:
            return cached[1]
        inherited: dict[str, ToolDefinition] = {}
        for layer in self._chain[:-1]:
            inherited.update(layer._tools)
        restrictions = [r for layer in self._chain for r in layer._restrictions]
        visible = {
            name: d for name, d in inherited.items() if all(r.admits(name) for r in restrictions)
        }
        visible.update(self._tools)
        if self.code_options()[0] != "native":
            # Code mode sees the native tools only: run_code's SDK is built from them.
            native = MappingProxyType(dict(visible))
            visible[RESERVED_NAME] = self.runtime._code_mode.run_code_tool(self, native)
        restrictable = frozenset(inherited)
        view = ToolView(
            visible=MappingProxyType(visible),
            known_names=restrictable | frozenset(self._tools),
            restrictable_names=restrictable,
        )
        self._view = (version, view)
        return view

    def model_tools(self, format: ModelFormat = "raw") -> list[dict[str, JSON]]:
        """The tool specs for the model: name, description and input schema only."""
        visible = self.view().visible
        if self.code_options()[0] == "code":
            visible = {k: v for k, v in visible.items() if k == RESERVED_NAME}
        return [_spec(d, format) for d in visible.values()]

    def sdk(self) -> str:
        """The SDK text for this scope's visible tools (from code mode)."""
        return self.runtime._code_mode.sdk(self)

    # -- calling ----------------------------------------------------------------------

    async def call(
        self,
        name: str,
        arguments: Mapping[str, JSON],
        *,
        call_id: str | None = None,
        signal: CancelSignal | None = None,
    ) -> ToolResult:
        """Run one call through the pipeline. Never raises for policy or tool failures."""
        return await self._call(name, arguments, call_id=call_id, signal=signal)

    async def _call(
        self,
        name: str,
        arguments: object,
        *,
        call_id: str | None = None,
        root_call_id: str | None = None,
        parent: ExecutionToken | None = None,
        signal: CancelSignal | None = None,
    ) -> ToolResult:
        from ._pipeline import run_call

        return await run_call(
            self,
            name,
            arguments,
            call_id=call_id,
            root_call_id=root_call_id,
            parent=parent,
            signal=signal,
        )

    async def call_many(
        self, calls: Sequence[ToolCall], *, signal: CancelSignal | None = None
    ) -> list[ToolResult]:
        """Run a batch under the scheduler's rules; results in submission order."""
        from ._scheduler import Scheduler

        return await Scheduler(self.runtime.max_parallel_calls).run(self, calls, signal=signal)

    async def run_code(
        self,
        code: str,
        *,
        description: str | None = None,
        call_id: str | None = None,
        signal: CancelSignal | None = None,
    ) -> ToolResult:
        """``call("run_code", {"code": code, "description": description?})``."""
        arguments: dict[str, JSON] = {"code": code}
        if description:
            arguments["description"] = description
        return await self.call(RESERVED_NAME, arguments, call_id=call_id, signal=signal)


def _names(names: Iterable[str], label: str) -> list[str]:
    if isinstance(names, str):
        raise TypeError(f"{label}= takes a list of names, not a string")
    out = list(names)
    if not all(isinstance(n, str) for n in out):
        raise TypeError(f"{label}= takes tool names (strings)")
    return out


def _remove(items: list[Any], item: object) -> None:
    for index, existing in enumerate(items):
        if existing is item:
            del items[index]
            return


def _spec(definition: ToolDefinition, format: ModelFormat) -> dict[str, JSON]:
    name, description = definition.name, definition.description
    schema = dict(definition.input_schema)
    if format in ("raw", "anthropic"):
        return {"name": name, "description": description, "input_schema": schema}
    if format == "openai":
        fn = {"name": name, "description": description, "parameters": schema}
        return {"type": "function", "function": fn}
    if format == "mcp":
        return {"name": name, "description": description, "inputSchema": schema}
    raise ValueError(f"format must be raw, openai, anthropic or mcp, got {format!r}")
