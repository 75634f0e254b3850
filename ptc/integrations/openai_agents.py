"""A ptc scope as OpenAI Agents SDK function tools:
``Agent(name="a", tools=openai_agents.function_tools(scope))``.

Extra ``ptc[openai-agents]``. Each tool is a ``FunctionTool`` whose ``on_invoke_tool`` calls
``scope.call(name, arguments, call_id=ctx.tool_call_id)``. The list is live: a
``tools/change`` on the scope updates it in place (new tools, new descriptions), so the next
turn sees them. Schemas are OpenAI strict-mode schemas where the tool's schema allows it
(optional parameters nullable, a ``null`` meaning "not sent"), so the SDK's own strict
conversion, which would make them required, has nothing left to change.

- **Errors** come back as the tool's output text (``Error: ...``): the model reads them; the
  run goes on.
- **Approvals**: the SDK asks ``needs_approval`` only *before* a tool runs, so ``run_code``'s
  program runs inside that check: a program paused on a deferred approval makes the check
  answer yes, the run returns with an interruption (``result.interruptions``), and the host
  decides with ``state.approve(item)`` / ``state.reject(item)`` and ``Runner.run(agent,
  state)``. Approved, the paused program resumes (the calls it made are not made again) in
  ``on_invoke_tool``; a program that completes in the check is not run again. Rejected, the
  SDK tells the model and the paused run is dropped (seen the next time the tools are
  listed). The SDK cannot interrupt a tool call twice: a second deferred approval in the
  same program is answered ``"cancelled"`` (the program sees ``ASK_CANCELLED`` and the model
  can make that step in a new ``run_code`` call, which gets its own approval).
- **Cancellation** is the SDK's: cancelling the run cancels ``scope.call``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import anyio
from agents import FunctionTool, RunContextWrapper, Tool, ToolOutputImage
from agents.tool_context import ToolContext

import ptc

from ._common import Target, checked, error_text, is_suspended, scope_of

__all__ = ("PtcFunctionTools", "function_tools")



def function_tools(scope: Target) -> PtcFunctionTools:
    """The scope's tools as a live list of ``FunctionTool`` (see the module docstring)."""
    return PtcFunctionTools(scope)


class PtcFunctionTools(list[Tool]):
    """The scope's ``FunctionTool`` list, kept current: a ``tools/change`` marks it stale and
    the next turn (the SDK asks each tool's ``is_enabled``) updates it in place; ``close()``
    stops following the scope. Build it after ``await scope.prepare()`` to never block."""

    def __init__(self, scope: Target) -> None:
        super().__init__()
        self.scope = checked(scope, "function_tools()")
        self._computed: dict[str, ptc.ToolResult] = {}
        self._paused: set[str] = set()
        self._stale = False
        self._lock: anyio.Lock | None = None
        self._update(self.scope.model_tools(format="openai", strict=True))
        chain = scope_of(self.scope).lineage

        def changed(changed_scope: ptc.Scope) -> None:
            if any(changed_scope is s for s in chain):
                self._stale = True  # no SDK is built here: the next turn refreshes

        self._dispose = chain[0].on("tools/change", changed)

    def close(self) -> None:
        self._dispose()

    async def refresh(self) -> None:
        """Bring the list up to date with the scope (the next turn does it by itself)."""
        self._lock = self._lock or anyio.Lock()
        async with self._lock:
            if not self._stale:
                return
            self._stale = False
            await self.scope.prepare()
            self._update(self.scope.model_tools(format="openai", strict=True))

    def _update(self, specs: list[dict[str, Any]]) -> None:
        """Update tools in place (the same objects keep their names), add new, drop gone."""
        known = {tool.name: tool for tool in self if isinstance(tool, FunctionTool)}
        fresh: list[Tool] = []
        for spec in specs:
            fn = spec["function"]
            tool = known.get(str(fn["name"]))
            if tool is None:
                tool = self._tool(fn)
            else:
                tool.description = str(fn["description"])
                tool.strict_json_schema = fn.get("strict") is True
                tool.params_json_schema = dict(fn["parameters"])
            fresh.append(tool)
        self[:] = fresh

    def _tool(self, fn: dict[str, Any]) -> FunctionTool:
        name = str(fn["name"])

        async def invoke(ctx: ToolContext[Any], raw: str) -> Any:
            return await self._invoke(name, ctx, raw)

        async def enabled(ctx: RunContextWrapper[Any], agent: Any) -> bool:
            await self._sweep(ctx)
            await self.refresh()
            return any(tool.name == name for tool in self)

        return FunctionTool(
            name=name,
            description=str(fn["description"]),
            params_json_schema=dict(fn["parameters"]),
            on_invoke_tool=invoke,
            strict_json_schema=fn.get("strict") is True,
            is_enabled=enabled,
            needs_approval=self._needs_approval if name == ptc.RUN_CODE else False,
        )

    async def _needs_approval(
        self, ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str
    ) -> bool:
        """Run the program now: the SDK can interrupt only before the tool runs."""
        if self.scope.suspension(call_id) is not None:
            return True
        result = await self.scope.call(ptc.RUN_CODE, params, call_id=call_id)
        self._computed[call_id] = result
        if is_suspended(result):
            self._paused.add(call_id)
            return True
        return False

    async def _invoke(self, name: str, ctx: ToolContext[Any], raw: str) -> Any:
        call_id = ctx.tool_call_id
        computed = self._computed.pop(call_id, None)
        if computed is not None and not is_suspended(computed):
            return _output(computed)  # the program ran in the approval check
        if name == ptc.RUN_CODE and self.scope.suspension(call_id) is not None:
            self._paused.discard(call_id)
            result = await self.scope.resume(call_id, "allowed-once")
            while is_suspended(result):  # a second pause cannot interrupt this tool call
                result = await self.scope.resume(call_id, "cancelled")
            return _output(result)
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            return f"Error: the arguments are not JSON: {exc}"
        if not isinstance(arguments, dict):
            return "Error: the arguments must be a JSON object"
        return _output(await self.scope.call(name, arguments, call_id=call_id))

    async def _sweep(self, ctx: RunContextWrapper[Any]) -> None:
        """A rejected call is never invoked: drop its paused run (asked as tools are listed)."""
        for call_id in list(self._paused):
            if ctx.is_tool_approved(ptc.RUN_CODE, call_id) is False:
                self._paused.discard(call_id)
                self._computed.pop(call_id, None)
                if self.scope.suspension(call_id) is not None:
                    await self.scope.discard_suspension(call_id)


def _output(result: ptc.ToolResult) -> Any:
    """What the model reads: the text, or the text and the images."""
    if result.is_error:
        return error_text(result)
    images = list(_images(result.content))
    if not images:
        return result.text
    return [result.text, *images] if result.text else images


def _images(blocks: Iterable[ptc.ContentBlock]) -> Iterable[ToolOutputImage]:
    for block in blocks:
        data, mime = block.get("data"), block.get("mimeType")
        if block.get("type") == "image" and isinstance(data, str) and isinstance(mime, str):
            yield ToolOutputImage(image_url=f"data:{mime};base64,{data}")
