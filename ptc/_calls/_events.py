"""Events, listener types, the listener registry, disposers and the one waterfall runner.

Waterfall listeners are ``async def listener(payload, next)`` and run in registration
order: the first registered decides first and may delegate with ``await next()``. Emit
listeners (``tools/result``, ``tools/change``) may be plain functions or coroutines; their
errors are logged under ``ptc`` and never change anything.

=========================  ==========================  ======================================
event                      payload                     ``await next()`` returns / listener returns
=========================  ==========================  ======================================
``tools/pre-execute``      :class:`ToolExecution`      a decision (``Allow Deny Cancel Ask``)
``tools/execute``          :class:`ToolExecution`      a :class:`ToolResult`; ``next(signal=s)``
``tools/post-execute``     :class:`PostExecute`        a decision (``Accept Block``)
``tools/ptc-dispatch-log`` :class:`DispatchLogEntry`   the content to log
``tools/result``           :class:`ToolResult`         (emit)
``tools/change``           the changed scope           (emit)
``code/output``            ``{call_id, stream, text}`` (emit) a chunk of a running program's output
=========================  ==========================  ======================================
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeAlias, TypeVar, cast

from .._errors import ConfigurationError, PtcError, UsageError
from .._results import ContentBlock, ToolResult
from .._signals import CancelSignal
from ._decisions import DispatchLogEntry, PostDecision, PostExecute, PreDecision
from ._tools import ToolExecution

__all__ = (
    "CHANGE",
    "DISPATCH_LOG",
    "EVENTS",
    "EXECUTE",
    "POST_EXECUTE",
    "PRE_EXECUTE",
    "RESULT",
    "DispatchLogListener",
    "Disposer",
    "Event",
    "ExecuteListener",
    "ExecuteNext",
    "ListenerError",
    "Listeners",
    "OUTPUT",
    "OutputListener",
    "PostExecuteListener",
    "PreExecuteListener",
    "ResultListener",
    "describe",
    "remove_identical",
    "emit",
    "logger",
    "only_call",
    "run_waterfall",
)

logger = logging.getLogger("ptc")

Event: TypeAlias = Literal[
    "tools/pre-execute",
    "tools/execute",
    "tools/post-execute",
    "tools/ptc-dispatch-log",
    "tools/result",
    "tools/change",
    "code/output",
]
PRE_EXECUTE: Final = "tools/pre-execute"
EXECUTE: Final = "tools/execute"
POST_EXECUTE: Final = "tools/post-execute"
DISPATCH_LOG: Final = "tools/ptc-dispatch-log"
RESULT: Final = "tools/result"
CHANGE: Final = "tools/change"
OUTPUT: Final = "code/output"
EVENTS: Final[tuple[Event, ...]] = (
    PRE_EXECUTE,
    EXECUTE,
    POST_EXECUTE,
    DISPATCH_LOG,
    RESULT,
    CHANGE,
    OUTPUT,
)


class ExecuteNext(Protocol):
    """``next`` of an execute listener: the only thing a wrapper may change is the signal."""

    def __call__(self, *, signal: CancelSignal | None = None) -> Awaitable[ToolResult]: ...


PreExecuteListener: TypeAlias = Callable[
    [ToolExecution, Callable[[], Awaitable[PreDecision]]], Awaitable[PreDecision]
]
ExecuteListener: TypeAlias = Callable[[ToolExecution, ExecuteNext], Awaitable[ToolResult]]
PostExecuteListener: TypeAlias = Callable[
    [PostExecute, Callable[[], Awaitable[PostDecision]]], Awaitable[PostDecision]
]
DispatchLogListener: TypeAlias = Callable[
    [DispatchLogEntry, Callable[[], Awaitable[Sequence[ContentBlock]]]],
    Awaitable[Sequence[ContentBlock]],
]
ResultListener: TypeAlias = Callable[[ToolResult], object]
"""A plain function or a coroutine function; awaited before ``call()`` returns."""
OutputListener: TypeAlias = Callable[[Mapping[str, str]], object]
"""A ``code/output`` listener: gets ``{"call_id", "stream", "text"}`` for each chunk a
running program prints (``stream`` is ``"stdout"``: stdout and stderr interleaved); a plain
function or a coroutine function, called in order, all before ``run_code`` returns."""

# The registry stores every kind alike; the typed faces are ``runtime.on``/``scope.on``.
AnyListener: TypeAlias = Callable[..., Any]

P = TypeVar("P")
T = TypeVar("T")


class Disposer:
    """Undo one registration. Calling it again does nothing."""

    __slots__ = ("_undo",)

    def __init__(self, undo: Callable[[], None]) -> None:
        self._undo: Callable[[], None] | None = undo

    @property
    def disposed(self) -> bool:
        """Whether it was called: the registration is undone (calling it again does nothing)."""
        return self._undo is None

    def __call__(self) -> None:
        undo, self._undo = self._undo, None
        if undo is not None:
            undo()


def only_call(call_id: str, listener: OutputListener) -> OutputListener:
    """``listener`` for the ``code/output`` chunks of the ``run_code`` call ``call_id``
    only (what ``scope.on_output`` registers)."""

    def of_the_call(chunk: Mapping[str, str]) -> object:
        return listener(chunk) if chunk["call_id"] == call_id else None

    return of_the_call


def remove_identical(items: list[Any], item: object) -> None:
    """Remove ``item`` itself (not an equal one) from ``items``, if it is there: what a
    :class:`Disposer` of a list entry undoes."""
    for index, existing in enumerate(items):
        if existing is item:
            del items[index]
            return


class ListenerError(PtcError):
    """A listener raised or returned an invalid decision (the pipeline fails closed).

    Never reaches a caller: the pipeline turns it into the result its stage fails to.
    """


@dataclass(frozen=True, slots=True, eq=False)
class _Entry:
    listener: AnyListener
    scope: object | None


def describe(listener: object) -> str:
    """A short name for messages: the listener's qualified name."""
    return getattr(listener, "__qualname__", None) or repr(listener)


