"""The host side of one run: ``start`` out, frames in, replies out, limits and order kept.

:class:`RunLoop` drives one :class:`~worker._host._child_handle.ChildHandle` that has sent
``ready``: it sends ``start``, then reads frames until ``done`` and EOF, under the wall
clock and the host's ``abort``. The frames' schemas were checked by the decoder; the loop
checks their *order* (no second ``ready``, nothing after ``done``, call ids that increase)
and the limits only the host can count (``max_calls``, ``stream_bytes``). Any breach ends
the run with its failure kind; when the channel closes without ``done`` the loop asks the
child's supervisor line (the zygote's exit report, the scratch keeper's kill) and the
cgroup why the child died.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.abc

from .._abc import CallHandler, CallStarter, StdoutListener
from .._errors import ProtocolError, WorkerError
from .._output import OutputCapture, emit_log
from .._protocol._framing import (
    WIRE_ENCODER,
    Frame,
    encode,
    json_problem,
    json_size,
    prefixed,
    scrub_surrogates,
    scrub_text,
)
from .._protocol._messages import MAX_CALL_ARGUMENTS_BYTES
from .._protocol._state import SavedState, state_frames
from .._types import (
    MIB,
    CallReply,
    Dimension,
    Enforcement,
    FailureKind,
    RunOutcome,
    RunRequest,
    RunStats,
)
from ._call_batch import PackedCalls, StartedBatch
from ._child_handle import ChildHandle
from ._death_cause import death_cause
from ._pacing import Pacer
from ._timing import timing_mark

Kill = tuple[FailureKind, str]
_REWRITE_GROWTH = 5
"""How much longer decoded JSON can get written out compactly than the text it was read
from: only numbers grow (``1e15`` is written ``1000000000000000.0``, 4.5 times), escapes
and whitespace shrink."""


class RunLoop:
    """The host side of one run: frames in, replies out, limits and order enforced."""

    def __init__(
        self,
        request: RunRequest,
        *,
        on_calls: CallHandler,
        on_stdout: StdoutListener | None,
        abort: anyio.Event | None,
        deadline: float,
        started: float,
    ) -> None:
        self.request = request
        self.on_calls = on_calls
        self._starter = on_calls if isinstance(on_calls, CallStarter) else None
        self.on_stdout = on_stdout
        self.abort = abort
        self.deadline = deadline
        self.started = started
        self.capture = OutputCapture(
            output_bytes=request.limits.output_bytes, stream_bytes=request.limits.stream_bytes
        )
        self.enforcement: dict[Dimension, Enforcement] = {}
        self.calls = 0
        self.log_bytes = 0
        self.last_id = 0
        self.done: Frame | None = None
        self._batch = PackedCalls()
        """The calls of a batch whose frames are still coming (``more``)."""
        self.peak_memory_kib: int | None = None
        """The child's peak memory when the host measured it (cgroup or ``VmHWM``)."""
        self.cpu_ms = 0.0
        """The child's CPU time read from ``/proc``, for when its exit report does not come
        (a finished run does not await it; a killed one may not get it)."""
        self.handler_error: BaseException | None = None
        # A run on a session: the state the child saves (opaque bytes, never parsed).
        self.state: SavedState | None = None
        if request.session is not None:
            self.state = SavedState(request.limits.session_mib * MIB)
        self._send_lock = anyio.Lock()
        self._scope: anyio.CancelScope | None = None
        self._aborted = False
        self._eof = False
        self._ended = False

    def fail(
        self, kind: FailureKind, detail: str, enforcement: Mapping[Dimension, Enforcement]
    ) -> RunOutcome:
        """An outcome for a run that ended before its child ran anything."""
        return RunOutcome(
            ok=False,
            kind=kind,
            detail=detail,
            output=self.capture.output(),
            enforcement=dict(enforcement),
            stats=self._stats(None),
        )

    def finish(self, outcome: RunOutcome | None, child: ChildHandle) -> RunOutcome:
        """The run's outcome with output, enforcement and stats; re-raises a handler's error."""
        if self.handler_error is not None:
            raise self.handler_error
        if outcome is None:  # the done frame's, with the state saved before it
            done = self.done or {}
            saved = self.state.saved if self.state is not None else None
            if done.get("ok") is True:
                outcome = RunOutcome(ok=True, value=done.get("value"), session=saved)
            else:
                kind = done.get("kind", "worker-exit")
                detail = done.get("detail", "")
                outcome = RunOutcome(ok=False, kind=kind, detail=detail, session=saved)
        return dataclasses.replace(
            outcome,
            output=self.capture.output(),
            enforcement=self.enforcement,
            stats=self._stats(child),
        )

    @property
    def finished(self) -> bool:
        """The child sent ``done`` and then closed its channel, and the host had no error:
        the child ended the run itself (its teardown need not be awaited)."""
        return self.done is not None and self._eof and self.handler_error is None

    def timeout_detail(self) -> str:
        wall = self.request.limits.wall_seconds
        return f"wall clock limit of {wall:g} s exceeded"

    def _stats(self, child: ChildHandle | None) -> RunStats:
        report = child.keeper.exit if child is not None else None
        cpu_ms = float(report.cpu_ms) if report else self.cpu_ms
        peak = self.peak_memory_kib
        if peak is None and report is not None and report.maxrss_kib > 0:
            peak = report.maxrss_kib
        return RunStats(
            wall_ms=(time.monotonic() - self.started) * 1000.0,
            cpu_ms=cpu_ms,
            calls=self.calls,
            peak_memory_kib=peak,
        )

    async def drive(self, child: ChildHandle) -> RunOutcome | None:
        """Send ``start`` and run to the end. ``None`` means: use the ``done`` frame.

        A child whose pool pre-loaded this SDK module gets ``start`` without it."""
        module = self.request.sdk_module
        session = self.request.session
        preloaded = child.sdk_module == module
        if not preloaded:
            timing_mark("sdk-inline")
        start = {
            "type": "start",
            "code": self.request.code,
            "profile": self.request.profile,
            "sdk_module": "" if preloaded else module,
            "limits": dataclasses.asdict(self.request.limits),
            "session": None if session is None else {"bytes": len(session)},
        }
        kill: Kill | None = None
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope(deadline=_to_anyio(self.deadline)) as scope:
                self._scope = scope
                if self.abort is not None:
                    tg.start_soon(self._watch_abort, self.abort)
                try:
                    data = encode(start)
                except ProtocolError as exc:  # program and SDK together over the frame cap
                    kill = ("preflight", f"the program and its SDK cannot be sent: {exc.detail}")
                else:
                    if session:  # the state follows start, before the child runs anything
                        data = b"".join((data, *state_frames(session)))
                    try:
                        # Written at once when the socket takes it (a program and a
                        # pre-loaded SDK's start frame usually does): no event-loop round.
                        sent = child.channel.send_nowait(data)
                        if sent < len(data):
                            await child.channel.send(data[sent:])
                        timing_mark("start")
                        kill = await self._frames(child, tg)
                    except (anyio.BrokenResourceError, OSError):
                        kill = await self._death(child)
            tg.cancel_scope.cancel()
        self._ended = True  # replies still on their way go nowhere
        if self.handler_error is not None:
            return None
        if self._aborted:
            kill = ("abort", "the run was aborted by the host")
        elif scope.cancelled_caught:
            kill = ("timeout", self.timeout_detail())
        if kill is None:
            return None
        return RunOutcome(ok=False, kind=kill[0], detail=kill[1])

    async def _watch_abort(self, abort: anyio.Event) -> None:
        await abort.wait()
        self._aborted = True
        if self._scope is not None:
            self._scope.cancel()

    async def _frames(self, child: ChildHandle, tg: anyio.abc.TaskGroup) -> Kill | None:
        """Handle the child's frames as they come until a kill or the end of the stream.

        A :class:`CallStarter` (whose ``start`` may be called outside any task) is pushed
        its frames from the event loop's reader callback (:meth:`RunChannel.push_frames`).
        A plain handler gets a task of the run's task group per batch, and anyio can start
        one only from a task: outside any, it finds the running loop through ``sniffio``
        when that is installed, which fails on a loop ``anyio.run`` did not start (Ray's
        actors, ``asyncio.run``). Its frames are read in this task instead."""
        kill: list[Kill] = []

        def handle(frame: Frame) -> bool:
            problem = self._handle(frame, child, tg)
            if problem is not None:
                kill.append(problem)
                return False
            return True

        channel = child.channel
        take = channel.push_frames if self._starter is not None else channel.pull_frames
        try:
            stopped = await take(handle)
        except ProtocolError as exc:
            return ("protocol", exc.detail)
        if stopped:
            return kill[0]
        timing_mark("eof")
        self._eof = True
        return None if self.done is not None else await self._death(child)

    def _handle(self, frame: Frame, child: ChildHandle, tg: anyio.abc.TaskGroup) -> Kill | None:
        """One frame in its place in the run: ``None`` to go on, else why the run ends."""
        limits = self.request.limits
        kind = frame["type"]
        if self.done is not None:
            return ("protocol", f"{kind!r} frame after done")
        if kind == "ready":
            return ("protocol", "second ready frame")
        if kind == "call":
            requests = self._batch
            for call in frame["calls"]:
                if call["id"] <= self.last_id:
                    return ("protocol", f"call id {call['id']} does not increase")
                self.last_id = call["id"]
                problem = _arguments_problem(call["arguments"], child.channel.frame_bytes_bound)
                if problem is not None:
                    return ("protocol", f"call {call['id']}: {problem}")
                scrub_surrogates(call)
                # A batch names few tools many times: one string each, not one per call.
                requests.add(call["id"], sys.intern(call["tool"]), call["arguments"])
            self.calls += len(frame["calls"])
            if self.calls > limits.max_calls:
                return ("call-limit", f"more than {limits.max_calls} tool calls")
            if frame.get("more"):
                return None  # the batch goes on in the next call frame
            self._batch = PackedCalls()
            if self._starter is not None:
                reply = functools.partial(self.send_replies, child)
                self._starter.start(StartedBatch(requests, reply, self.handler_failed))
            else:
                tg.start_soon(self._dispatch, child, requests)
        elif kind == "stdout":
            data = scrub_text(frame["data"])
            if not self.capture.feed(data) or not self._within_stream():
                return ("output-limit", self._stream_detail())
            if self.on_stdout is not None:
                self.on_stdout(data)
        elif kind == "log":
            record = scrub_surrogates(frame["record"])
            self.log_bytes += len(record["msg"].encode("utf-8"))
            if not self._within_stream():
                return ("output-limit", self._stream_detail())
            emit_log(record)
        elif kind == "state" or kind == "saved":
            problem = self.state.take(frame) if self.state else "in a run without a session"
            if problem is not None:
                return ("protocol", f"{kind}: {problem}")
        elif kind == "done":
            timing_mark("done")
            if self._batch:
                return ("protocol", "done before the last frame of a batch")
            problem = self._done_problem(frame)
            if problem is not None:
                return ("protocol", problem)
            self.done = scrub_surrogates(frame)
        else:
            return ("protocol", f"unexpected {kind!r} frame from the child")
        return None

    def _within_stream(self) -> bool:
        """Stdout and log records together stay within ``stream_bytes``."""
        return self.capture.total_bytes + self.log_bytes <= self.request.limits.stream_bytes

    def _stream_detail(self) -> str:
        return (
            f"output (stdout and log records) exceeded {self.request.limits.stream_bytes} bytes "
            "(Limits.stream_bytes)"
        )

    def _done_problem(self, frame: Frame) -> str | None:
        """Re-check a ``done`` value whatever the child checked: JSON, depth, size."""
        if frame["ok"] is not True:
            return None
        value = frame["value"]
        problem = json_problem(value)
        if problem is not None:
            return f"done: {problem}"
        size = json_size(value)
        limit = self.request.limits.result_bytes
        if size > limit:
            return f"done: the result is {size} bytes as JSON, over Limits.result_bytes ({limit})"
        return None

    async def _dispatch(self, child: ChildHandle, requests: PackedCalls) -> None:
        """A batch answered by a plain :class:`CallHandler`, from a task of this run."""
        try:
            replies = await self.on_calls(requests)
        except Exception as exc:  # a host bug: kill the run, re-raise from run()
            self.handler_failed(exc)
            return
        await self.send_replies(child, requests, replies)

    def handler_failed(self, error: BaseException) -> None:
        """The call handler broke (a host bug): kill the run; ``finish`` re-raises it."""
        if self._ended or self.handler_error is not None:
            return
        self.handler_error = error
        if self._scope is not None:
            self._scope.cancel()

    async def send_replies(
        self, child: ChildHandle, requests: PackedCalls, replies: Sequence[CallReply]
    ) -> None:
        """One batch's result frames, in order; nothing once the run has ended."""
        if self._ended:
            return
        if len(replies) != len(requests):
            error = WorkerError(f"handler returned {len(replies)} replies for {len(requests)}")
            self.handler_failed(error)
            return
        if len(replies) == 1:  # a program's plain call: one frame, nothing to pace or drop
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await self._send(child, _result_frame(next(requests.ids()), replies[0]))
            return
        # Encoded and sent in pieces of one slice of work each (``_pacing``): a batch of
        # any size never holds the event loop for long.
        pacer = Pacer()
        pieces: list[bytes] = []
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            for call_id, reply in zip(requests.ids(), replies, strict=True):
                pieces.append(_result_frame(call_id, reply))
                if pacer.due():
                    await self._send(child, b"".join(pieces))
                    pieces.clear()
                    await pacer.tick()
            await self._send(child, b"".join(pieces))
        await requests.drop()

    async def _send(self, child: ChildHandle, data: bytes) -> None:
        """Write whole frames, in order with every other sender's."""
        if not data or self._ended:
            return
        if not self._send_lock.locked():
            # Nobody else is sending: write what the socket takes now, without an
            # event-loop round; only a remainder waits (under the lock, in order).
            data = data[child.channel.send_nowait(data) :]
            if not data:
                return
        async with self._send_lock:
            await child.channel.send(data)

    async def _death(self, child: ChildHandle) -> Kill:
        """The child's channel closed without ``done``: find out why it died."""
        return await death_cause(child, self.request.limits)


