"""One ``run_code`` run: the worker, nested dispatch, the end of the nested calls, the result.

Every SDK call a program makes arrives here as a batch and becomes a full pipeline run
(``call_id = "<outer>:ptc:<n>"``, the outer ``root_call_id``, the same scope, ``parent`` =
run_code's token, a signal fused from the outer call and the run's lifetime), scheduled by
one :class:`~ptc._calls._scheduler.Scheduler` per run so the batch rules hold across batches; the
way from a batch's requests to its replies (paced, for batches of any size) is
``_batches``'s :class:`~ptc._code._batches.Batches`.

The wall clock bounds the run itself, from ``run_code`` entry: nested calls run in a
group of detached tasks (:class:`~ptc._detached.DetachedGroup`; the backend hands each
batch to it directly, see :class:`worker.CallStarter`), so when the run ends its started
calls drain only until the deadline (or a short grace when the run was aborted or its
caller cancelled); a call still running then is cancelled, and if it ignores that too it
is abandoned and logged, never awaited.

A program's host operations (``catalog.search`` / ``catalog.describe``, calls of names no
tool can have, their arguments checked by the worker protocol) are answered by the run's
:class:`HostOperations` without the pipeline: they get no ``<outer>:ptc:<n>`` id, no
dispatch-log entry and no record, and see only tools the scope still sees.

A deferred approval stops the run from admitting calls (``halt``) and kills the worker at
once; what the run keeps for that suspension, and how a resumed run replays it, is
``_replay``'s :class:`~ptc._code._replay.CallRecord`. Every completed call is logged in the
run's dispatch log (``_dispatch_log``); past its limit the log is summarised, and the
result's text says so in one line.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from typing import NoReturn

import anyio

from worker import (
    CallBatch,
    CallReply,
    CallRequest,
    Limits,
    RunOutcome,
    RunRequest,
    WorkerBackend,
)

from .._calls._body import BodyFailure, BodyResult
from .._calls._events import OUTPUT, logger
from .._calls._tools import ToolExecution
from .._detached import DetachedGroup
from .._json import JSON, thaw
from .._scopes._scope import Scope, call_site
from .._sessions._session_runs import SessionNote, SessionTurn
from .._signals import CancelSignal, fuse, on_cancel
from ._batches import Batches
from ._code_output import OutputRelay
from ._dispatch_log import DispatchLog
from ._prompt import render_run_code
from ._replay import CallRecord, Replay

__all__ = ("DRAIN_GRACE_S", "HostOperations", "ProgramRun", "fail_run", "failure_message")

DRAIN_GRACE_S = 0.02
"""How long cancelled nested calls get to stop before they are abandoned (within the
50 ms kill budget after the deadline)."""


def failure_message(kind: str, detail: str, output: str) -> str:
    """``code run failed (<kind>): <detail>`` followed by the captured output."""
    return f"code run failed ({kind}): {detail}\nCaptured output:\n{output}"


def fail_run(
    kind: str,
    detail: str,
    output: str = "",
    meta: dict[str, JSON] | None = None,
    note: str = "",
) -> NoReturn:
    """End ``run_code`` as ``CODE_RUN_FAILED`` of ``kind``; ``meta["failure"]`` says so.
    ``note``: a line the host adds after the message (the dispatch log was summarised)."""
    meta = {} if meta is None else meta
    meta["failure"] = {"kind": kind, "detail": detail}
    message = failure_message(kind, detail, output)
    raise BodyFailure("CODE_RUN_FAILED", f"{message}\n{note}" if note else message, meta)


class HostOperations(ABC):
    """Answers a run's host operations (see the module docstring)."""

    @abstractmethod
    async def answer(self, call: CallRequest) -> CallReply:
        """The reply to one operation (its arguments already checked by the protocol)."""


class _NoHostOperations(HostOperations):
    async def answer(self, call: CallRequest) -> CallReply:
        return CallReply.failure("UNKNOWN_TOOL", f"{call.tool} is not available in this run")


