"""Tool definitions (``define_tool``) and what one execution of a tool is made of.

:class:`ToolDefinition` is validated once, at construction: name, description, options and
both schemas (against their meta-schema, one cached validator each). :class:`ToolExecution`
is one call as the pipeline and its listeners see it; :class:`ToolContext` is what a body
receives besides its arguments.
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias

from .._errors import DefinitionError, NotJSONError, UsageError
from .._json import JSON, FrozenDict, JSONLike, freeze_object
from .._results import ContentBlock, ToolResult
from .._schema import SchemaValidator, compile_schema
from .._signals import CancelSignal

__all__ = (
    "NAME_PATTERN",
    "RUN_CODE",
    "Classifier",
    "Execute",
    "ExecutionToken",
    "Output",
    "Render",
    "ScopeRef",
    "ToolContext",
    "ToolDefinition",
    "ToolExecution",
    "compact_json_render",
    "define_tool",
)

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")  # 128: MCP's limit
"""Check names with ``NAME_PATTERN.fullmatch``: ``match`` accepts a trailing newline."""
RUN_CODE = "run_code"
"""The one tool no layer holds: code mode's (reserved: it cannot be registered, restricted
or called from inside a program)."""

Render: TypeAlias = Callable[[JSON], Sequence[ContentBlock]]
"""``render(value) -> content``: pure; turns a tool's canonical value into content blocks."""
Classifier: TypeAlias = Callable[[FrozenDict], object]
"""``concurrency_safe`` as a function of the (validated, frozen) arguments."""
FinalizeContent: TypeAlias = Callable[[Sequence[ContentBlock]], Sequence[ContentBlock]]


class ScopeRef(Protocol):
    """The scope an execution runs in: a :class:`ptc.Scope`, seen from this layer.

    Compare scopes with ``is``; ``isinstance(execution.scope, ptc.Scope)`` gives the full
    class when more than these members is needed.
    """

    @property
    def name(self) -> str:
        """The scope's name."""
        ...

    @property
    def path(self) -> str:
        """The names from the root down, joined by ``/``."""
        ...

    async def call(
        self,
        name: str,
        arguments: Mapping[str, JSONLike],
        *,
        call_id: str | None = None,
        signal: CancelSignal | None = None,
    ) -> ToolResult:
        """``Scope.call``: one call through the pipeline, never raising for policy or tool
        failures."""
        ...


class ExecutionToken:
    """An opaque identity for one execution; compare with ``is``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<ptc.ExecutionToken>"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolExecution:
    """One call as the pipeline sees it. Frozen; ``arguments`` are frozen JSON.

    ``parent`` is the token of the ``run_code`` execution a nested call came from
    (``None`` for a direct call); ``signal`` is what a body should watch.
    """

    call_id: str
    root_call_id: str
    name: str
    arguments: FrozenDict
    scope: ScopeRef
    token: ExecutionToken
    parent: ExecutionToken | None
    signal: CancelSignal


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolContext:
    """What a tool body receives besides its arguments."""

    execution: ToolExecution
    signal: CancelSignal


Execute: TypeAlias = Callable[[FrozenDict, ToolContext], object]
"""``execute(arguments, context)``: sync (run in a worker thread) or async; returns the value."""


def compact_json_render(value: JSON) -> list[ContentBlock]:
    """The default render: one text block with the value as compact JSON (strings as is)."""
    if isinstance(value, str):
        text = value
    elif type(value) is int:
        text = int.__repr__(value)  # what the encoder writes, without making one
    else:
        text = _COMPACT.encode(value)
    return [{"type": "text", "text": text}]


_COMPACT = json.JSONEncoder(separators=(",", ":"))
"""``json.dumps(value, separators=(",", ":"))``, without making an encoder per call."""


@dataclass(frozen=True, slots=True)
class Output:
    """A tool's output contract: the JSON Schema of its value and a pure ``render``."""

    schema: Mapping[str, JSONLike]
    render: Render
    presentation_meta: Mapping[str, JSONLike] | None = None


