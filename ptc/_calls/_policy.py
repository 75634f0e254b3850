"""The policy decisions of a call: pre-execute, the approver, guards (steps 2-3) and
post-execute (step 7), as functions over plain data.

They decide; :class:`ptc._calls._pipeline.Call` owns the order of the stages and the state.
Every failure of a listener, guard or approver fails closed and is reported as a
:class:`Refusal` (or a ``BLOCKED`` result), never raised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias

import anyio

from .._json import JSONLike
from .._results import ErrorCode, ToolResult, error_content, error_result, freeze_content, text_of
from .._signals import CancelSignal, on_cancel
from ._body import rerender
from ._decisions import (
    Accept,
    Allow,
    ApprovalRequest,
    Approver,
    Ask,
    Block,
    Cancel,
    Deny,
    PostDecision,
    PostExecute,
    PreDecision,
)
from ._events import AnyListener, ListenerError, describe, run_waterfall
from ._tools import ToolDefinition, ToolExecution

__all__ = (
    "ABORTED_BEFORE_DISPATCH",
    "Guard",
    "Refusal",
    "check_guards",
    "decide",
    "post_execute",
    "refusal_result",
)

Guard: TypeAlias = Callable[[ToolExecution], "str | None"]
"""``guard(execution) -> str | None``: a string denies the call; ``None`` lets it through."""

_ALLOW = Allow()
_ACCEPT = Accept()
_ANSWERS: dict[str, tuple[ErrorCode, str]] = {
    "rejected": ("ASK_REJECTED", "the user rejected this call"),
    "cancelled": ("ASK_CANCELLED", "the approval request was cancelled"),
    "unavailable": ("ASK_UNAVAILABLE", "approval is unavailable: the approver said so"),
}


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a call may not be dispatched. ``final`` refusals skip post-execute."""

    code: ErrorCode
    message: str
    info: JSONLike = None
    final: bool = False


ABORTED_BEFORE_DISPATCH = Refusal(
    "ABORTED_BEFORE_DISPATCH", "tool call aborted before dispatch", final=True
)


def _is_pre(decision: object) -> bool:
    return isinstance(decision, Allow | Deny | Cancel | Ask)


def _is_post(decision: object) -> bool:
    return isinstance(decision, Accept | Block)


async def _allow(_: ToolExecution) -> PreDecision:
    return _ALLOW


async def _accept(_: PostExecute) -> PostDecision:
    return _ACCEPT


def _fired(signal: CancelSignal | None) -> bool:
    return signal is not None and signal.cancelled


async def decide(
    execution: ToolExecution,
    *,
    listeners: Sequence[AnyListener],
    approver: Approver | None,
    guards: Sequence[Guard],
    signal: CancelSignal | None,
) -> Refusal | None:
    """Steps 2-4: pre-execute, the approver, the guards and the signal checks (before
    pre-execute, after an ask, right before dispatch). ``None``: the call may run."""
    if _fired(signal):
        return ABORTED_BEFORE_DISPATCH
    decision: PreDecision = _ALLOW
    if listeners:
        try:
            decision = await run_waterfall(listeners, execution, _allow, _is_pre)
        except ListenerError as exc:
            return Refusal("DENIED", f"pre-execute listener failed: {exc}")
    if isinstance(decision, Deny):
        return Refusal("DENIED", str(decision.reason), decision.info)
    if isinstance(decision, Cancel):
        return Refusal("CANCELLED", "the call was cancelled by policy")
    if isinstance(decision, Ask):
        refusal = await _ask(execution, decision, approver, signal)
        # An ask cut short by the signal is ASK_CANCELLED; a completed one is re-checked.
        if refusal is not None and refusal.code == "ASK_CANCELLED":
            return refusal
        if _fired(signal):
            return ABORTED_BEFORE_DISPATCH
        if refusal is not None:
            return refusal
    refusal = check_guards(execution, guards)
    if refusal is not None:
        return refusal
    return ABORTED_BEFORE_DISPATCH if _fired(signal) else None


