"""Small builders shared by the ptc tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import ptc
from ptc._calls._tools import compact_json_render

T = TypeVar("T")


def echo_tool(
    name: str, *, execute: Callable[..., Any] | None = None, **options: Any
) -> ptc.ToolDefinition:
    """A tool that returns its arguments (or runs ``execute``)."""

    async def default(arguments: Any, context: ptc.ToolContext) -> Any:
        return dict(arguments)

    options.setdefault("input_schema", {"type": "object"})
    options.setdefault("output", ptc.Output({}, compact_json_render))
    return ptc.define_tool(
        name=name, description=f"The {name} tool.", execute=execute or default, **options
    )


def recorder(seen: list[ptc.ToolExecution]) -> Any:
    """A pre-execute listener that records each execution and delegates."""

    async def record(execution: ptc.ToolExecution, nxt: Any) -> Any:
        seen.append(execution)
        return await nxt()

    return record


def noted(log: list[Any], entry: Any, answer: T) -> T:
    """Append ``entry`` to ``log`` and return ``answer`` (for one-line guards/classifiers)."""
    log.append(entry)
    return answer
