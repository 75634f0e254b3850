"""A ptc scope in an Anthropic SDK loop: answer a message's ``tool_use`` blocks, or hand the
scope's tools to the beta tool runner.

Extra ``ptc[anthropic]``. The SDK has no agent loop of its own besides the beta tool
runner, so the host's loop answers the model::

    response = await client.messages.create(model=..., tools=scope.model_tools("anthropic"), ...)
    while response.stop_reason == "tool_use":
        results = await anthropic.tool_results(scope, response, approve=ask_a_person)
        messages += [{"role": "assistant", "content": response.content},
                     {"role": "user", "content": results}]
        response = await client.messages.create(...)

:func:`tool_results` calls ``scope.call(name, input, call_id=<the tool_use id>)`` for each
``tool_use`` block, in order, and returns one ``tool_result`` block per call (content
converted with :func:`ptc.content.to_anthropic`, images included; ``is_error`` for a
failed call). **Approvals**: the SDK has none, so ``approve`` is the mechanism: an async
function given the paused run (:class:`ptc.Suspension`) that returns the person's answer
(``"allowed-once" | "rejected" | "cancelled"``); the program is paused (its worker gone)
while it waits, then resumes without making its calls again. Without ``approve``, a paused
call's block says it is paused; the run stays addressable by the tool_use id
(``scope.suspension(id)``, ``scope.resume(id, answer)``).

:func:`tool_results_sync` is the same for a sync host, through a portal on the runtime's
event loop. :func:`tools` gives the (async) beta tool runner
(``client.beta.messages.tool_runner(..., tools=anthropic.tools(scope))``) one tool per
visible tool; the runner passes no tool_use id, so ptc makes the call ids.
**Cancellation**: cancelling the task cancels ``scope.call``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from anthropic.lib.tools import BetaAsyncBuiltinFunctionTool, ToolError
from anthropic.types.beta import BetaToolUnionParam
from anyio.from_thread import BlockingPortal

import ptc
from ptc.content import to_anthropic

from ._common import Target, checked, error_text, is_suspended

__all__ = ("PtcBetaTool", "tool_results", "tool_results_sync", "tools")

Approve = Callable[[ptc.Suspension], Awaitable[ptc.ApprovalAnswer]]


async def tool_results(
    scope: Target, message: Any, *, approve: Approve | None = None
) -> list[dict[str, Any]]:
    """One ``tool_result`` block per ``tool_use`` block of ``message`` (an SDK ``Message``
    or its dict form), its id as the call id (see the module docstring); pass the
    conversation's :class:`ptc.Session` to keep ``run_code``'s state between its turns."""
    scope = checked(scope, "tool_results()")
    blocks = message.get("content") if isinstance(message, Mapping) else message.content
    out: list[dict[str, Any]] = []
    for block in blocks or ():
        use = block if isinstance(block, Mapping) else block.model_dump()
        if use.get("type") != "tool_use":
            continue
        call_id = str(use["id"])
        result = await scope.call(str(use["name"]), use.get("input") or {}, call_id=call_id)
        while approve is not None and is_suspended(result):
            paused = scope.suspension(call_id)
            if paused is None:
                break
            result = await scope.resume(call_id, await approve(paused))
        out.append(_block(call_id, result))
    return out


def tool_results_sync(
    scope: Target, message: Any, *, portal: BlockingPortal, approve: Approve | None = None
) -> list[dict[str, Any]]:
    """:func:`tool_results` for a sync host (the SDK's sync client): ``portal`` is an
    ``anyio.from_thread.BlockingPortal`` running the scope's runtime."""
    return portal.call(functools.partial(tool_results, scope, message, approve=approve))


def tools(scope: Target) -> list[PtcBetaTool]:
    """The scope's (or session's) tools for the beta tool runner (taken now: call again
    after a change)."""
    scope = checked(scope, "tools()")
    return [PtcBetaTool(scope, spec) for spec in scope.model_tools(format="anthropic")]


class PtcBetaTool(BetaAsyncBuiltinFunctionTool):
    """One tool of a ptc scope for the beta tool runner; errors raise the SDK's
    ``ToolError`` (the runner sends them as ``is_error`` results)."""

    def __init__(self, scope: Target, spec: Mapping[str, Any]) -> None:
        self.scope = scope
        self._spec = dict(spec)

    def to_dict(self) -> BetaToolUnionParam:
        return {
            "name": self._spec["name"],
            "description": self._spec["description"],
            "input_schema": self._spec["input_schema"],
        }

    async def call(self, input: object) -> Any:
        arguments = input if isinstance(input, Mapping) else {}
        result = await self.scope.call(str(self._spec["name"]), arguments)
        if result.is_error:
            raise ToolError(error_text(result))
        return to_anthropic(result.content)


def _block(call_id: str, result: ptc.ToolResult) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": to_anthropic(result.content),
    }
    if result.is_error:
        block["is_error"] = True
    return block
