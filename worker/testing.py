"""An in-process :class:`~worker.WorkerBackend` for tests of code built on ``worker``.

:class:`FakeBackend` runs each program in a thread of the calling process with the same
program semantics as a real worker (a module, top-level return, trailing expression, both
profiles, JSON results, program-only tracebacks, the same output capture). It has **no
isolation at all**: use it in tests, never for untrusted code.

What it enforces honestly: result size, call count, output (head/tail and the stream
cap), and the wall clock. At the deadline, on ``abort`` or on cancellation it returns at
once and *abandons* the thread: the thread is not killed (Python threads cannot be), it
keeps running until the program's next tool call or print, where it is stopped. CPU and
memory are not enforced. ``Containment.require`` does not apply: the enforcement report
says ``none`` for every dimension. It raises what a real backend raises: ``WorkerError``
for a closed backend or a handler that answers the wrong number of calls, and a handler's
own exception as it is.

**Sessions** (``RunRequest.session``): the fake keeps each saved state *by reference*, in a
table of this backend, and hands the host a random token as the state's bytes; it never
serializes or deserializes anything (no host module imports a deserializer). A state is a
deep copy of the carried globals (one ``copy.deepcopy`` memo: shared parts stay shared),
copied again for each run that restores it, so a fork's data is its own; functions and
classes are copied by reference, as ``deepcopy`` does, so ``global`` in a carried function
still writes the namespace it was defined in. The same names are carried and dropped as in
a child (``worker._child._carry``), but no files (the program's working directory is the
host's), and ``Limits.session_mib`` is not measured. A token from another backend (or a
restarted one) fails the run as a child fails a state it cannot restore. For the
semantics of sessions, test against ``SubprocessBackend``.
"""

from __future__ import annotations

import concurrent.futures
import copy
import math
import secrets
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from ._abc import CallHandler, StdoutListener, WorkerBackend
from ._child._carry import (
    SDK_NAMES,
    cap_reason,
    carried_names,
    data_only_problem,
    module_name,
    why_not_carried,
)
from ._child._outcome import ProgramResult, ProgramStop
from ._child._program import run_program
from ._child._source import program_size_problem
from ._errors import WorkerError
from ._output import OutputCapture
from ._protocol._framing import json_problem
from ._types import (
    DIMENSIONS,
    SESSION_SAVED_KINDS,
    CallReply,
    CallRequest,
    Dimension,
    Enforcement,
    Limits,
    RunOutcome,
    RunRequest,
    RunStats,
    SessionSave,
)

__all__ = ("FAKE_ENFORCEMENT", "FakeBackend")

FAKE_ENFORCEMENT: Mapping[Dimension, Enforcement] = {
    dim: Enforcement(
        level="none",
        mechanism="in-process fake (no isolation)",
        gap="the program runs in the host process; for tests only",
    )
    for dim in DIMENSIONS
}
_MAX_STATES = 4096
_Batch = tuple[list[CallRequest], "concurrent.futures.Future[Sequence[CallReply]]"]


class FakeBackend(WorkerBackend):
    """Runs programs in-process, one thread per run; see the module docstring."""

    def __init__(self) -> None:
        self._closed = False
        self._states: dict[bytes, dict[str, Any]] = {}

    def probe(self) -> Mapping[Dimension, Enforcement]:
        return dict(FAKE_ENFORCEMENT)

    async def aclose(self) -> None:
        self._closed = True

    async def run(
        self,
        request: RunRequest,
        *,
        on_calls: CallHandler,
        on_stdout: StdoutListener | None = None,
        abort: anyio.Event | None = None,
        started: float | None = None,
    ) -> RunOutcome:
        if self._closed:
            raise WorkerError("backend is closed")
        if started is None:
            started = time.monotonic()
        run = _FakeRun(request.limits, anyio.lowlevel.current_token(), on_stdout, self._states)
        result: ProgramResult | None = None
        host_error: list[BaseException] = []
        too_large = program_size_problem(request.code)
        if too_large is not None:
            return RunOutcome(
                ok=False,
                kind="preflight",
                detail=too_large,
                enforcement=dict(FAKE_ENFORCEMENT),
                stats=RunStats(wall_ms=(time.monotonic() - started) * 1000.0),
            )
        remaining = started + request.limits.wall_seconds - time.monotonic()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run.dispatch, tg, on_calls, host_error)
                if abort is not None:
                    tg.start_soon(_watch_abort, abort, run, tg)
                with anyio.move_on_after(remaining) as deadline:
                    result = await anyio.to_thread.run_sync(
                        run.execute, request, abandon_on_cancel=True
                    )
                if deadline.cancelled_caught:
                    run.stop_with(
                        "timeout",
                        f"the program ran longer than {request.limits.wall_seconds} s "
                        "(Limits.wall_seconds); the in-process fake abandoned its thread",
                    )
                tg.cancel_scope.cancel()
        finally:
            run.end()
        if host_error:
            raise host_error[0]
        stop = run.stop
        if stop is not None:
            result = ProgramResult.failure(stop.kind, stop.detail)
        assert result is not None
        return RunOutcome(
            ok=result.ok,
            value=result.value,
            kind=None if result.ok else result.kind,  # type: ignore[arg-type]
            detail=result.detail,
            output=run.capture.output(),
            enforcement=dict(FAKE_ENFORCEMENT),
            stats=RunStats(wall_ms=(time.monotonic() - started) * 1000.0, calls=run.calls),
            session=run.saved if stop is None else None,
        )