@dataclass(frozen=True, kw_only=True)
class ToolDefinition:
    """A validated tool. Build it with :func:`define_tool` or ``@tool``.

    ``title`` (a human-readable name), ``annotations`` (MCP tool annotations such as
    ``{"readOnlyHint": true}``) and ``meta`` (MCP ``_meta``) are descriptive only: ptc
    keeps them (frozen) and shows them in ``model_tools(format="mcp")``; they change
    nothing about how a call runs.

    ``cooperative_cancel`` (for ``run_code``): the pipeline does not cancel the body's
    task when the signal fires; the body must react to ``context.signal`` itself. Such a
    tool cannot have ``timeout_seconds``.
    """

    name: str
    description: str
    input_schema: Mapping[str, JSONLike]
    output: Output
    execute: Execute
    concurrency_safe: bool | Classifier | None = None
    timeout_seconds: float | None = None
    finalize_content: FinalizeContent | None = None
    title: str | None = None
    annotations: Mapping[str, JSON] | None = None
    meta: Mapping[str, JSON] | None = None
    cooperative_cancel: bool = False
    input_validator: SchemaValidator = field(init=False, repr=False, compare=False)
    output_validator: SchemaValidator = field(init=False, repr=False, compare=False)
    is_async: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME_PATTERN.fullmatch(self.name):
            raise DefinitionError(f"tool name {self.name!r} must match {NAME_PATTERN.pattern}")
        if not isinstance(self.description, str) or not self.description.strip():
            raise DefinitionError(f"tool {self.name!r}: description must be a non-blank string")
        if not isinstance(self.output, Output):
            raise UsageError(f"tool {self.name!r}: output must be ptc.Output(schema, render)")
        if not callable(self.output.render):
            raise UsageError(f"tool {self.name!r}: output.render must be callable")
        if not callable(self.execute):
            raise UsageError(f"tool {self.name!r}: execute must be callable")
        safe = self.concurrency_safe
        if not (safe is None or isinstance(safe, bool) or callable(safe)):
            raise UsageError(f"tool {self.name!r}: concurrency_safe must be None, bool or callable")
        timeout = self.timeout_seconds
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, int | float):
                raise UsageError(f"tool {self.name!r}: timeout_seconds must be a number")
            if not (math.isfinite(timeout) and timeout > 0):
                raise DefinitionError(
                    f"tool {self.name!r}: timeout_seconds must be positive and finite"
                )
            if self.cooperative_cancel:
                raise DefinitionError(
                    f"tool {self.name!r}: a cooperative_cancel tool has no timeout"
                )
        if self.title is not None and not isinstance(self.title, str):
            raise UsageError(f"tool {self.name!r}: title must be a string or None")
        for label in ("annotations", "meta"):
            object.__setattr__(self, label, _frozen_mapping(self.name, label, getattr(self, label)))
        inputs = compile_schema(self.input_schema, f"tool {self.name!r}: input_schema")
        outputs = compile_schema(self.output.schema, f"tool {self.name!r}: output.schema")
        object.__setattr__(self, "input_validator", inputs)
        object.__setattr__(self, "output_validator", outputs)
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.execute))


def _frozen_mapping(name: str, label: str, value: object) -> FrozenDict | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise UsageError(f"tool {name!r}: {label} must be a mapping or None")
    try:
        return freeze_object(dict(value), f"$.{label}")
    except NotJSONError as exc:
        raise DefinitionError(f"tool {name!r}: {label} is not JSON: {exc}") from exc


def define_tool(
    *,
    name: str,
    description: str,
    input_schema: Mapping[str, JSONLike],
    output: Output,
    execute: Execute,
    concurrency_safe: bool | Classifier | None = None,
    timeout_seconds: float | None = None,
    finalize_content: FinalizeContent | None = None,
    title: str | None = None,
    annotations: Mapping[str, JSON] | None = None,
    meta: Mapping[str, JSON] | None = None,
) -> ToolDefinition:
    """Define a tool from explicit schemas.

    ``execute(arguments, context)`` may be sync (run in a worker thread) or async; it
    returns the canonical value, or :class:`ptc.ToolReturn` to give its model-visible
    content itself. ``output`` must be :class:`Output` with both ``schema`` and
    ``render``. ``title``, ``annotations`` and ``meta`` are kept for MCP (see
    :class:`ToolDefinition`). Raises
    :class:`ptc.DefinitionError` (a ``ValueError``) for a bad name, a blank description
    or a schema that fails the JSON Schema meta-schema (the message names the path).
    """
    if output is None or not isinstance(output, Output):
        raise UsageError(f"define_tool({name!r}): output=ptc.Output(schema, render) is required")
    return ToolDefinition(
        name=name,
        description=description,
        input_schema=input_schema,
        output=output,
        execute=execute,
        concurrency_safe=concurrency_safe,
        timeout_seconds=timeout_seconds,
        finalize_content=finalize_content,
        title=title,
        annotations=annotations,
        meta=meta,
    )
