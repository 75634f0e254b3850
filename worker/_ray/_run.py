"""The host side of one run on a Ray node: the event stream in, replies out, two clocks.

The node's actor streams JSON event lists (``calls``, ``stdout``, ``log``, ``outcome``);
each ``calls`` batch is answered by the host's handler in a task of this run and the
replies go back with one actor call. The node enforces the wall clock with its local
backend (given what is left of the budget when the run reaches it); the host keeps its own
deadline ``grace_seconds`` after the limit and ends the run as ``timeout`` there even if
the node never answers again. Abort, cancellation and the host's deadline all ask the
node to kill the program (``cancel``); a lost node ends the run as ``worker-exit``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import uuid
from typing import Any

import anyio
from anyio.abc import TaskGroup
from ray.exceptions import RayActorError, RayError

from .._abc import CallHandler, StdoutListener
from .._errors import ProtocolError, WorkerError
from .._output import OutputCapture
from .._types import MIB, CallRequest, FailureKind, RunOutcome, RunRequest, RunStats
from ._nodes import Node
from ._wire import (
    Event,
    call_requests,
    decode_events,
    decode_outcome,
    encode_replies,
    encode_request,
)


class NodeLost(WorkerError):
    """The node (or its actor) went away during a run."""


class RemoteRun:
    """Drives one run on ``node`` (see the module docstring)."""

    def __init__(
        self,
        node: Node,
        request: RunRequest,
        *,
        on_calls: CallHandler,
        on_stdout: StdoutListener | None,
        abort: anyio.Event | None,
        started: float,
        grace_seconds: float,
    ) -> None:
        self.node = node
        self.request = request
        self.on_calls = on_calls
        self.on_stdout = on_stdout
        self.abort = abort
        self.started = started
        self.grace_seconds = grace_seconds
        self.run_id = uuid.uuid4().hex
        limits = request.limits
        self.capture = OutputCapture(
            output_bytes=limits.output_bytes, stream_bytes=limits.stream_bytes
        )
        self.calls = 0
        self.outcome: RunOutcome | None = None
        self.handler_error: Exception | None = None
        self.aborted = False
        self.unresponsive = False  # the host's deadline passed without the node's outcome
        self._scope: anyio.CancelScope | None = None

    async def drive(self) -> RunOutcome:
        """Run to the end. Raises :class:`NodeLost`, or the handler's exception."""
        wall = self.request.limits.wall_seconds
        remaining = wall - (time.monotonic() - self.started)
        if remaining <= 0:
            return self.fail("timeout", f"wall clock limit of {wall:g} s exceeded")
        # The node's clock starts when the run reaches it: give it what is left.
        limits = dataclasses.replace(self.request.limits, wall_seconds=remaining)
        payload = encode_request(dataclasses.replace(self.request, limits=limits))
        broken: Exception | None = None
        try:
            stream = self.node.actor.run.options(num_returns="streaming").remote(
                self.run_id, payload
            )
            async with anyio.create_task_group() as tg:
                if self.abort is not None:
                    tg.start_soon(self._watch_abort, self.abort)
                deadline = anyio.current_time() + remaining + self.grace_seconds
                with anyio.CancelScope(deadline=deadline) as scope:
                    self._scope = scope
                    broken = await self._events(stream, tg)
                tg.cancel_scope.cancel()
        finally:
            if self.outcome is None:
                self.cancel_on_node()
        if self.handler_error is not None:
            raise self.handler_error
        if isinstance(broken, RayActorError):
            raise NodeLost(_first_line(broken)) from broken
        if isinstance(broken, RayError):
            return self.fail("worker-exit", f"Ray failed the run: {_first_line(broken)}")
        if isinstance(broken, ProtocolError):
            return self.fail("protocol", f"node {self.node.name}: {broken.detail}")
        if self.outcome is not None:
            return self._settle(self.outcome)
        if self.aborted:
            return self.fail("abort", "the run was aborted by the host")
        self.unresponsive = True
        return self.fail(
            "timeout",
            f"wall clock limit of {wall:g} s exceeded (node {self.node.name} did not end the "
            f"run within {self.grace_seconds:g} s of it; the host asked it to kill the run)",
        )

    def cancel_on_node(self) -> None:
        """Ask the node to kill the program (fire and forget: it may be gone)."""
        with contextlib.suppress(Exception):
            self.node.actor.cancel.remote(self.run_id)

    async def _events(self, stream: Any, tg: TaskGroup) -> Exception | None:
        """Consume the node's events until the outcome; what broke the stream, if anything
        (returned, not raised: raised inside the task group it would come out grouped)."""
        try:
            async for ref in stream:
                for event in decode_events(await ref):
                    if self._handle(event, tg):
                        return None
        except (RayError, ProtocolError) as exc:
            return exc
        return ProtocolError("the node's event stream ended without an outcome")

    def _handle(self, event: Event, tg: TaskGroup) -> bool:
        """Act on one event; ``True`` once the outcome has arrived."""
        kind = event["type"]
        if kind == "calls":
            calls = call_requests(event)
            self.calls += len(calls)
            tg.start_soon(self._answer, event["batch"], calls)
        elif kind == "stdout":
            self.capture.feed(event["data"])
            if self.on_stdout is not None:
                self.on_stdout(event["data"])
        elif kind == "log":
            record = event["record"]
            logging.getLogger(record["name"]).handle(logging.makeLogRecord(record))
        else:
            self.outcome = decode_outcome(
                event, self.node.name, self.request.limits.session_mib * MIB
            )
            return True
        return False

    async def _answer(self, batch: int, calls: list[CallRequest]) -> None:
        try:
            replies = await self.on_calls(calls)
            if len(replies) != len(calls):
                raise WorkerError(f"handler returned {len(replies)} replies for {len(calls)}")
        except Exception as exc:  # a host bug: kill the run, re-raise from run()
            self.handler_error = exc
            self._cancel_scope()
            return
        self.node.actor.reply.remote(self.run_id, encode_replies(batch, replies))

    async def _watch_abort(self, abort: anyio.Event) -> None:
        await abort.wait()
        self.aborted = True
        self.cancel_on_node()
        # Wait a little for the node's own ``abort`` outcome (with its output), no longer.
        if self._scope is not None:
            self._scope.deadline = min(
                self._scope.deadline, anyio.current_time() + self.grace_seconds
            )

    def _cancel_scope(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    def _settle(self, outcome: RunOutcome) -> RunOutcome:
        if outcome.kind == "timeout":  # the node was given the remaining budget: say the limit
            detail = f"wall clock limit of {self.request.limits.wall_seconds:g} s exceeded"
            outcome = dataclasses.replace(outcome, detail=detail)
        elif outcome.kind == "sandbox-unavailable":  # "on this host" means that node
            detail = f"{outcome.detail} (on Ray node {self.node.name})"
            outcome = dataclasses.replace(outcome, detail=detail)
        return outcome

    def fail(self, kind: FailureKind, detail: str) -> RunOutcome:
        """An outcome decided on the host: the output streamed so far, the node's probe
        (what its children are contained with) as the enforcement report."""
        return RunOutcome(
            ok=False,
            kind=kind,
            detail=detail,
            output=self.capture.output(),
            enforcement=dict(self.node.probe),
            stats=RunStats(
                wall_ms=(time.monotonic() - self.started) * 1000.0,
                calls=self.calls,
                node=self.node.name,
            ),
        )


def _first_line(exc: BaseException) -> str:
    """The line of a Ray error that says why (Ray's messages are many lines long)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    why = [line for line in lines if "died because" in line or "unavailable" in line.lower()]
    return (why or lines or [type(exc).__name__])[0]
