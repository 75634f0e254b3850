"""Generation that shares the GIL: in a thread that builds SDKs behind an event loop, the
long per-tool loops give the GIL away about every millisecond.

CPython lets a thread that wants the GIL wait up to the switch interval (5 ms by default)
before the thread holding it must let go. Building the SDK of a few hundred tools is tens
of milliseconds of bytecode, so an event loop in another thread of the same process would
wake up to 5 ms late again and again while a background build runs. Inside
:func:`yielding_gil`, :func:`pause` (called once per tool by the generator's loops) sleeps
for zero seconds once ``every`` seconds have passed since the last time: the sleep releases
the GIL, and a thread waiting for it takes it then. Elsewhere (the default, and the caller
of a synchronous build on the event loop's own thread) :func:`pause` does nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ("pause", "yielding_gil")

_state = threading.local()


@contextmanager
def yielding_gil(every: float = 0.001) -> Iterator[None]:
    """In this thread, until the block ends, let generation give the GIL away at least
    every ``every`` seconds (for a thread that generates in the background of an event
    loop; never for the loop's own thread, whose callbacks it would lengthen)."""
    previous = getattr(_state, "every", None)
    _state.every = every
    _state.last = time.perf_counter()
    try:
        yield
    finally:
        _state.every = previous


def pause() -> None:
    """Give the GIL away if this thread is inside :func:`yielding_gil` and held it for
    ``every`` seconds since the last pause (a per-tool call: it costs a clock read)."""
    every = getattr(_state, "every", None)
    if every is None:
        return
    now = time.perf_counter()
    if now - _state.last >= every:
        time.sleep(0)  # releases the GIL: a thread waiting for it runs now
        _state.last = time.perf_counter()
