"""The mapping between MCP and ptc, in both directions (DESIGN section 9).

MCP tool -> :class:`ptc.ToolDefinition` (mount), MCP ``CallToolResult`` -> a body's
value and content (mount), :class:`ptc.ToolResult` -> ``CallToolResult`` (serve).
Pure functions over the official SDK's types; no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias

import mcp.types as types
from pydantic import TypeAdapter, ValidationError

import ptc

__all__ = (
    "BadSchemaPolicy",
    "Built",
    "build_definition",
    "call_tool_result",
    "tool_return",
    "wraps_value",
)

BadSchemaPolicy: TypeAlias = Literal["raise", "lenient", "skip"]
BAD_SCHEMA_POLICIES: tuple[BadSchemaPolicy, ...] = ("raise", "lenient", "skip")
RUN_META_KEY = "ptc/run"
ERROR_META_KEY = "ptc/error"
_RUN_META_FIELDS = ("dispatch_log", "enforcement", "stats", "session")
_TEXT_SCHEMA: Mapping[str, ptc.JSON] = {"type": "string"}
_CONTENT_BLOCK: TypeAdapter[types.ContentBlock] = TypeAdapter(types.ContentBlock)


def render_value(value: ptc.JSON) -> list[ptc.ContentBlock]:
    """The render of a mounted tool (used when a post-execute listener replaces the value):
    a string as is, anything else as compact JSON."""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return [{"type": "text", "text": text}]


# -- MCP tool -> ptc definition ------------------------------------------------------------


class Built:
    """What :func:`build_definition` made of one MCP tool: a definition, or why not."""

    __slots__ = ("definition", "notes", "problem")

    def __init__(
        self,
        definition: ptc.ToolDefinition | None,
        notes: tuple[str, ...] = (),
        problem: str | None = None,
    ) -> None:
        self.definition = definition
        self.notes = notes
        self.problem = problem


def build_definition(
    tool: types.Tool,
    *,
    name: str,
    execute: Callable[[ptc.FrozenDict, ptc.ToolContext], object],
    structured: bool,
    timeout_seconds: float | None,
    on_bad_schema: BadSchemaPolicy,
) -> Built:
    """One MCP tool as a ptc definition, registered under ``name``.

    ``readOnlyHint: true`` makes it concurrency-safe; without an ``outputSchema`` its value
    is a string (the text blocks joined), with one it is ``structuredContent``. A schema
    ptc cannot accept follows ``on_bad_schema``: ``"raise"`` raises, ``"lenient"`` retries
    once with :func:`ptc.lenient_schema` (and raises if that is not enough), ``"skip"``
    returns the problem instead of a definition.
    """
    input_schema: Mapping[str, ptc.JSON] = tool.input_schema
    output_schema = tool.output_schema if structured else _TEXT_SCHEMA
    assert output_schema is not None
    annotations = tool.annotations
    read_only = annotations is not None and annotations.read_only_hint is True

    def define(
        inputs: Mapping[str, ptc.JSON], outputs: Mapping[str, ptc.JSON]
    ) -> ptc.ToolDefinition:
        return ptc.define_tool(
            name=name,
            description=tool.description or tool.title or f"The MCP tool `{tool.name}`.",
            input_schema=inputs,
            output=ptc.Output(outputs, render_value),
            execute=execute,
            concurrency_safe=True if read_only else None,
            timeout_seconds=timeout_seconds,
            title=tool.title,
            annotations=(
                None
                if annotations is None
                else annotations.model_dump(by_alias=True, mode="json", exclude_none=True)
            ),
            meta=ptc.thaw(tool.meta) if tool.meta else None,
        )

    try:
        return Built(define(input_schema, output_schema))
    except ptc.DefinitionError as exc:
        if on_bad_schema == "raise":
            raise
        if on_bad_schema == "skip" or not isinstance(exc, ptc.SchemaError):
            return Built(None, problem=str(exc))
    # "lenient": rewrite what lenient_schema knows, then try once more. (A schema too
    # large is refused by lenient_schema before it rewrites anything.)
    inputs, input_notes = _lenient(input_schema, f"tool {name!r}: inputSchema")
    notes = [f"inputSchema: {note}" for note in input_notes]
    outputs: Mapping[str, ptc.JSON] = output_schema
    if structured:
        outputs, output_notes = _lenient(output_schema, f"tool {name!r}: outputSchema")
        notes += [f"outputSchema: {note}" for note in output_notes]
    return Built(define(inputs, outputs), tuple(notes))


def _lenient(
    schema: Mapping[str, ptc.JSON], where: str
) -> tuple[Mapping[str, ptc.JSON], tuple[str, ...]]:
    try:
        return ptc.lenient_schema(schema)
    except ptc.SchemaError as exc:
        raise ptc.SchemaError([f"{where}: {problem}" for problem in exc.problems]) from exc


# -- MCP result -> ptc body value --------------------------------------------------------


def tool_return(result: types.CallToolResult, *, structured: bool) -> object:
    """A successful ``CallToolResult`` as a body's return: :class:`ptc.ToolReturn` with the
    server's own content blocks, or the bare value when the server sent no content.

    Raises ``RuntimeError`` (-> ``TOOL_ERROR``) with the server's text for ``isError``.
    """
    content = [
        block.model_dump(by_alias=True, mode="json", exclude_none=True) for block in result.content
    ]
    text = "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))
    if result.is_error:
        raise RuntimeError(text or "the MCP server reported an error without a message")
    # The parser made structuredContent of plain JSON values; the pipeline freezes a copy.
    value: object = result.structured_content if structured else text
    if not content:
        return value
    return ptc.ToolReturn(value, content)


# -- ptc result -> MCP result (serve) ------------------------------------------------------


def wraps_value(definition: ptc.ToolDefinition | None) -> bool | None:
    """How the definition's value is sent as ``structuredContent``: ``None`` not at all (no
    output schema to describe it), ``False`` as is (an object schema), ``True`` wrapped as
    ``{"result": value}``. Mirrors ``model_tools(format="mcp")``'s ``outputSchema``."""
    if definition is None:
        return None
    schema = definition.output.schema
    if not schema:
        return None
    return schema.get("type") != "object"


