"""How long one piece of a host's work may hold the event loop, and the pacer that keeps to it.

A program may hand the host a batch of 100,000 calls. Whatever the host does per call
(decode, check, dispatch, log, encode the reply) is small, but done in one go it would hold
the event loop for seconds, stalling every other run and task. So every loop over a batch's
calls on the host is paced: it works for at most :data:`SLICE_SECONDS`, then lets the loop
run other callbacks before it goes on (:meth:`Pacer.tick` in a task; a callback checks
:meth:`Pacer.due` and schedules its own continuation).
"""

from __future__ import annotations

import time

import anyio.lowlevel

SLICE_SECONDS = 0.002
"""The longest stretch of one batch's work between two turns of the event loop (about: the
item that crosses it finishes first)."""


class Pacer:
    """Measures a stretch of work on the event loop from its start (or the last yield)."""

    __slots__ = ("_since",)

    def __init__(self) -> None:
        self._since = time.perf_counter()

    def due(self) -> bool:
        """Whether this stretch has used its slice: time to let the loop run."""
        return time.perf_counter() - self._since >= SLICE_SECONDS

    def restart(self) -> None:
        """A new stretch begins (the loop just ran other work)."""
        self._since = time.perf_counter()

    async def tick(self) -> None:
        """Let the event loop run once when the slice is used (a checkpoint: cancellation
        is delivered here), else return at once without a loop round."""
        if time.perf_counter() - self._since >= SLICE_SECONDS:
            await anyio.lowlevel.checkpoint()
            self._since = time.perf_counter()