class ProgramRun:
    """The state of one run (see the module docstring)."""

    def __init__(
        self,
        execution: ToolExecution,
        scope: Scope,
        signal: CancelSignal,
        limits: Limits,
        replay: Replay | None = None,
        *,
        started: float,
        host_operations: HostOperations | None = None,
        session: SessionTurn | None = None,
    ) -> None:
        self.execution = execution
        self.scope = scope
        self.caller = signal
        self.limits = limits
        self.lifetime = CancelSignal()
        self.signal, self._detach = fuse(signal, self.lifetime)
        self.halt = CancelSignal()
        self.started = started
        self.deadline = started + limits.wall_seconds
        self.dispatch_log = DispatchLog(execution, scope)
        may_suspend = call_site(scope).approver is not None
        self.record = CallRecord(execution.call_id, replay, self.abort, may_suspend=may_suspend)
        self._abort = anyio.Event()
        self._abort_reason = ""
        # The run's nested calls: each batch in a task of this detached group.
        self._calls = DetachedGroup(f"ptc-run-calls:{execution.call_id}")
        self.session = session
        self.session_note: SessionNote | None = None
        operations = host_operations or _NoHostOperations()
        self._batches = Batches(
            execution,
            scope,
            max_parallel_calls=limits.max_parallel_calls,
            signal=self.signal,
            lifetime=self.lifetime,
            halt=self.halt,
            dispatch_log=self.dispatch_log,
            record=self.record,
            answer_operation=operations.answer,
            group=self._calls,
        )

    def abort(self, reason: str) -> None:
        """Kill the worker; the run ends as ``abort`` (the runtime is closing)."""
        self._abort_reason = reason
        self._abort.set()

    async def execute(self, backend: WorkerBackend, request: RunRequest) -> BodyResult:
        removers = [
            on_cancel(self.caller, self._abort.set),
            # A deferred approval kills the worker at once: nothing is held open.
            on_cancel(self.halt, self._abort.set),
        ]
        listeners = call_site(self.scope).listeners(OUTPUT)
        relay = OutputRelay(self.execution.call_id, listeners) if listeners else None
        try:
            outcome = await backend.run(
                request,
                on_calls=_RunCalls(self),
                on_stdout=relay.feed if relay is not None else None,
                abort=self._abort,
                started=self.started,
            )
        except BaseException:
            if relay is not None:
                relay.cancel()
            with anyio.CancelScope(shield=True):
                await self._end_calls(cancelled=True)
            raise
        finally:
            for remove in removers:
                remove()
        await self._end_calls(cancelled=False)
        if relay is not None:
            await relay.aclose()  # every chunk is delivered before run_code returns
        if self.session is not None:
            self.session_note = await self.session.finish(outcome, self._stopped())
        return self._result(outcome)

    def _stopped(self) -> str:
        """Why this run's state must not be saved, whatever its worker saved ("": none)."""
        if self.record.diverged:
            return "the resumed run diverged from its record"
        if self.halt.cancelled:
            return "the run is suspended, awaiting an approval"
        if self.caller.cancelled:
            return "the run was aborted"
        return ""

    async def _end_calls(self, *, cancelled: bool) -> None:
        """End the run's nested calls once the worker is done: the group takes no more
        batches and the calls' signal fires, then they drain (:meth:`_drain`).

        Settled: unstarted calls are abandoned; started ones finish within the wall clock,
        or get only the grace when the run was aborted. Suspended: the signal fires only
        after the drain, so started calls finish (they are recorded, never run twice).
        ``cancelled`` (``run_code``'s task was cancelled, or a host bug): as aborted, the
        calls see their signal fire and get the grace to end by it (their results are
        emitted as ``ABORTED``, a pending ask's as ``ASK_CANCELLED``) before they are
        cancelled."""
        calls = self._calls
        suspended = self.halt.cancelled
        try:
            if cancelled or not suspended:
                self.lifetime.cancel("run_code cancelled" if cancelled else "run_code settled")
            calls.close()
            until = self.deadline
            if cancelled or (self._abort.is_set() and not suspended):
                until = min(until, time.monotonic() + DRAIN_GRACE_S)
            await self._drain(until)
        finally:
            self.lifetime.cancel("run_code settled")
            self._detach()

    async def _drain(self, until: float) -> None:
        """Let started calls finish until ``until``; then cancel them, give them
        :data:`DRAIN_GRACE_S`, and abandon (and log) whatever still runs."""
        calls = self._calls
        with anyio.move_on_after(until - time.monotonic()):
            await calls.done.wait()
        if calls.done.is_set():
            return
        self.lifetime.cancel("run_code settled")
        calls.cancel()
        with anyio.move_on_after(DRAIN_GRACE_S):
            await calls.done.wait()
        if not calls.done.is_set():
            stuck = self._batches.in_flight()
            logger.warning(
                "run_code %s: nested call(s) %s did not stop when cancelled at the end of the "
                "run; abandoned (still running in the background)",
                self.execution.call_id,
                stuck or "?",
            )

    async def handle(self, calls: Sequence[CallRequest]) -> Sequence[CallReply]:
        """The worker's call handler, for a backend that awaits one (the fake, Ray): the
        batch goes the way a started one goes (:meth:`start_batch`), and this waits for its
        replies, or raises its host error as :class:`worker.CallHandler` says."""
        batch = _AwaitedBatch(calls)
        self.start_batch(batch)
        return await batch.replies()

    def start_batch(self, pending: CallBatch) -> None:
        """Dispatch a batch in the run's detached group, so a batch in flight when the
        worker dies still drains before ``run_code`` returns; the job itself answers it
        (no task of the backend's waits for the replies: the nested-call hot path)."""
        self._batches.start(pending)

    def _result(self, outcome: RunOutcome) -> BodyResult:
        output = outcome.output
        # Honest wall time: from run_code entry until now, nested calls' drain included.
        stats = replace(outcome.stats, wall_ms=(time.monotonic() - self.started) * 1000.0)
        meta: dict[str, JSON] = {
            "dispatch_log": self.dispatch_log.entries,
            "enforcement": thaw(outcome.enforcement_json()),
            "stats": thaw(stats.as_json()),
            "output": {"total_bytes": output.total_bytes, "truncated": output.truncated},
        }
        lines = []
        if self.session_note is not None:
            meta["session"] = self.session_note.meta
            lines.append(self.session_note.line)
        summary = self.dispatch_log.summary()
        if summary is not None:
            meta["dispatch_log_summary"] = summary
            lines.append(_summary_note(summary))
        note = "\n".join(lines)
        if self.record.diverged:
            return fail_run("replay-diverged", self.record.diverged, output.text, meta, note)
        suspended = self.record.suspension(output.text, meta)
        if suspended is not None:
            raise suspended
        if self.caller.cancelled:
            message = f"tool call aborted\nCaptured output:\n{output.text}"
            raise BodyFailure("ABORTED", f"{message}\n{note}" if note else message, meta)
        if outcome.ok:
            missed = self.record.missed_pending()
            if missed:
                return fail_run("replay-diverged", missed, output.text, meta, note)
            value: JSON = {"result": outcome.value, "stdout": output.text}
            content = render_run_code(value, note) if note else None
            return BodyResult(value=value, meta=meta, content=content)
        kind = outcome.kind or "worker-exit"
        detail = outcome.detail
        if kind == "abort" and self._abort_reason:
            detail = self._abort_reason
        return fail_run(kind, detail, output.text, meta, note)