class Listeners:
    """Listeners by event; a scoped one sees only its scope's subtree.

    Scopes are compared by identity only, so this layer needs nothing of them.
    """

    def __init__(self) -> None:
        self._entries: dict[str, list[_Entry]] = {event: [] for event in EVENTS}

    def add(self, event: str, listener: AnyListener, scope: object | None) -> Disposer:
        """Register ``listener``; the disposer removes it."""
        if event not in self._entries:
            raise ConfigurationError(
                f"unknown event {event!r}; expected one of {', '.join(EVENTS)}"
            )
        if not callable(listener):
            raise UsageError(f"listener for {event!r} must be callable")
        entry = _Entry(listener, scope)
        # Copy-on-write so a running waterfall keeps the list it started with.
        self._entries[event] = [*self._entries[event], entry]
        return Disposer(lambda: self._remove(event, entry))

    def for_chain(self, event: Event, chain: Sequence[object]) -> list[AnyListener]:
        """Listeners that see an event of the scope whose root-first chain is ``chain``."""
        entries = self._entries[event]
        if not entries:
            return []
        return [e.listener for e in entries if e.scope is None or any(e.scope is s for s in chain)]

    def remove_scope(self, scope: object) -> None:
        """Forget every listener registered for exactly ``scope``."""
        for event, entries in self._entries.items():
            if any(e.scope is scope for e in entries):
                self._entries[event] = [e for e in entries if e.scope is not scope]

    def _remove(self, event: str, entry: _Entry) -> None:
        self._entries[event] = [e for e in self._entries[event] if e is not entry]


async def run_waterfall(
    listeners: Sequence[AnyListener],
    payload: P,
    terminal: Callable[[P], Awaitable[T]],
    valid: Callable[[object], bool],
    *,
    amend: Callable[[P, dict[str, object]], P] | None = None,
) -> T:
    """Run ``listeners`` as a chain around ``terminal``; raise :class:`ListenerError` when
    one raises or returns something ``valid`` rejects.

    ``next()`` hands the payload on unchanged; ``next(**changes)`` (only where ``amend``
    is given) hands on ``amend(payload, changes)``, which raises for a change it refuses.
    """

    async def step(index: int, current: P) -> T:
        if index == len(listeners):
            return await terminal(current)
        listener = listeners[index]

        def next_(**changes: object) -> Awaitable[T]:
            if not changes:
                return step(index + 1, current)
            if amend is None:
                raise UsageError("next() takes no arguments for this event")
            return step(index + 1, amend(current, changes))

        try:
            out = await listener(current, next_)
        except ListenerError:
            raise
        except Exception as exc:
            raise ListenerError(f"listener {describe(listener)} raised {exc!r}") from exc
        if not valid(out):
            raise ListenerError(f"listener {describe(listener)} returned invalid {out!r}")
        return cast(T, out)

    return await step(0, payload)


async def emit(listeners: Sequence[AnyListener], payload: object, event: Event) -> None:
    """Call every listener in order; log (never raise) their errors."""
    for listener in listeners:
        try:
            out = listener(payload)
            if inspect.isawaitable(out):
                await out
        except Exception:
            logger.exception("%s listener %s failed", event, describe(listener))
