"""A ptc scope as a pydantic-ai toolset: ``Agent(model, toolsets=[pydantic_ai.toolset(scope)])``.

Extra ``ptc[pydantic-ai]``. The toolset lists ``scope.model_tools()`` at every step (a
``tools/change`` shows on the next model request) and calls ``scope.call(name, arguments,
call_id=ctx.tool_call_id)``; ptc validates the arguments, so pydantic-ai's own validation
accepts anything.

- **Errors** are :class:`~pydantic_ai.exceptions.ToolFailed`: the model sees ptc's error text,
  and no retry budget is spent (pydantic-ai's default ``ModelRetry`` path ends a run after
  two failing programs).
- **Approvals**: a run paused on a deferred approval (``SUSPENDED``) raises
  :class:`~pydantic_ai.exceptions.ApprovalRequired` with the pending call as metadata, so the
  run ends with :class:`~pydantic_ai.tools.DeferredToolRequests`. The host answers with
  ``DeferredToolResults(approvals={tool_call_id: True | ToolDenied(...)})``: an approved call
  comes back with ``ctx.tool_call_approved`` and resumes the paused program (the calls it
  made are not made again); a denied one never comes back, so the toolset drops its
  suspension when it sees the denial in the history (the model is told the call was denied,
  nothing of it runs again).
- **Cancellation** is pydantic-ai's: cancelling the run cancels ``scope.call``, which ends
  the program as ``ABORTED``.
- ``strict=True`` sends OpenAI strict-mode schemas (optional parameters nullable; a ``null``
  means "not sent"); the default lets pydantic-ai decide per model.
- **Live output**: what a program prints reaches the run's event stream
  (``event_stream_handler``, ``run_stream_events``, ``iter``) as ``CodeOutputEvent`` events,
  stamped with the ``run_code`` call's ``tool_call_id``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai import CustomEvent, RunContext
from pydantic_ai.exceptions import ApprovalRequired, ToolFailed
from pydantic_ai.messages import BinaryContent, ModelRequest, ToolReturnPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

import ptc

from ._common import Target, approval_request, checked, error_text, is_suspended

__all__ = ("CodeOutputEvent", "PtcToolset", "toolset")

# ptc's pipeline validates arguments (INVALID_ARGS is data for the model, not a retry).
_ANY_ARGUMENTS = SchemaValidator(core_schema.any_schema())


@dataclass(kw_only=True)
class CodeOutputEvent(CustomEvent):
    """A chunk of a running program's output (the ``code/output`` event)."""

    text: str
    stream: str = "stdout"


def toolset(scope: Target, *, id: str | None = None, strict: bool | None = None) -> PtcToolset:
    """The scope's tools as a pydantic-ai toolset (see the module docstring); given a
    :class:`ptc.Session`, ``run_code`` keeps its state between the calls of a conversation."""
    return PtcToolset(scope, id=id, strict=strict)


class PtcToolset(AbstractToolset[Any]):
    """A pydantic-ai toolset backed by a ptc scope."""

    def __init__(self, scope: Target, *, id: str | None = None, strict: bool | None = None):
        self.scope = checked(scope, "toolset()")
        self._id = id
        self._strict = strict

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        await self._drop_denied(ctx)
        await self.scope.prepare()  # run_code's SDK, built off the event loop
        tools: dict[str, ToolsetTool[Any]] = {}
        for spec in self.scope.model_tools(format="openai", strict=self._strict is True):
            fn = spec["function"]
            assert isinstance(fn, dict)
            strict = fn.get("strict") if self._strict else self._strict
            definition = ToolDefinition(
                name=str(fn["name"]),
                description=str(fn["description"]),
                parameters_json_schema=fn["parameters"],  # type: ignore[arg-type]
                strict=strict if isinstance(strict, bool) else None,
                sequential=fn["name"] == ptc.RUN_CODE,
            )
            tools[definition.name] = ToolsetTool(
                toolset=self, tool_def=definition, max_retries=0, args_validator=_ANY_ARGUMENTS
            )
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        call_id = ctx.tool_call_id or None
        stream = _stream_output(self.scope, ctx, call_id) if name == ptc.RUN_CODE else None
        try:
            if ctx.tool_call_approved and call_id and self.scope.suspension(call_id) is not None:
                result = await self.scope.resume(call_id, "allowed-once")
            else:
                result = await self.scope.call(name, tool_args, call_id=call_id)
        finally:
            if stream is not None:
                stream()
        if is_suspended(result):
            paused = self.scope.suspension(result.call_id)
            raise ApprovalRequired(metadata=approval_request(paused) if paused else None)
        if result.is_error:
            raise ToolFailed(error_text(result))
        return _model_content(result)

    async def _drop_denied(self, ctx: RunContext[Any]) -> None:
        """A denied call is never called again: its paused run would wait until it expired."""
        for message in ctx.messages[-2:]:
            if not isinstance(message, ModelRequest):
                continue
            for part in message.parts:
                if (
                    isinstance(part, ToolReturnPart)
                    and part.outcome == "denied"
                    and self.scope.suspension(part.tool_call_id) is not None
                ):
                    await self.scope.discard_suspension(part.tool_call_id)


def _stream_output(
    scope: Target, ctx: RunContext[Any], call_id: str | None
) -> ptc.Disposer | None:
    """Forward the call's ``code/output`` chunks into the run's event stream."""
    if call_id is None:
        return None

    async def forward(chunk: Mapping[str, str]) -> None:
        await ctx.emit(CodeOutputEvent(text=chunk["text"], stream=chunk["stream"]))

    return scope.on_output(call_id, forward)


def _model_content(result: ptc.ToolResult) -> Any:
    """The text of the result; with images, the text and the images as binary content."""
    images = [b for b in result.content if b.get("type") == "image"]
    if not images:
        return result.text
    parts: list[Any] = [result.text] if result.text else []
    for block in images:
        data, mime = block.get("data"), block.get("mimeType")
        if isinstance(data, str) and isinstance(mime, str):
            parts.append(BinaryContent(data=base64.b64decode(data), media_type=mime))
    return parts
