"""Pipeline steps 2-4 (pre-execute, approver, guards, signal checks) and 7 (post-execute)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import anyio

from ._body import rerender
from ._decisions import (
    Accept,
    Allow,
    ApprovalRequest,
    Ask,
    Block,
    Cancel,
    Deny,
    PostDecision,
    PostExecute,
    PreDecision,
)
from ._events import POST_EXECUTE, PRE_EXECUTE, ListenerError, describe, run_waterfall
from ._results import ToolResult, error_content, error_result, freeze_content, text_of

if TYPE_CHECKING:
    from ._pipeline import PendingCall

_ALLOW = Allow()
_ACCEPT = Accept()
_ANSWERS = {
    "rejected": ("ASK_REJECTED", "the user rejected this call"),
    "cancelled": ("ASK_CANCELLED", "the approval request was cancelled"),
    "unavailable": ("ASK_UNAVAILABLE", "approval is unavailable: the approver said so"),
}


def _is_pre(decision: object) -> bool:
    return isinstance(decision, Allow | Deny | Cancel | Ask)


def _is_post(decision: object) -> bool:
    return isinstance(decision, Accept | Block)


async def _allow() -> PreDecision:
    return _ALLOW


async def _accept() -> PostDecision:
    return _ACCEPT


def _aborted_before_dispatch(call: PendingCall) -> bool:
    if call.signal is not None and call.signal.cancelled:
        call.end("ABORTED_BEFORE_DISPATCH", "tool call aborted before dispatch")
        return True
    return False


def _deny(call: PendingCall, code: str, message: str, info: object = None) -> None:
    # A denial is not final: it still passes post-execute.
    meta = {"info": info} if info is not None else None
    try:
        call.result = error_result(call.execution.call_id, call.execution.name, code, message, meta)
    except ValueError:
        call.result = error_result(call.execution.call_id, call.execution.name, code, message)


async def prepare(call: PendingCall) -> None:
    """Steps 2-4. Leaves ``call.result`` unset when the call may be dispatched."""
    if _aborted_before_dispatch(call):
        return
    scope = call.scope
    execution = call.execution
    listeners = scope.runtime._listeners.for_scope(PRE_EXECUTE, scope._chain)
    decision: PreDecision = _ALLOW
    if listeners:
        try:
            decision = await run_waterfall(listeners, execution, _allow, _is_pre)
        except ListenerError as exc:
            _deny(call, "DENIED", f"pre-execute listener failed: {exc}")
            return
    if isinstance(decision, Deny):
        _deny(call, "DENIED", str(decision.reason), decision.info)
        return
    if isinstance(decision, Cancel):
        _deny(call, "CANCELLED", "the call was cancelled by policy")
        return
    if isinstance(decision, Ask):
        refusal = await _ask(call, decision)
        # An ask cut short by the signal is ASK_CANCELLED; a completed one is re-checked.
        if refusal is not None and refusal[0] == "ASK_CANCELLED":
            _deny(call, *refusal)
            return
        if _aborted_before_dispatch(call):
            return
        if refusal is not None:
            _deny(call, *refusal)
            return
    for layer in scope._chain:
        for guard in layer._guards:
            try:
                verdict: object = guard(execution)
            except Exception as exc:
                _deny(call, "DENIED", f"guard {describe(guard)} failed: {exc!r}")
                return
            if isinstance(verdict, str):
                _deny(call, "DENIED", verdict)
                return
            if verdict is not None:
                _deny(call, "DENIED", f"guard {describe(guard)} returned invalid {verdict!r}")
                return
    _aborted_before_dispatch(call)


async def _ask(call: PendingCall, decision: Ask) -> tuple[str, str] | None:
    """Ask the approver; ``None`` means allowed-once, else (code, message)."""
    approver = call.scope.runtime.approver
    if approver is None:
        return ("ASK_UNAVAILABLE", "approval is unavailable: no approver is configured")
    request = ApprovalRequest(
        execution=call.execution, reason=decision.reason, display_reason=decision.display_reason
    )
    answer: object = None
    signal = call.signal
    try:
        if signal is None:
            answer = await approver(request)
        else:
            # A pending ask resolves as cancelled when the caller's signal fires.
            async with anyio.create_task_group() as group:
                remove = signal._on_cancel(group.cancel_scope.cancel)
                try:
                    answer = await approver(request)
                finally:
                    remove()
            if group.cancel_scope.cancelled_caught:
                return ("ASK_CANCELLED", "the approval request was cancelled: the call was aborted")
    except Exception as exc:
        return ("ASK_UNAVAILABLE", f"approval is unavailable: the approver raised {exc!r}")
    if answer == "allowed-once" and isinstance(answer, str):
        return None
    if isinstance(answer, str) and answer in _ANSWERS:
        return _ANSWERS[answer]
    return ("ASK_UNAVAILABLE", f"approval is unavailable: the approver answered {answer!r}")


async def finalize(call: PendingCall) -> None:
    """Step 7: the post-execute waterfall (denials pass here too)."""
    result = call.result
    assert result is not None
    scope = call.scope
    listeners = scope.runtime._listeners.for_scope(POST_EXECUTE, scope._chain)
    if not listeners:
        return
    payload = PostExecute(execution=call.execution, result=result)
    try:
        decision = await run_waterfall(listeners, payload, _accept, _is_post)
        call.result = _apply(call, result, decision)
    except (ListenerError, TypeError) as exc:
        call.result = _blocked(result, f"post-execute listener failed: {exc}")


def _apply(call: PendingCall, result: ToolResult, decision: PostDecision) -> ToolResult:
    if isinstance(decision, Block):
        feedback = decision.feedback
        if isinstance(feedback, str):
            return _blocked(result, feedback)
        content = freeze_content(feedback)
        blocked = _blocked(result, text_of(content) or "blocked by policy")
        return replace(blocked, content=content)
    if decision.has_value:
        if result.is_error or call.definition is None:
            raise ListenerError("Accept(value=...) cannot replace the value of an error result")
        return rerender(call.definition, result, decision.value)
    if decision.content is not None:
        return replace(result, content=freeze_content(decision.content))
    return result


def _blocked(result: ToolResult, message: str) -> ToolResult:
    blocked = error_result(result.call_id, result.name, "BLOCKED", message)
    return replace(blocked, content=error_content(message))


__all__: list[str] = ["finalize", "prepare"]