async def _watch_abort(abort: anyio.Event, run: _FakeRun, tg: TaskGroup) -> None:
    await abort.wait()
    run.stop_with("abort", "the run was aborted")
    tg.cancel_scope.cancel()


class _FakeRun:
    """State of one fake run shared by the event loop and the program's threads."""

    def __init__(
        self,
        limits: Limits,
        token: anyio.lowlevel.EventLoopToken,
        on_stdout: StdoutListener | None,
        states: dict[bytes, dict[str, Any]],
    ) -> None:
        self.limits = limits
        self.saved: SessionSave | None = None
        self._states = states
        self.capture = OutputCapture(
            output_bytes=limits.output_bytes, stream_bytes=limits.stream_bytes
        )
        self.calls = 0
        self.stop: ProgramStop | None = None
        self._token = token
        self._on_stdout = on_stdout
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self._send, self._receive = anyio.create_memory_object_stream[_Batch](math.inf)
        self._pending: set[concurrent.futures.Future[Sequence[CallReply]]] = set()

    # --- event loop side --------------------------------------------------------------

    async def dispatch(
        self, tg: TaskGroup, on_calls: CallHandler, host_error: list[BaseException]
    ) -> None:
        async with self._receive:
            async for calls, future in self._receive:
                tg.start_soon(self._answer, tg, on_calls, calls, future, host_error)

    async def _answer(
        self,
        tg: TaskGroup,
        on_calls: CallHandler,
        calls: list[CallRequest],
        future: concurrent.futures.Future[Sequence[CallReply]],
        host_error: list[BaseException],
    ) -> None:
        try:
            replies = await on_calls(calls)
            if len(replies) != len(calls):
                raise WorkerError(f"handler returned {len(replies)} replies for {len(calls)}")
        except BaseException as exc:
            if not future.done():
                future.set_exception(ProgramStop("abort", "the run ended"))
            if isinstance(exc, Exception):  # a host bug: end the run, re-raise from run()
                host_error.append(exc)
                tg.cancel_scope.cancel()
                return
            raise
        if not future.done():
            future.set_result(replies)

    def stop_with(self, kind: str, detail: str) -> None:
        with self._lock:
            if self.stop is None:
                self.stop = ProgramStop(kind, detail)

    def end(self) -> None:
        """The run is over: wake blocked calls and silence the abandoned thread."""
        self._ended.set()
        self._send.close()
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            if not future.done():
                future.set_exception(ProgramStop("abort", "the run ended"))

    # --- program thread side ----------------------------------------------------------

    def execute(self, request: RunRequest) -> ProgramResult:
        names: dict[str, Any] = {"__transport__": self, "__name__": "ptc_sdk"}
        try:
            exec(compile(request.sdk_module, "<sdk>", "exec"), names)
        except BaseException as exc:  # noqa: BLE001 - a broken SDK is this run's failure
            return ProgramResult.failure("exception", f"the SDK module failed to load: {exc!r}")
        namespace: dict[str, Any] | None = None
        if request.session is not None:
            snapshot = self._states.get(request.session) if request.session else {}
            if snapshot is None:
                return ProgramResult.failure(
                    "exception",
                    "the session's state could not be restored (this in-process fake does not "
                    "know it); the program did not run",
                )
            # Modules are kept as they are (deepcopy cannot copy one).
            modules = {id(v): v for v in snapshot.values() if module_name(v) is not None}
            namespace = copy.deepcopy(snapshot, modules)
        result = run_program(
            request.code,
            profile=request.profile,
            names={k: names[k] for k in SDK_NAMES if k in names},
            result_bytes=request.limits.result_bytes,
            print_fn=self.print,
            write=self.write,
            stopped=lambda: self.stop,
            namespace=namespace,
        )
        if namespace is not None and (result.ok or result.kind in SESSION_SAVED_KINDS):
            self.saved = self._save(namespace, request.profile)
        return result

    def _save(self, namespace: dict[str, Any], profile: str) -> SessionSave:
        """Keep a deep copy of the carried globals; its token is the state's bytes."""
        snapshot: dict[str, Any] = {}
        dropped: list[tuple[str, str]] = []
        memo: dict[int, Any] = {}
        for name in carried_names(namespace, profile):
            value = namespace[name]
            reason = why_not_carried(value)
            if reason is None and profile == "restricted" and module_name(value) is None:
                reason = data_only_problem(value)
            if reason is None and module_name(value) is not None:
                snapshot[name] = value
            elif reason is None:
                try:
                    snapshot[name] = copy.deepcopy(value, memo)
                except Exception as exc:  # noqa: BLE001 - the program's object
                    reason = cap_reason(f"cannot be carried: {exc}")
            if reason is not None:
                dropped.append((name, reason))
        token = b"fake-session:" + secrets.token_hex(16).encode()
        while len(self._states) >= _MAX_STATES:
            del self._states[next(iter(self._states))]
        self._states[token] = snapshot
        return SessionSave(blob=token, names=tuple(snapshot), dropped=tuple(dropped))

    def _raise_if_over(self) -> None:
        if self._ended.is_set():
            raise ProgramStop("abort", "the run ended")
        if self.stop is not None:
            raise self.stop

    def write(self, text: str) -> None:
        self._raise_if_over()
        with self._lock:
            within = self.capture.feed(text)
        if not within:
            self.stop_with(
                "output-limit",
                f"the program printed more than {self.limits.stream_bytes} bytes "
                "(Limits.stream_bytes)",
            )
            self._raise_if_over()
        if self._on_stdout is not None:
            try:
                anyio.from_thread.run_sync(self._on_stdout, text, token=self._token)
            except RuntimeError:  # the event loop is gone: the run ended
                raise ProgramStop("abort", "the run ended") from None

    def print(
        self,
        *objects: Any,
        sep: str | None = " ",
        end: str | None = "\n",
        file: Any = None,
        flush: bool = False,
    ) -> None:
        if file is not None and file not in (sys.stdout, sys.stderr):
            print(*objects, sep=sep, end=end, file=file, flush=flush)
            return
        self.write(
            (" " if sep is None else sep).join(map(str, objects)) + ("\n" if end is None else end)
        )

    def call_batch(self, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, Any]]:
        """``sdkgen.Transport`` for the program: hands the batch to ``on_calls``."""
        for tool, arguments in calls:
            problem = json_problem(arguments)
            if problem is not None:
                raise TypeError(f"arguments of {tool!r} must be JSON values: {problem}")
        self._raise_if_over()
        future: concurrent.futures.Future[Sequence[CallReply]] = concurrent.futures.Future()
        with self._lock:
            if self.calls + len(calls) > self.limits.max_calls:
                detail = f"the program made more than {self.limits.max_calls} tool calls"
                self.stop = self.stop or ProgramStop("call-limit", f"{detail} (Limits.max_calls)")
                raise self.stop
            first = self.calls + 1
            self.calls += len(calls)
            self._pending.add(future)
        requests = [
            CallRequest(id=first + i, tool=tool, arguments=arguments)
            for i, (tool, arguments) in enumerate(calls)
        ]
        try:
            anyio.from_thread.run_sync(
                self._send.send_nowait, (requests, future), token=self._token
            )
        except (RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise ProgramStop("abort", "the run ended") from None
        try:
            replies = future.result()
        finally:
            with self._lock:
                self._pending.discard(future)
        return [(True, r.value) if r.ok else (False, (r.code, r.message)) for r in replies]
