"""A small code-mode test double so ptc's core is tested without the real ``_codemode``.

``FakeCodeMode`` provides the four hooks the runtime uses. Its ``run_code`` tool runs a
tiny "program": a JSON list of ``[name, arguments]`` pairs, each dispatched as a nested
call (``parent`` = run_code's token) through the full pipeline.
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Mapping
from typing import Any

import pytest

import ptc
from ptc._pipeline import BodyFailure, BodyResult


class FakeCodeMode:
    def __init__(self, runtime: ptc.ToolRuntime) -> None:
        self.runtime = runtime
        self.changes: list[ptc.Scope] = []
        self.closed = False

    def run_code_tool(
        self, scope: ptc.Scope, tools: Mapping[str, ptc.ToolDefinition]
    ) -> ptc.ToolDefinition:
        async def execute(arguments: Any, context: ptc.ToolContext) -> Any:
            program = json.loads(arguments["code"])
            execution = context.execution
            results = []
            for n, (name, args) in enumerate(program, start=1):
                result = await execution.scope._call(
                    name,
                    args,
                    call_id=f"{execution.call_id}:ptc:{n}",
                    root_call_id=execution.root_call_id,
                    parent=execution.token,
                    signal=context.signal,
                )
                if result.is_error:
                    assert result.error is not None
                    raise BodyFailure(
                        "CODE_RUN_FAILED", f"code run failed (exception): {result.error.code}"
                    )
                results.append(result.value)
            return BodyResult(value={"result": results, "stdout": ""}, meta={"calls": n})

        return ptc.define_tool(
            name="run_code",
            description="Run a program.",
            input_schema={
                "type": "object",
                "properties": {"code": {"type": "string"}, "description": {"type": "string"}},
                "required": ["code"],
                "additionalProperties": False,
            },
            output=ptc.Output({"type": "object"}, lambda v: [{"type": "text", "text": "ok"}]),
            execute=execute,
        )

    def sdk(self, scope: ptc.Scope) -> str:
        return "\n".join(sorted(n for n in scope.view().visible if n != "run_code"))

    def on_change(self, scope: ptc.Scope) -> None:
        self.changes.append(scope)

    async def aclose(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def fake_code_mode(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> type[FakeCodeMode] | None:
    # Code-mode tests (marked real_code_mode) exercise the real ptc._codemode.
    if request.node.get_closest_marker("real_code_mode") is not None:
        return None
    module = types.ModuleType("ptc._codemode")
    module.CodeMode = FakeCodeMode  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ptc._codemode", module)
    return FakeCodeMode
