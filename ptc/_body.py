"""Running one attempt of a tool body and turning its value into a frozen result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import anyio
import anyio.to_thread

from ._json import EMPTY, JSON, FrozenDict, NotJSONError, freeze
from ._results import ToolResult, error_result, freeze_content
from ._signals import CancelSignal, fuse
from ._tools import ToolContext, ToolDefinition, ToolExecution


@dataclass(frozen=True, kw_only=True, slots=True)
class BodyResult:
    """Internal: a body's value plus ``meta`` to freeze into ``ToolResult.meta``."""

    value: JSON
    meta: Mapping[str, JSON]


class BodyFailure(Exception):  # noqa: N818 - a tagged outcome, named for what it carries
    """Internal: raised by a body to fail with a chosen code instead of ``TOOL_ERROR``."""

    def __init__(self, code: str, message: str, meta: Mapping[str, JSON] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.meta = meta


async def attempt(
    definition: ToolDefinition, execution: ToolExecution, caller: CancelSignal | None
) -> ToolResult:
    """One body attempt: re-fuse the caller's signal, apply the built-in timeout, run."""
    signal = execution.signal
    detach = None
    if caller is not None and signal is not caller:
        # A wrapper swapped the signal: fuse the caller's back in so it cannot be detached.
        signal, detach = fuse(caller, signal)
        execution = replace(execution, signal=signal)
    try:
        timeout = definition.timeout_seconds
        if timeout is None or definition.cooperative_cancel:
            return await _run_body(definition, execution)
        with anyio.move_on_after(timeout) as deadline:
            return await _run_body(definition, execution)
        # Reached only when the deadline cancelled the body.
        assert deadline.cancelled_caught
        return error_result(
            execution.call_id,
            definition.name,
            "TIMEOUT",
            f"tool `{definition.name}` timed out after {timeout:g} s",
        )
    finally:
        if detach is not None:
            detach()


async def _run_body(definition: ToolDefinition, execution: ToolExecution) -> ToolResult:
    signal = execution.signal
    context = ToolContext(execution=execution, signal=signal)
    arguments = execution.arguments
    try:
        if definition.cooperative_cancel:
            value = await _invoke(definition, arguments, context)
        else:
            with anyio.CancelScope() as scope:
                remove = signal._on_cancel(scope.cancel)
                try:
                    value = await _invoke(definition, arguments, context)
                finally:
                    remove()
            if scope.cancelled_caught:
                return error_result(
                    execution.call_id, definition.name, "ABORTED", "tool call aborted"
                )
    except BodyFailure as failure:
        return error_result(
            execution.call_id, definition.name, failure.code, failure.message, failure.meta
        )
    except Exception as exc:
        return error_result(
            execution.call_id, definition.name, "TOOL_ERROR", str(exc) or type(exc).__name__
        )
    if isinstance(value, BodyResult):
        return check_output(definition, execution, value.value, value.meta)
    return check_output(definition, execution, value, None)


async def _invoke(definition: ToolDefinition, arguments: JSON, context: ToolContext) -> Any:
    if definition._is_async:
        return await definition.execute(arguments, context)
    # A sync body cannot be interrupted: on cancel the call returns and the thread is abandoned.
    return await anyio.to_thread.run_sync(
        definition.execute, arguments, context, abandon_on_cancel=True
    )


def check_output(
    definition: ToolDefinition,
    execution: ToolExecution,
    value: object,
    meta: Mapping[str, JSON] | None,
) -> ToolResult:
    """Lossless copy -> output schema -> freeze -> render: a success or an error result."""
    name = definition.name
    call_id = execution.call_id
    try:
        frozen = freeze(value)
    except NotJSONError as exc:
        return error_result(call_id, name, "INVALID_OUTPUT", f"`{name}` returned non-JSON: {exc}")
    validator = definition._output_validator
    if not validator.is_valid(frozen):
        problems = sorted(f"{e.json_path}: {e.message}" for e in validator.iter_errors(frozen))
        return error_result(
            call_id,
            name,
            "INVALID_OUTPUT",
            f"`{name}` returned a value that fails its output schema: " + "; ".join(problems),
        )
    try:
        content = freeze_content(definition.output.render(frozen))
    except Exception as exc:
        return error_result(call_id, name, "TOOL_ERROR", f"render of `{name}` failed: {exc!r}")
    try:
        frozen_meta = _result_meta(definition, execution, meta)
    except NotJSONError as exc:
        return error_result(call_id, name, "TOOL_ERROR", f"`{name}` returned non-JSON meta: {exc}")
    return ToolResult(
        call_id=call_id, name=name, is_error=False, content=content, value=frozen, meta=frozen_meta
    )


def _result_meta(
    definition: ToolDefinition, execution: ToolExecution, meta: Mapping[str, JSON] | None
) -> FrozenDict:
    presentation = definition.output.presentation_meta
    if presentation is not None and execution.parent is None:
        # Presentation metadata is for the host UI of direct calls only, never nested ones.
        meta = {**(meta or {}), "presentation": dict(presentation)}
    if not meta:
        return EMPTY
    frozen: FrozenDict = freeze(dict(meta), "$.meta")
    return frozen


def rerender(definition: ToolDefinition, result: ToolResult, value: object) -> ToolResult:
    """A post-execute ``Accept(value=...)``: re-validate and re-render, keeping ``meta``."""
    execution_like = _Ids(result.call_id)
    checked = check_output(definition, execution_like, value, None)  # type: ignore[arg-type]
    if checked.is_error:
        return checked
    return replace(checked, meta=result.meta, additional_contexts=result.additional_contexts)


@dataclass(frozen=True, slots=True)
class _Ids:
    call_id: str
    parent: object = True  # never attach presentation metadata on a re-render


def apply_finalize_content(definition: ToolDefinition, result: ToolResult) -> ToolResult:
    """Apply the tool-owned ``finalize_content`` once; a failure becomes ``TOOL_ERROR``."""
    assert definition.finalize_content is not None
    try:
        content = freeze_content(definition.finalize_content(result.content))
    except Exception as exc:
        return error_result(
            result.call_id, result.name, "TOOL_ERROR", f"finalize_content failed: {exc!r}"
        )
    return replace(result, content=content)
