"""One ``run_code`` run: the worker, nested dispatch, the dispatch log, the result.

Every SDK call a program makes arrives here as a batch and becomes a full pipeline run
(``call_id = "<outer>:ptc:<n>"``, the outer ``root_call_id``, the same scope, ``parent`` =
run_code's token, a signal fused from the outer call and the run's lifetime), scheduled by
one :class:`~ptc._scheduler.Scheduler` per run so the batch rules hold across batches.

The wall clock bounds the run itself, from ``run_code`` entry: nested calls run in a
group of detached tasks (:class:`~ptc._detached.DetachedGroup`; the backend hands each
batch to it directly, see :class:`worker.CallStarter`), so when the run ends its started
calls drain only until the deadline (or a short grace when the run was aborted or its
caller cancelled); a call still running then is cancelled, and if it ignores that too it
is abandoned and logged, never awaited.

**Suspension.** When the approver defers a call, the run stops admitting calls (``halt``),
kills the worker at once, lets calls already started finish, and ends with
:class:`RunSuspended`: every completed call (name, arguments, the reply the program got)
and the pending one. **Replay.** A resumed run is handed that record as a :class:`Replay`:
its program's calls are compared, position by position, with the record; recorded ones are
answered from it (no tool, no policy: the dispatch log marks them ``replayed``), the pending
one runs through the pipeline with the person's answer in place of the approver, later ones
run live, and any difference ends the run as ``replay-diverged``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
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

from ._body import BodyFailure, BodyResult
from ._decisions import ApprovalAnswer, ApprovalRequest, DispatchLogEntry
from ._detached import DetachedGroup
from ._events import DISPATCH_LOG, ListenerError, logger, run_waterfall
from ._json import JSON, thaw
from ._pipeline import CallSite
from ._results import ContentBlock, ToolResult, freeze_content
from ._scheduler import Scheduler, ToolCall
from ._scopes import Scope, call_site
from ._signals import CancelSignal, fuse, on_cancel
from ._suspensions import PendingApproval, RecordedCall
from ._tools import ToolExecution

__all__ = (
    "DRAIN_GRACE_S",
    "ProgramRun",
    "Replay",
    "RunSuspended",
    "fail_run",
    "failure_message",
)

DRAIN_GRACE_S = 0.02
"""How long cancelled nested calls get to stop before they are abandoned (within the
50 ms kill budget after the deadline)."""


def failure_message(kind: str, detail: str, output: str) -> str:
    """``code run failed (<kind>): <detail>`` followed by the captured output."""
    return f"code run failed ({kind}): {detail}\nCaptured output:\n{output}"


def fail_run(
    kind: str, detail: str, output: str = "", meta: dict[str, JSON] | None = None
) -> NoReturn:
    """End ``run_code`` as ``CODE_RUN_FAILED`` of ``kind``; ``meta["failure"]`` says so."""
    meta = {} if meta is None else meta
    meta["failure"] = {"kind": kind, "detail": detail}
    raise BodyFailure("CODE_RUN_FAILED", failure_message(kind, detail, output), meta)


def _is_content(value: object) -> bool:
    # Shape only; the full check happens once, when the logged content is frozen.
    return isinstance(value, list | tuple)


@dataclass(frozen=True, kw_only=True)
class Replay:
    """What a resumed run replays: the recorded calls, the pending one and its answer."""

    calls: tuple[RecordedCall, ...]
    pending: PendingApproval
    answer: ApprovalAnswer


class RunSuspended(Exception):  # noqa: N818 - an outcome, named for what it carries
    """A run ended because a call's approval was deferred (see the module docstring)."""

    def __init__(
        self,
        calls: tuple[RecordedCall, ...],
        pending: PendingApproval,
        output: str,
        meta: dict[str, JSON],
    ) -> None:
        super().__init__(pending.name)
        self.calls = calls
        self.pending = pending
        self.output = output
        self.meta = meta


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
    ) -> None:
        self.execution = execution
        self.scope = scope
        self.caller = signal
        self.limits = limits
        self.lifetime = CancelSignal()
        self.signal, self._detach = fuse(signal, self.lifetime)
        self.halt = CancelSignal()
        self.scheduler = Scheduler(limits.max_parallel_calls)
        self.started = started
        self.deadline = started + limits.wall_seconds
        self.dispatch_log: list[JSON] = []
        self.replay = replay
        self._recorded = {c.n: c for c in replay.calls} if replay is not None else {}
        self._completed: dict[int, RecordedCall] = {}
        self._pending: PendingApproval | None = None
        self._reached_pending = False
        self._diverged = ""
        self._count = 0
        self._abort = anyio.Event()
        self._abort_reason = ""
        # The run's nested calls: each batch in a task of this detached group.
        self._calls = DetachedGroup(f"ptc-run-calls:{execution.call_id}")
        self._in_flight: dict[str, str] = {}

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
        host = self._calls
        try:
            outcome = await backend.run(
                request, on_calls=_RunCalls(self), abort=self._abort, started=self.started
            )
        except BaseException:
            # Cancelled (or a host bug): nested calls see their signal fire *before* they
            # are cancelled, then get a short grace, then are abandoned.
            self.lifetime.cancel("run_code cancelled")
            host.close()
            host.cancel()
            with anyio.CancelScope(shield=True):
                await self._drain(host, time.monotonic())
            raise
        finally:
            if not self.halt.cancelled:
                self.lifetime.cancel("run_code settled")  # unstarted calls are abandoned
            host.close()
            for remove in removers:
                remove()
        try:
            # Suspended: started calls finish (they are recorded, never run twice) within
            # the wall clock; aborted: they get only the grace.
            suspended = self.halt.cancelled
            until = time.monotonic() if self._abort.is_set() and not suspended else self.deadline
            await self._drain(host, until)
        finally:
            self.lifetime.cancel("run_code settled")
            self._detach()
        return self._result(outcome)

    async def _drain(self, host: DetachedGroup, until: float) -> None:
        """Let started calls finish until ``until``; then cancel them, give them
        :data:`DRAIN_GRACE_S`, and abandon (and log) whatever still runs."""
        with anyio.move_on_after(until - time.monotonic()):
            await host.done.wait()
        if host.done.is_set():
            return
        self.lifetime.cancel("run_code settled")
        host.cancel()
        with anyio.move_on_after(DRAIN_GRACE_S):
            await host.done.wait()
        if not host.done.is_set():
            stuck = ", ".join(f"{cid} ({name})" for cid, name in self._in_flight.items())
            logger.warning(
                "run_code %s: nested call(s) %s did not stop when cancelled at the end of the "
                "run; abandoned (still running in the background)",
                self.execution.call_id,
                stuck or "?",
            )

    async def handle(self, calls: Sequence[CallRequest]) -> Sequence[CallReply]:
        """The worker's call handler: dispatch in the run's own detached group, so
        a batch in flight when the worker dies still drains before ``run_code`` returns."""
        batch = self._numbered(calls)
        replies: list[CallReply] = []
        done = anyio.Event()

        async def dispatch() -> None:
            try:
                replies.extend(await self._dispatch(batch))
            finally:
                done.set()

        self._calls.start_soon(dispatch)
        await done.wait()
        return replies

    def start_batch(self, pending: CallBatch) -> None:
        """Dispatch a batch in the run's detached group; the task itself sends the replies
        (no task of the backend's waits for them: the nested-call hot path)."""
        self._calls.start_soon(self._answer, self._numbered(pending.calls), pending)

    async def _answer(self, batch: list[tuple[int, ToolCall]], pending: CallBatch) -> None:
        try:
            replies = await self._dispatch(batch)
        except Exception as exc:  # a host bug: the backend kills the run and re-raises it
            pending.fail(exc)
            raise
        await pending.reply(replies)

    def _numbered(self, calls: Sequence[CallRequest]) -> list[tuple[int, ToolCall]]:
        batch = []
        for call in calls:
            self._count += 1
            call_id = f"{self.execution.call_id}:ptc:{self._count}"
            batch.append((self._count, ToolCall(call.tool, call.arguments, call_id=call_id)))
        return batch

    async def _dispatch(self, batch: list[tuple[int, ToolCall]]) -> list[CallReply]:
        for _, call in batch:
            self._in_flight[call.call_id or ""] = call.name
        try:
            answered: dict[int, CallReply] = {}
            live: list[tuple[int, ToolCall]] = []
            for n, call in batch:
                recorded = self._replayed(n, call)
                if self._diverged:
                    answered[n] = CallReply.failure("CANCELLED", "the run is ending")
                elif recorded is not None:
                    answered[n] = _recorded_reply(recorded)
                    self._completed[n] = recorded
                    self._log_replayed(call, recorded)
                else:
                    live.append((n, call))
            if live:
                await self._run_live(live, answered)
            return [answered[n] for n, _ in batch]
        finally:
            for _, call in batch:
                self._in_flight.pop(call.call_id or "", None)

    def _replayed(self, n: int, call: ToolCall) -> RecordedCall | None:
        """The recorded answer of call ``n``, ``None`` to run it live; a call that differs
        from the record ends the run as ``replay-diverged``."""
        replay = self.replay
        if replay is None or self._diverged:
            return None
        expected: tuple[str, JSON] | None = None
        recorded = self._recorded.get(n)
        if recorded is not None:
            expected = (recorded.name, recorded.arguments)
        elif n == replay.pending.n:
            expected = (replay.pending.name, replay.pending.arguments)
            self._reached_pending = True
        if expected is not None and (call.name, thaw(dict(call.arguments))) != expected:
            self._diverged = (
                f"call {n} of the resumed run is {_show(call.name, call.arguments)}, but the "
                f"suspended run made {_show(*expected)} there; a resumed program must make "
                "the same calls in the same order (no clocks, randomness or other inputs that "
                "change between runs may choose them)"
            )
            self.abort(self._diverged)
        return recorded

    async def _run_live(
        self, live: list[tuple[int, ToolCall]], answered: dict[int, CallReply]
    ) -> None:
        started = time.perf_counter()
        calls = [call for _, call in live]
        # The site is taken per call: visibility is re-checked at dispatch time.
        results = await self.scheduler.run(
            self._site,
            calls,
            signal=self.signal,
            parent=self.execution.token,
            root_call_id=self.execution.root_call_id,
            halt=self.halt,
        )
        duration_ms = (time.perf_counter() - started) * 1000
        for (n, call), result in zip(live, results, strict=True):
            if _code(result) == "SUSPENDED":
                self._suspend(n, call, result)
                answered[n] = CallReply.failure("SUSPENDED", "the run is suspended")
                continue
            answered[n] = _reply(result)
            if _abandoned(result, self.lifetime, self.halt):
                continue
            logged = await self._log(call, result, duration_ms)
            # The log record's copies of the arguments and content serve the record too.
            self._completed[n] = _record(n, call, answered[n], logged)

    def _site(self, call: ToolCall) -> CallSite:
        site = call_site(self.scope)
        replay = self.replay
        if replay is not None and call.call_id == self._pending_call_id(replay.pending):
            # The pending call runs through the pipeline again; a person already answered
            # its Ask, so that answer takes the approver's place.
            answer = replay.answer

            async def decided(request: ApprovalRequest) -> ApprovalAnswer:
                return answer

            site = dataclasses.replace(site, approver=decided)
        return site

    def _pending_call_id(self, pending: PendingApproval) -> str:
        return f"{self.execution.call_id}:ptc:{pending.n}"

    def _suspend(self, n: int, call: ToolCall, result: ToolResult) -> None:
        if self._pending is not None:
            return
        info = result.meta.get("info")
        reason = info.get("reason") if isinstance(info, dict) else None
        display = info.get("display_reason") if isinstance(info, dict) else None
        self._pending = PendingApproval(
            n=n,
            sub_call_id=call.call_id or "",
            name=call.name,
            arguments=thaw(dict(call.arguments)),
            reason=reason if isinstance(reason, str) else None,
            display_reason=display if isinstance(display, str) else None,
        )

    def _log_replayed(self, call: ToolCall, recorded: RecordedCall) -> None:
        error_code = None if recorded.ok else recorded.code
        self.dispatch_log.append(
            _log_record(call, recorded.arguments, error_code, recorded.content, 0.0, replayed=True)
        )

    async def _log(self, call: ToolCall, result: ToolResult, duration_ms: float) -> dict[str, JSON]:
        """Log the call (through the dispatch-log waterfall) and return its log record."""
        arguments = thaw(dict(call.arguments))  # a copy independent of the dispatched one
        content: Sequence[ContentBlock] = result.content
        listeners = call_site(self.scope).listeners(DISPATCH_LOG)
        if listeners:
            entry = DispatchLogEntry(
                execution=self.execution,
                sub_call_id=call.call_id or "",
                name=call.name,
                arguments=arguments,
                is_error=result.is_error,
                content=result.content,
            )

            async def original(_: DispatchLogEntry) -> Sequence[ContentBlock]:
                return result.content

            try:
                content = freeze_content(
                    await run_waterfall(listeners, entry, original, _is_content)
                )
            except (ListenerError, TypeError, ValueError):
                logger.warning("dispatch-log listener failed; logging the original", exc_info=True)
                content = result.content
        error_code = result.error.code if result.error is not None else None
        record = _log_record(
            call, arguments, error_code, thaw(list(content)), duration_ms, replayed=False
        )
        self.dispatch_log.append(record)
        return record

    def _result(self, outcome: RunOutcome) -> BodyResult:
        output = outcome.output
        # Honest wall time: from run_code entry until now, nested calls' drain included.
        stats = replace(outcome.stats, wall_ms=(time.monotonic() - self.started) * 1000.0)
        meta: dict[str, JSON] = {
            "dispatch_log": self.dispatch_log,
            "enforcement": thaw(outcome.enforcement_json()),
            "stats": thaw(stats.as_json()),
            "output": {"total_bytes": output.total_bytes, "truncated": output.truncated},
        }
        if self._diverged:
            return fail_run("replay-diverged", self._diverged, output.text, meta)
        if self._pending is not None:
            calls = tuple(self._completed[n] for n in sorted(self._completed))
            raise RunSuspended(calls, self._pending, output.text, meta)
        if self.caller.cancelled:
            message = f"tool call aborted\nCaptured output:\n{output.text}"
            raise BodyFailure("ABORTED", message, meta)
        if outcome.ok:
            if self.replay is not None and not self._reached_pending:
                detail = (
                    f"the resumed program ended without making call {self.replay.pending.n} "
                    f"({self.replay.pending.name}), the one that awaited approval; a resumed "
                    "program must make the same calls in the same order"
                )
                return fail_run("replay-diverged", detail, output.text, meta)
            return BodyResult(value={"result": outcome.value, "stdout": output.text}, meta=meta)
        kind = outcome.kind or "worker-exit"
        detail = outcome.detail
        if kind == "abort" and self._abort_reason:
            detail = self._abort_reason
        return fail_run(kind, detail, output.text, meta)



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


