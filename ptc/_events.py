"""Listener registry, disposers and the waterfall / emit runners.

Waterfall listeners are ``async def listener(payload, next)`` and run in registration
order: the first registered decides first and may delegate with ``await next()``. Emit
listeners (``tools/result``, ``tools/change``) may be plain functions or coroutines; their
errors are logged under ``ptc`` and never change anything.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:
    from ._scopes import Scope

logger = logging.getLogger("ptc")

PRE_EXECUTE: Final = "tools/pre-execute"
EXECUTE: Final = "tools/execute"
POST_EXECUTE: Final = "tools/post-execute"
DISPATCH_LOG: Final = "tools/ptc-dispatch-log"
RESULT: Final = "tools/result"
CHANGE: Final = "tools/change"
WATERFALLS: Final = (PRE_EXECUTE, EXECUTE, POST_EXECUTE, DISPATCH_LOG)
EVENTS: Final = (*WATERFALLS, RESULT, CHANGE)

T = TypeVar("T")
Listener = Callable[..., Any]


class Disposer:
    """Undo one registration. Calling it again does nothing."""

    __slots__ = ("_undo",)

    def __init__(self, undo: Callable[[], None]) -> None:
        self._undo: Callable[[], None] | None = undo

    @property
    def disposed(self) -> bool:
        return self._undo is None

    def __call__(self) -> None:
        undo, self._undo = self._undo, None
        if undo is not None:
            undo()


class ListenerError(Exception):
    """A listener raised or returned an invalid decision (the pipeline fails closed)."""


@dataclass(frozen=True, slots=True, eq=False)
class _Entry:
    listener: Listener
    scope: Scope | None


def describe(listener: object) -> str:
    """A short name for messages: the listener's qualified name."""
    return getattr(listener, "__qualname__", None) or repr(listener)


class Listeners:
    """Listeners by event; a scoped one sees only its scope's subtree."""

    def __init__(self) -> None:
        self._entries: dict[str, list[_Entry]] = {event: [] for event in EVENTS}

    def add(self, event: str, listener: Listener, scope: Scope | None) -> Callable[[], None]:
        """Register and return the raw undo function."""
        if event not in self._entries:
            raise ValueError(f"unknown event {event!r}; expected one of {', '.join(EVENTS)}")
        if not callable(listener):
            raise TypeError(f"listener for {event!r} must be callable")
        entry = _Entry(listener, scope)
        # Copy-on-write so a running waterfall keeps the list it started with.
        self._entries[event] = [*self._entries[event], entry]

        def undo() -> None:
            self._entries[event] = [e for e in self._entries[event] if e is not entry]

        return undo

    def for_scope(self, event: str, chain: Sequence[Scope]) -> list[Listener]:
        """Listeners that see an event of the scope whose root-first chain is ``chain``."""
        entries = self._entries[event]
        if not entries:
            return []
        return [e.listener for e in entries if e.scope is None or any(e.scope is s for s in chain)]

    def scoped_to(self, scope: Scope) -> list[Callable[[], None]]:
        """Undo functions for every listener registered for exactly ``scope``."""
        return [
            self._remover(event, entry)
            for event, entries in self._entries.items()
            for entry in entries
            if entry.scope is scope
        ]

    def _remover(self, event: str, entry: _Entry) -> Callable[[], None]:
        def undo() -> None:
            self._entries[event] = [e for e in self._entries[event] if e is not entry]

        return undo


async def run_waterfall(
    listeners: Sequence[Listener],
    payload: object,
    terminal: Callable[[], Awaitable[T]],
    valid: Callable[[object], bool],
) -> T:
    """Run ``listeners`` as a chain around ``terminal``; raise :class:`ListenerError` on failure."""

    async def step(index: int) -> Any:
        if index == len(listeners):
            return await terminal()
        listener = listeners[index]
        try:
            out = await listener(payload, lambda: step(index + 1))
        except ListenerError:
            raise
        except Exception as exc:
            raise ListenerError(f"listener {describe(listener)} raised {exc!r}") from exc
        if not valid(out):
            raise ListenerError(f"listener {describe(listener)} returned invalid {out!r}")
        return out

    result: T = await step(0)
    return result


async def emit(listeners: Sequence[Listener], payload: object, event: str) -> None:
    """Call every listener in order; log (never raise) their errors."""
    for listener in listeners:
        try:
            out = listener(payload)
            if inspect.isawaitable(out):
                await out
        except Exception:
            logger.exception("%s listener %s failed", event, describe(listener))
