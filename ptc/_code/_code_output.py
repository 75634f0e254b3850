"""The ``code/output`` event: what a program prints, relayed to listeners as it comes.

The worker backend hands each chunk of the program's output (stdout and stderr interleaved,
as the captured output holds them) to a plain callback while the run goes on. An
:class:`OutputRelay` queues the chunks and delivers them, in order, from a detached task of
its own to the ``code/output`` listeners of the run's scope chain, as
``{"call_id", "stream", "text"}``; a slow listener delays only the next chunk, never the
worker. When the run ends the relay delivers what is queued before ``run_code`` returns
(or, cancelled, drops it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import anyio

from .._calls._events import OUTPUT, AnyListener, emit
from .._detached import start_detached
from .._json import FrozenDict

__all__ = ("OutputRelay",)


class OutputRelay:
    """One run's output on its way to the ``code/output`` listeners."""

    def __init__(self, call_id: str, listeners: Sequence[AnyListener]) -> None:
        self._call_id = call_id
        self._listeners = list(listeners)
        self._send, self._receive = anyio.create_memory_object_stream[str](math.inf)
        self._task = start_detached(self._deliver, name=f"ptc-run-output:{call_id}")

    def feed(self, text: str) -> None:
        """A chunk of output (called by the backend, on the event loop, never blocking)."""
        if text:
            try:
                self._send.send_nowait(text)
            except anyio.ClosedResourceError:  # the run ended: nothing listens any more
                pass

    async def aclose(self) -> None:
        """Deliver what is queued, then stop."""
        self._send.close()
        await self._task.done.wait()

    def cancel(self) -> None:
        """Stop now, dropping what is queued."""
        self._send.close()
        self._task.cancel()

    async def _deliver(self) -> None:
        async with self._receive:
            async for text in self._receive:
                chunk = FrozenDict({"call_id": self._call_id, "stream": "stdout", "text": text})
                await emit(self._listeners, chunk, OUTPUT)