class _RunCalls:
    """The run's :class:`worker.CallStarter`: a backend that knows the interface hands
    batches to :meth:`ProgramRun.start_batch`; any other awaits :meth:`ProgramRun.handle`."""

    __slots__ = ("_run",)

    def __init__(self, run: ProgramRun) -> None:
        self._run = run

    async def __call__(self, calls: Sequence[CallRequest]) -> Sequence[CallReply]:
        return await self._run.handle(calls)

    def start(self, batch: CallBatch) -> None:
        self._run.start_batch(batch)


class _AwaitedBatch:
    """A batch answered like a started one (a :class:`worker.CallBatch`) for
    :meth:`ProgramRun.handle`, which awaits its replies or its host error."""

    __slots__ = ("_answered", "_error", "_replies", "calls")

    def __init__(self, calls: Sequence[CallRequest]) -> None:
        self.calls = calls
        self._answered = anyio.Event()
        self._replies: Sequence[CallReply] = ()
        self._error: BaseException | None = None

    async def reply(self, replies: Sequence[CallReply]) -> None:
        # Read after this returns, by then let go of by whoever gave them: copied.
        self._replies = list(replies)
        self._answered.set()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._answered.set()

    async def replies(self) -> Sequence[CallReply]:
        await self._answered.wait()
        if self._error is not None:
            raise self._error
        return self._replies


def _summary_note(summary: dict[str, JSON]) -> str:
    """The line the model reads when the run's dispatch log was summarised."""
    return (
        f"[ptc: this run made {summary['calls']} tool calls; the host's dispatch log keeps "
        f"the first {summary['limit']} and counts the other {summary['omitted']} by tool]"
    )
