"""Small builders shared by the ptc tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ptc
from ptc._tools import compact_json_render


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