def _to_anyio(deadline_monotonic: float) -> float:
    return anyio.current_time() + (deadline_monotonic - time.monotonic())


def _result_frame(call_id: int, reply: CallReply) -> bytes:
    """The ``result`` frame of one reply, as :func:`encode` writes it, but put together from
    its encoded parts: the envelope is fixed, only the value (or code and message) vary."""
    try:
        if reply.ok:
            value = WIRE_ENCODER.encode(reply.value)
            body = f'{{"type":"result","id":{call_id:d},"ok":true,"value":{value}}}'
        else:
            code = WIRE_ENCODER.encode(reply.code)
            message = WIRE_ENCODER.encode(reply.message)
            body = (
                f'{{"type":"result","id":{call_id:d},"ok":false,"code":{code},"message":{message}}}'
            )
        return prefixed(body.encode("ascii"))
    except (ProtocolError, ValueError, TypeError) as exc:
        return encode(
            {
                "type": "result",
                "id": call_id,
                "ok": False,
                "code": "INVALID_RESULT",
                "message": f"the tool result could not be sent to the worker: {exc}",
            }
        )


def _arguments_problem(arguments: dict[str, Any], frame_bytes: int) -> str | None:
    problem = json_problem(arguments)
    if problem is not None:
        return f"arguments: {problem}"
    if frame_bytes * _REWRITE_GROWTH <= MAX_CALL_ARGUMENTS_BYTES:
        return None  # too small a frame to carry arguments over the cap
    size = json_size(arguments)
    if size > MAX_CALL_ARGUMENTS_BYTES:
        return f"arguments of {size} bytes as JSON, over the cap of {MAX_CALL_ARGUMENTS_BYTES}"
    return None
