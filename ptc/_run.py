"""One ``run_code`` run: the worker, nested dispatch, the dispatch log, the result.

Every SDK call a program makes arrives here as a batch and becomes a full pipeline run
(``call_id = "<outer>:ptc:<n>"``, the outer ``root_call_id``, the same scope, ``parent`` =
run_code's token, a signal fused from the outer call and the run's lifetime), scheduled by
one :class:`~ptc._scheduler.Scheduler` per run so section-4 rules hold across batches.

The wall clock bounds the run itself, from ``run_code`` entry: nested calls run in a
detached task group (:mod:`ptc._detached`), so when the run ends its started calls drain
only until the deadline (or a short grace when the run was aborted or its caller
cancelled); a call still running then is cancelled, and if it ignores that too it is
abandoned and logged, never awaited.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import anyio
from anyio.abc import TaskGroup

from worker import CallReply, CallRequest, Limits, RunOutcome, RunRequest, WorkerBackend

from ._body import BodyFailure, BodyResult
from ._decisions import DispatchLogEntry
from ._detached import Detached, start_detached
from ._events import DISPATCH_LOG, ListenerError, logger, run_waterfall
from ._json import JSON, thaw
from ._results import ContentBlock, ToolResult, freeze_content
from ._scheduler import Scheduler, ToolCall
from ._scopes import Scope, call_site
from ._signals import CancelSignal, fuse, on_cancel
from ._tools import ToolExecution

DRAIN_GRACE_S = 0.02
"""How long cancelled nested calls get to stop before they are abandoned (within the
50 ms kill budget after the deadline)."""


def failure_message(kind: str, detail: str, output: str) -> str:
    """``code run failed (<kind>): <detail>`` followed by the captured output."""
    return f"code run failed ({kind}): {detail}\nCaptured output:\n{output}"


def _is_content(value: object) -> bool:
    # Shape only; the full check happens once, when the logged content is frozen.
    return isinstance(value, list | tuple)


class ProgramRun:
    """The state of one run (see the module docstring)."""

    def __init__(
        self,
        execution: ToolExecution,
        scope: Scope,
        signal: CancelSignal,
        limits: Limits,
        *,
        started: float,
    ) -> None:
        self.execution = execution
        self.scope = scope
        self.caller = signal
        self.lifetime = CancelSignal()
        self.signal, self._detach = fuse(signal, self.lifetime)
        self.scheduler = Scheduler(limits.max_parallel_calls)
        self.started = started
        self.deadline = started + limits.wall_seconds
        self.dispatch_log: list[JSON] = []
        self._count = 0
        self._abort = anyio.Event()
        self._abort_reason = ""
        self._group: TaskGroup | None = None
        self._calls_host: Detached | None = None
        self._serving = anyio.Event()
        self._stop_serving = anyio.Event()
        self._in_flight: dict[str, str] = {}

    def abort(self, reason: str) -> None:
        """Kill the worker; the run ends as ``abort`` (the runtime is closing)."""
        self._abort_reason = reason
        self._abort.set()

    async def execute(self, backend: WorkerBackend, request: RunRequest) -> BodyResult:
        remove = on_cancel(self.caller, self._abort.set)
        host = self._calls_host = start_detached(
            self._serve, name=f"ptc-run-calls:{self.execution.call_id}"
        )
        try:
            await self._serving.wait()
            outcome = await backend.run(
                request, on_calls=self.handle, abort=self._abort, started=self.started
            )
        except BaseException:
            # Cancelled (or a host bug): nested calls see their signal fire *before* they
            # are cancelled, then get a short grace, then are abandoned.
            self.lifetime.cancel("run_code cancelled")
            host.cancel()
            with anyio.CancelScope(shield=True):
                await self._drain(host, time.monotonic())
            raise
        finally:
            self.lifetime.cancel("run_code settled")  # unstarted calls are abandoned
            self._stop_serving.set()
            remove()
        try:
            until = time.monotonic() if self._abort.is_set() else self.deadline
            await self._drain(host, until)
        finally:
            self._detach()
        return self._result(outcome)

    async def _serve(self) -> None:
        """The detached task group the run's nested calls run in."""
        async with anyio.create_task_group() as group:
            self._group = group
            self._serving.set()
            await self._stop_serving.wait()

    async def _drain(self, host: Detached, until: float) -> None:
        """Let started calls finish until ``until``; then cancel them, give them
        :data:`DRAIN_GRACE_S`, and abandon (and log) whatever still runs."""
        with anyio.move_on_after(until - time.monotonic()):
            await host.done.wait()
        if host.done.is_set():
            return
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
        """The worker's call handler: dispatch in the run's own (detached) task group, so
        a batch in flight when the worker dies still drains before ``run_code`` returns."""
        batch = []
        for call in calls:
            self._count += 1
            call_id = f"{self.execution.call_id}:ptc:{self._count}"
            batch.append(ToolCall(call.tool, call.arguments, call_id=call_id))
        replies: list[CallReply] = []
        done = anyio.Event()
        assert self._group is not None
        self._group.start_soon(self._dispatch, batch, replies, done)
        await done.wait()
        return replies

    async def _dispatch(
        self, batch: list[ToolCall], replies: list[CallReply], done: anyio.Event
    ) -> None:
        for call in batch:
            self._in_flight[call.call_id or ""] = call.name
        try:
            started = time.perf_counter()
            # The site is taken per call: visibility is re-checked at dispatch time.
            results = await self.scheduler.run(
                lambda: call_site(self.scope),
                batch,
                signal=self.signal,
                parent=self.execution.token,
                root_call_id=self.execution.root_call_id,
            )
            duration_ms = (time.perf_counter() - started) * 1000
            for call, result in zip(batch, results, strict=True):
                if not _abandoned(result, self.lifetime):
                    await self._log(call, result, duration_ms)
                replies.append(_reply(result))
        finally:
            for call in batch:
                self._in_flight.pop(call.call_id or "", None)
            done.set()

    async def _log(self, call: ToolCall, result: ToolResult, duration_ms: float) -> None:
        entry = DispatchLogEntry(
            execution=self.execution,
            sub_call_id=call.call_id or "",
            name=call.name,
            arguments=thaw(call.arguments),  # a copy independent of the dispatched one
            is_error=result.is_error,
            content=result.content,
        )
        content: Sequence[ContentBlock] = result.content
        listeners = call_site(self.scope).listeners(DISPATCH_LOG)
        if listeners:

            async def original(_: DispatchLogEntry) -> Sequence[ContentBlock]:
                return result.content

            try:
                content = freeze_content(
                    await run_waterfall(listeners, entry, original, _is_content)
                )
            except (ListenerError, TypeError, ValueError):
                logger.warning("dispatch-log listener failed; logging the original", exc_info=True)
                content = result.content
        self.dispatch_log.append(
            {
                "sub_call_id": entry.sub_call_id,
                "name": call.name,
                "arguments": entry.arguments,
                "is_error": result.is_error,
                "error_code": result.error.code if result.error is not None else None,
                "content": thaw(list(content)),
                "duration_ms": round(duration_ms, 3),
            }
        )

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
        if outcome.ok:
            return BodyResult(value={"result": outcome.value, "stdout": output.text}, meta=meta)
        if self.caller.cancelled:
            message = f"tool call aborted\nCaptured output:\n{output.text}"
            raise BodyFailure("ABORTED", message, meta)
        kind = outcome.kind or "worker-exit"
        detail = outcome.detail
        if kind == "abort" and self._abort_reason:
            detail = self._abort_reason
        meta["failure"] = {"kind": kind, "detail": detail}
        raise BodyFailure("CODE_RUN_FAILED", failure_message(kind, detail, output.text), meta)


def _abandoned(result: ToolResult, lifetime: CancelSignal) -> bool:
    error = result.error
    return lifetime.cancelled and error is not None and error.code == "ABORTED_BEFORE_DISPATCH"


def _reply(result: ToolResult) -> CallReply:
    if result.error is not None:
        return CallReply.failure(result.error.code, result.error.message)
    return CallReply.success(thaw(result.value))


__all__ = ["ProgramRun", "failure_message"]
