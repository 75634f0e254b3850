"""Cancellation signals: the caller fires one, the pipeline and bodies observe it.

A :class:`CancelSignal` is a one-shot flag with a reason. :func:`fuse` makes a signal that
fires as soon as any of its sources fires, which is how the pipeline keeps the caller's
signal attached to whatever signal an execute wrapper substitutes.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

__all__ = ["CancelSignal", "fuse", "on_cancel"]


class CancelSignal:
    """A cancellation request the caller fires: ``.cancel(reason=None)``, ``await .wait()``.

    Fire it from the event loop's thread (a sync tool body running in a worker thread
    may only *read* ``cancelled``).
    """

    __slots__ = ("_callbacks", "_cancelled", "_reason")

    def __init__(self) -> None:
        self._cancelled = False
        self._reason: object = None
        self._callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called (it stays ``True``)."""
        return self._cancelled

    @property
    def reason(self) -> object:
        """What :meth:`cancel` was given (``None`` before, or when it was given none)."""
        return self._reason

    def cancel(self, reason: object = None) -> None:
        """Fire the signal (the first reason sticks; later calls do nothing)."""
        if self._cancelled:
            return
        self._cancelled = True
        self._reason = reason
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    async def wait(self) -> None:
        """Return once the signal has fired."""
        if self._cancelled:
            return
        event = anyio.Event()
        remove = self._on_cancel(event.set)
        try:
            await event.wait()
        finally:
            remove()

    def _on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` when the signal fires (at once if it already has); return a remover."""
        if self._cancelled:
            callback()
            return _noop
        self._callbacks.append(callback)

        def remove() -> None:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

        return remove

    def __repr__(self) -> str:
        state = f"cancelled, reason={self._reason!r}" if self._cancelled else "pending"
        return f"<CancelSignal {state}>"


def _noop() -> None:
    pass


def on_cancel(signal: CancelSignal, callback: Callable[[], None]) -> Callable[[], None]:
    """Run ``callback`` when ``signal`` fires (at once if it has); return a remover.

    For ptc's own stages (a body's cancel scope, a pending ask); hosts use ``wait()``.
    """
    return signal._on_cancel(callback)


def _relay(source: CancelSignal, target: CancelSignal) -> Callable[[], None]:
    return lambda: target.cancel(source.reason)


def fuse(*sources: CancelSignal | None) -> tuple[CancelSignal, Callable[[], None]]:
    """Return a signal that fires when any source fires, and a detach function.

    The fused signal takes the reason of the first source that fires. Call the detach
    function once the fused signal is no longer needed so long-lived sources do not
    accumulate callbacks.
    """
    fused = CancelSignal()
    removers: list[Callable[[], None]] = []
    for source in sources:
        if source is None:
            continue
        if source.cancelled:
            fused.cancel(source.reason)
            break
        removers.append(on_cancel(source, _relay(source, fused)))

    def detach() -> None:
        for remove in removers:
            remove()
        removers.clear()

    return fused, detach
