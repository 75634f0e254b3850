"""Running one attempt of a tool body and turning its value into a frozen result.

Steps 5 (the innermost part: the built-in timeout and the caller's signal re-fused) and 6
(body -> canonical value -> lossless copy -> output schema -> freeze -> render) of the
pipeline, for one attempt.

A body normally returns its canonical value and ``render`` makes the content. It may instead
return :class:`ToolReturn` to give its model-visible content itself (an MCP server's images,
say), or raise :class:`ToolUnavailable` when the service behind it cannot be reached.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio
import anyio.to_thread

from .._errors import NotJSONError
from .._json import EMPTY, FrozenDict, JSONLike, freeze, freeze_object
from .._results import ContentBlock, ErrorCode, ToolResult, error_result, freeze_content
from .._signals import CancelSignal, fuse, on_cancel
from ._tools import ToolContext, ToolDefinition, ToolExecution

__all__ = (
    "BodyFailure",
    "BodyResult",
    "ToolReturn",
    "ToolUnavailable",
    "apply_finalize_content",
    "attempt",
    "check_output",
    "rerender",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class BodyResult:
    """Internal: a body's value plus ``meta`` to freeze into ``ToolResult.meta`` (and,
    when set, the content the model sees instead of ``render(value)``)."""

    value: JSONLike
    meta: Mapping[str, JSONLike]
    content: Sequence[ContentBlock] | None = None


@dataclass(frozen=True, slots=True)
class ToolReturn:
    """What a tool body returns to give its model-visible content itself.

    ``value`` is the canonical value (checked against the output schema and frozen as
    usual; code-mode programs receive it); ``content`` is what the model sees instead of
    ``render(value)``. Post-execute listeners and ``finalize_content`` still apply.
    """

    value: object
    content: Sequence[ContentBlock]


class ToolUnavailable(Exception):  # noqa: N818 - a tagged outcome, named for what it carries
    """Raised by a tool body when the service behind the tool cannot be reached (a closed
    or unreachable server): the call ends as ``TOOL_UNAVAILABLE`` with this message."""


class BodyFailure(Exception):  # noqa: N818 - a tagged outcome, named for what it carries
    """Internal: raised by a body to fail with a chosen code instead of ``TOOL_ERROR``."""

    def __init__(
        self, code: ErrorCode, message: str, meta: Mapping[str, JSONLike] | None = None
    ) -> None:
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
                remove = on_cancel(signal, scope.cancel)
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
    except ToolUnavailable as exc:
        message = str(exc) or f"the service behind `{definition.name}` cannot be reached"
        return error_result(execution.call_id, definition.name, "TOOL_UNAVAILABLE", message)
    except Exception as exc:
        return error_result(
            execution.call_id, definition.name, "TOOL_ERROR", str(exc) or type(exc).__name__
        )
    presentation = execution.parent is None
    call_id = execution.call_id
    if isinstance(value, BodyResult):
        return check_output(
            definition,
            call_id,
            value.value,
            value.meta,
            presentation=presentation,
            content=value.content,
        )
    if isinstance(value, ToolReturn):
        return check_output(
            definition, call_id, value.value, None, presentation=presentation, content=value.content
        )
    return check_output(definition, call_id, value, None, presentation=presentation)


async def _invoke(definition: ToolDefinition, arguments: FrozenDict, context: ToolContext) -> Any:
    if definition.is_async:
        pending = definition.execute(arguments, context)
        assert inspect.isawaitable(pending)
        return await pending
    # A sync body cannot be interrupted: on cancel the call returns and the thread is abandoned.
    return await anyio.to_thread.run_sync(
        definition.execute, arguments, context, abandon_on_cancel=True
    )


def check_output(
    definition: ToolDefinition,
    call_id: str,
    value: object,
    meta: Mapping[str, JSONLike] | None,
    *,
    presentation: bool,
    content: Sequence[ContentBlock] | None = None,
) -> ToolResult:
    """Lossless copy -> output schema -> freeze -> render: a success or an error result.

    ``presentation``: attach the tool's presentation metadata (direct calls only);
    ``content``: the body's own content (:class:`ToolReturn`), used instead of ``render``.
    """
    name = definition.name
    try:
        frozen = freeze(value)
    except NotJSONError as exc:
        return error_result(call_id, name, "INVALID_OUTPUT", f"`{name}` returned non-JSON: {exc}")
    problems = definition.output_validator.problems(frozen)
    if problems:
        return error_result(
            call_id,
            name,
            "INVALID_OUTPUT",
            f"`{name}` returned a value that fails its output schema: " + "; ".join(problems),
        )
    if content is not None:
        try:
            shown = freeze_content(content)
        except (TypeError, NotJSONError) as exc:
            message = f"`{name}` returned bad content: {exc}"
            return error_result(call_id, name, "TOOL_ERROR", message)
    else:
        try:
            shown = freeze_content(definition.output.render(frozen))
        except Exception as exc:
            return error_result(call_id, name, "TOOL_ERROR", f"render of `{name}` failed: {exc!r}")
    try:
        frozen_meta = _result_meta(definition, meta, presentation=presentation)
    except NotJSONError as exc:
        return error_result(call_id, name, "TOOL_ERROR", f"`{name}` returned non-JSON meta: {exc}")
    return ToolResult(
        call_id=call_id, name=name, is_error=False, content=shown, value=frozen, meta=frozen_meta
    )


def _result_meta(
    definition: ToolDefinition, meta: Mapping[str, JSONLike] | None, *, presentation: bool
) -> FrozenDict:
    shown = definition.output.presentation_meta
    if shown is not None and presentation:
        # Presentation metadata is for the host UI of direct calls only, never nested ones.
        meta = {**(meta or {}), "presentation": dict(shown)}
    if not meta:
        return EMPTY
    return freeze_object(dict(meta), "$.meta")


def rerender(definition: ToolDefinition, result: ToolResult, value: object) -> ToolResult:
    """A post-execute ``Accept(value=...)``: re-validate and re-render, keeping ``meta``."""
    checked = check_output(definition, result.call_id, value, None, presentation=False)
    if checked.is_error:
        return checked
    return replace(checked, meta=result.meta, additional_contexts=result.additional_contexts)


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