def _code(result: ToolResult) -> str | None:
    return result.error.code if result.error is not None else None


def _abandoned(result: ToolResult, lifetime: CancelSignal, halt: CancelSignal) -> bool:
    ended = lifetime.cancelled or halt.cancelled
    return ended and _code(result) == "ABORTED_BEFORE_DISPATCH"


def _reply(result: ToolResult) -> CallReply:
    if result.error is not None:
        return CallReply.failure(result.error.code, result.error.message)
    return CallReply.success(thaw(result.value))


def _recorded_reply(recorded: RecordedCall) -> CallReply:
    if recorded.ok:
        return CallReply.success(recorded.value)
    return CallReply.failure(recorded.code, recorded.message)


def _record(n: int, call: ToolCall, reply: CallReply, logged: dict[str, JSON]) -> RecordedCall:
    return RecordedCall(
        n=n,
        name=call.name,
        arguments=logged["arguments"],
        ok=reply.ok,
        value=reply.value if reply.ok else None,
        code=reply.code,
        message=reply.message,
        content=logged["content"],
    )


def _log_record(
    call: ToolCall,
    arguments: JSON,
    error_code: str | None,
    content: JSON,
    duration_ms: float,
    *,
    replayed: bool,
) -> dict[str, JSON]:
    """One entry of ``meta["dispatch_log"]``."""
    return {
        "sub_call_id": call.call_id or "",
        "name": call.name,
        "arguments": arguments,
        "is_error": error_code is not None,
        "error_code": error_code,
        "content": content,
        "duration_ms": round(duration_ms, 3),
        "replayed": replayed,
    }


def _show(name: str, arguments: object) -> str:
    text = json.dumps(arguments, sort_keys=True, default=str)
    if len(text) > 200:
        text = text[:197] + "..."
    return f"{name}({text})"