def call_tool_result(
    result: ptc.ToolResult, definition: ptc.ToolDefinition | None
) -> types.CallToolResult:
    """A ptc result as MCP's ``CallToolResult``: content, ``structuredContent`` when the
    tool has an output schema, ``isError``; a run's ``dispatch_log``, ``enforcement``,
    ``stats`` and ``session`` under ``_meta["ptc/run"]``, an error's code under
    ``_meta["ptc/error"]``."""
    content = [_content_block(block) for block in result.content]
    structured: dict[str, Any] | None = None
    wrap = wraps_value(definition)
    if not result.is_error and wrap is not None:
        value = ptc.thaw(result.value)
        if wrap:
            structured = {"result": value}
        elif isinstance(value, dict):
            structured = value
    meta: dict[str, Any] = {}
    run = {key: result.meta[key] for key in _RUN_META_FIELDS if key in result.meta}
    if run:
        meta[RUN_META_KEY] = ptc.thaw(run)
    if result.error is not None:
        meta[ERROR_META_KEY] = {"code": result.error.code, "message": result.error.message}
    return types.CallToolResult(
        content=content,
        structured_content=structured,
        is_error=result.is_error,
        _meta=meta or None,
    )


def _content_block(block: Mapping[str, ptc.JSON]) -> types.ContentBlock:
    try:
        return _CONTENT_BLOCK.validate_python(ptc.thaw(block))
    except ValidationError:
        # A host render made a block MCP has no type for: send it as its JSON text.
        return types.TextContent(type="text", text=json.dumps(ptc.thaw(block)))