def check_guards(execution: ToolExecution, guards: Sequence[Guard]) -> Refusal | None:
    """Deny-only guards in order; the first string denies, a failing guard denies."""
    for guard in guards:
        try:
            verdict: object = guard(execution)
        except Exception as exc:
            return Refusal("DENIED", f"guard {describe(guard)} failed: {exc!r}")
        if isinstance(verdict, str):
            return Refusal("DENIED", verdict)
        if verdict is not None:
            return Refusal("DENIED", f"guard {describe(guard)} returned invalid {verdict!r}")
    return None


async def _ask(
    execution: ToolExecution, decision: Ask, approver: Approver | None, signal: CancelSignal | None
) -> Refusal | None:
    """Ask the approver; ``None`` means allowed-once."""
    if approver is None:
        return Refusal("ASK_UNAVAILABLE", "approval is unavailable: no approver is configured")
    request = ApprovalRequest(
        execution=execution, reason=decision.reason, display_reason=decision.display_reason
    )
    answer: object = None
    try:
        if signal is None:
            answer = await approver(request)
        else:
            # A pending ask resolves as cancelled when the caller's signal fires.
            with anyio.CancelScope() as scope:
                remove = on_cancel(signal, scope.cancel)
                try:
                    answer = await approver(request)
                finally:
                    remove()
            if scope.cancelled_caught:
                return Refusal(
                    "ASK_CANCELLED", "the approval request was cancelled: the call was aborted"
                )
    except Exception as exc:
        return Refusal("ASK_UNAVAILABLE", f"approval is unavailable: the approver raised {exc!r}")
    if answer == "allowed-once" and isinstance(answer, str):
        return None
    if answer == "deferred" and isinstance(answer, str):
        if execution.parent is None:
            return Refusal(
                "ASK_UNAVAILABLE",
                "approval is unavailable: the approver deferred a direct call (only calls made "
                "inside a run_code program can wait for a later decision)",
            )
        # The run is suspended; the call is neither refused nor finished (not emitted).
        info = {"reason": decision.reason, "display_reason": decision.display_reason}
        return Refusal("SUSPENDED", "approval deferred: the run is suspended", info, final=True)
    if isinstance(answer, str) and answer in _ANSWERS:
        return Refusal(*_ANSWERS[answer])
    return Refusal("ASK_UNAVAILABLE", f"approval is unavailable: the approver answered {answer!r}")


async def post_execute(
    execution: ToolExecution,
    result: ToolResult,
    definition: ToolDefinition | None,
    listeners: Sequence[AnyListener],
) -> ToolResult:
    """Step 7: the post-execute waterfall (denials pass here too)."""
    if not listeners:
        return result
    payload = PostExecute(execution=execution, result=result)
    try:
        decision = await run_waterfall(listeners, payload, _accept, _is_post)
        return _apply(result, decision, definition)
    except (ListenerError, TypeError, ValueError) as exc:
        return _blocked(result, f"post-execute listener failed: {exc}")


def _apply(
    result: ToolResult, decision: PostDecision, definition: ToolDefinition | None
) -> ToolResult:
    if isinstance(decision, Block):
        feedback = decision.feedback
        if isinstance(feedback, str):
            return _blocked(result, feedback)
        content = freeze_content(feedback)
        blocked = _blocked(result, text_of(content) or "blocked by policy")
        return replace(blocked, content=content)
    if decision.has_value:
        if result.is_error or definition is None:
            raise ListenerError("Accept(value=...) cannot replace the value of an error result")
        return rerender(definition, result, decision.value)
    if decision.content is not None:
        return replace(result, content=freeze_content(decision.content))
    return result


def _blocked(result: ToolResult, message: str) -> ToolResult:
    blocked = error_result(result.call_id, result.name, "BLOCKED", message)
    return replace(blocked, content=error_content(message))


def refusal_result(execution: ToolExecution, refusal: Refusal) -> ToolResult:
    """The error result of a refusal (``info`` lands in ``meta["info"]`` when it is JSON)."""
    meta = {"info": refusal.info} if refusal.info is not None else None
    try:
        return error_result(execution.call_id, execution.name, refusal.code, refusal.message, meta)
    except ValueError:
        return error_result(execution.call_id, execution.name, refusal.code, refusal.message)
