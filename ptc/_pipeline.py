"""The call pipeline (DESIGN section 3) as separate stages the scheduler can interleave.

``create`` (step 1) -> ``prepare`` (steps 2-4: pre-execute, approver, guards, signal
checks) -> ``dispatch`` (steps 5-6: execute waterfall, body, output) -> ``finalize``
(step 7: post-execute) -> ``finish`` (step 8). :func:`run_call` chains them for one call.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._body import BodyFailure, BodyResult, apply_finalize_content, attempt, check_output
from ._events import EXECUTE, RESULT, ListenerError, describe, emit
from ._json import JSON, NotJSONError, freeze
from ._policy import finalize, prepare
from ._results import ToolResult, error_result
from ._signals import CancelSignal
from ._tools import RESERVED_NAME, ExecutionToken, ToolDefinition, ToolExecution

if TYPE_CHECKING:
    from ._scopes import Scope

__all__ = ["BodyFailure", "BodyResult", "PendingCall", "create", "dispatch", "run_call"]

_ids = itertools.count(1)
_prefix = os.urandom(4).hex()


class PendingCall:
    """One call between stages. ``result`` set and ``final`` true means skip to finish."""

    __slots__ = ("definition", "execution", "final", "result", "scope", "signal")

    def __init__(self, scope: Scope, execution: ToolExecution, signal: CancelSignal | None):
        self.scope = scope
        self.execution = execution
        self.signal = signal
        self.definition: ToolDefinition | None = None
        self.result: ToolResult | None = None
        self.final = False

    def end(self, code: str, message: str, meta: Mapping[str, JSON] | None = None) -> None:
        """End the call early: straight to ``finish``, skipping the waterfalls."""
        self.result = error_result(self.execution.call_id, self.execution.name, code, message, meta)
        self.final = True


def new_call_id() -> str:
    return f"call_{_prefix}_{next(_ids)}"


def create(
    scope: Scope,
    name: str,
    arguments: object,
    *,
    call_id: str | None = None,
    root_call_id: str | None = None,
    parent: ExecutionToken | None = None,
    signal: CancelSignal | None = None,
) -> PendingCall:
    """Step 1: identity, lossless frozen arguments, visibility, mode collapse, schema check."""
    call_id = call_id or new_call_id()
    bad_json: NotJSONError | None = None
    try:
        frozen = freeze(arguments)
    except NotJSONError as exc:
        frozen, bad_json = None, exc
    execution = ToolExecution(
        call_id=call_id,
        root_call_id=root_call_id or call_id,
        name=name,
        arguments=frozen,
        scope=scope,
        token=ExecutionToken(),
        parent=parent,
        signal=signal if signal is not None else CancelSignal(),
    )
    call = PendingCall(scope, execution, signal)
    if bad_json is not None:
        call.end("INVALID_ARGS", f"invalid arguments for `{name}`: not lossless JSON: {bad_json}")
        return call
    if not isinstance(frozen, dict):
        call.end("INVALID_ARGS", f"invalid arguments for `{name}`: $: must be an object")
        return call
    definition = scope.view().visible.get(name)
    if definition is None:
        call.end("UNKNOWN_TOOL", f"unknown tool `{name}`")
        return call
    if name == RESERVED_NAME and parent is not None:
        call.end("UNKNOWN_TOOL", f"`{RESERVED_NAME}` cannot be called from inside a program")
        return call
    if parent is None and name != RESERVED_NAME and scope.code_options()[0] == "code":
        if signal is not None and signal.cancelled:
            call.end("ABORTED_BEFORE_DISPATCH", "tool call aborted before dispatch")
        else:
            call.end(
                "UNKNOWN_TOOL",
                f"unknown tool `{name}`: only `{RESERVED_NAME}` is callable directly"
                f" — call `{name}` from inside a `{RESERVED_NAME}` program instead",
            )
        return call
    call.definition = definition
    validator = definition._input_validator
    if not validator.is_valid(frozen):
        problems = sorted(
            (f"{error.json_path}: {error.message}" for error in validator.iter_errors(frozen)),
        )
        call.end("INVALID_ARGS", f"invalid arguments for `{name}`: " + "; ".join(problems))
    return call


def is_parallel(call: PendingCall) -> bool:
    """Fail-closed classification, asked after argument validation: exactly ``True`` only."""
    definition = call.definition
    if call.final or definition is None or definition.name == RESERVED_NAME:
        return False
    safe = definition.concurrency_safe
    if safe is True or safe is None or safe is False:
        return safe is True
    try:
        return safe(call.execution.arguments) is True
    except Exception:
        return False


async def dispatch(call: PendingCall) -> None:
    """Steps 5-6: the execute around-waterfall, the body and its output."""
    if call.result is not None:
        return
    definition = call.definition
    assert definition is not None
    scope = call.scope
    listeners = scope.runtime._listeners.for_scope(EXECUTE, scope._chain)
    caller = call.signal
    produced: list[ToolResult] = []

    async def innermost(execution: ToolExecution) -> ToolResult:
        result = await attempt(definition, execution, caller)
        produced.append(result)
        return result

    if not listeners:
        result = await innermost(call.execution)
    else:
        try:
            result = await _execute_waterfall(listeners, call.execution, innermost)
        except ListenerError as exc:
            result = error_result(
                call.execution.call_id,
                definition.name,
                "TOOL_ERROR",
                f"execute listener failed: {exc}",
            )
        else:
            if not any(result is r for r in produced) and not result.is_error:
                result = check_output(definition, call.execution, result.value, result.meta)
    if caller is not None and caller.cancelled:
        error = result.error
        if error is None or error.code != "ABORTED":
            result = error_result(
                call.execution.call_id, definition.name, "ABORTED", "tool call aborted"
            )
    call.result = result


async def _execute_waterfall(
    listeners: list[Any], execution: ToolExecution, innermost: Any
) -> ToolResult:
    async def step(index: int, current: ToolExecution) -> ToolResult:
        if index == len(listeners):
            result: ToolResult = await innermost(current)
            return result
        listener = listeners[index]

        async def next_(*, signal: CancelSignal | None = None) -> ToolResult:
            if signal is not None and not isinstance(signal, CancelSignal):
                raise TypeError("next(signal=...) takes a ptc.CancelSignal")
            swapped = current if signal is None else replace(current, signal=signal)
            return await step(index + 1, swapped)

        try:
            out = await listener(current, next_)
        except ListenerError:
            raise
        except Exception as exc:
            raise ListenerError(f"listener {describe(listener)} raised {exc!r}") from exc
        if not isinstance(out, ToolResult):
            raise ListenerError(f"listener {describe(listener)} returned invalid {out!r}")
        return out

    return await step(0, execution)


async def finish(call: PendingCall) -> ToolResult:
    """Step 8: tool-owned ``finalize_content`` once, then emit ``tools/result``."""
    result = call.result
    assert result is not None
    if call.definition is not None and call.definition.finalize_content is not None:
        result = apply_finalize_content(call.definition, result)
    call.result = result
    scope = call.scope
    listeners = scope.runtime._listeners.for_scope(RESULT, scope._chain)
    if listeners:
        await emit(listeners, result, RESULT)
    return result


async def run_call(
    scope: Scope,
    name: str,
    arguments: object,
    *,
    call_id: str | None = None,
    root_call_id: str | None = None,
    parent: ExecutionToken | None = None,
    signal: CancelSignal | None = None,
) -> ToolResult:
    """All eight steps for one call."""
    call = create(
        scope,
        name,
        arguments,
        call_id=call_id,
        root_call_id=root_call_id,
        parent=parent,
        signal=signal,
    )
    if not call.final:
        await prepare(call)
        if not call.final:
            await dispatch(call)
            await finalize(call)
    return await finish(call)
