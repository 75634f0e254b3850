"""Tool definitions: ``define_tool``, the ``@tool`` decorator and what a body receives."""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ._json import JSON
from ._results import ContentBlock
from ._signals import CancelSignal

if TYPE_CHECKING:
    from ._scopes import Scope

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
RESERVED_NAME = "run_code"

Render: TypeAlias = Callable[[JSON], Sequence[ContentBlock]]
Classifier: TypeAlias = Callable[[JSON], object]
Execute: TypeAlias = Callable[[JSON, "ToolContext"], Any]


class ExecutionToken:
    """An opaque identity for one execution; compare with ``is``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<ptc.ExecutionToken>"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolExecution:
    """One call as the pipeline sees it. Frozen; ``arguments`` are frozen JSON."""

    call_id: str
    root_call_id: str
    name: str
    arguments: JSON
    scope: Scope
    token: ExecutionToken
    parent: ExecutionToken | None
    signal: CancelSignal


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolContext:
    """What a tool body receives besides its arguments."""

    execution: ToolExecution
    signal: CancelSignal


def compact_json_render(value: JSON) -> list[ContentBlock]:
    """The default render: one text block with the value as compact JSON (strings as is)."""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return [{"type": "text", "text": text}]


@dataclass(frozen=True, slots=True)
class Output:
    """A tool's output contract: the JSON Schema of its value and a pure ``render``."""

    schema: Mapping[str, JSON]
    render: Render
    presentation_meta: Mapping[str, JSON] | None = None


def _check_schema(schema: object, where: str) -> Draft202012Validator:
    if not isinstance(schema, Mapping):
        raise ValueError(f"{where} must be a JSON Schema object, got {type(schema).__name__}")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        path = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        raise ValueError(f"{where}{path} is not a valid JSON Schema: {exc.message}") from exc
    return Draft202012Validator(schema)


@dataclass(frozen=True, kw_only=True)
class ToolDefinition:
    """A validated tool. Build it with :func:`define_tool` or ``@tool``.

    ``cooperative_cancel`` (internal): the pipeline does not cancel the body's task when
    the signal fires; the body must react to ``context.signal`` itself. Such a tool cannot
    have ``timeout_seconds`` (``ValueError``).
    """

    name: str
    description: str
    input_schema: Mapping[str, JSON]
    output: Output
    execute: Execute
    concurrency_safe: bool | Classifier | None = None
    timeout_seconds: float | None = None
    finalize_content: Callable[[Sequence[ContentBlock]], Sequence[ContentBlock]] | None = None
    cooperative_cancel: bool = False
    _input_validator: Draft202012Validator = field(init=False, repr=False, compare=False)
    _output_validator: Draft202012Validator = field(init=False, repr=False, compare=False)
    _is_async: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME_PATTERN.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {NAME_PATTERN.pattern}")
        if not isinstance(self.description, str) or not self.description.strip():
            raise ValueError(f"tool {self.name!r}: description must be a non-blank string")
        if not isinstance(self.output, Output):
            raise TypeError(f"tool {self.name!r}: output must be ptc.Output(schema, render)")
        if not callable(self.output.render):
            raise TypeError(f"tool {self.name!r}: output.render must be callable")
        if not callable(self.execute):
            raise TypeError(f"tool {self.name!r}: execute must be callable")
        safe = self.concurrency_safe
        if not (safe is None or isinstance(safe, bool) or callable(safe)):
            raise TypeError(f"tool {self.name!r}: concurrency_safe must be None, bool or callable")
        timeout = self.timeout_seconds
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, int | float):
                raise TypeError(f"tool {self.name!r}: timeout_seconds must be a number")
            if not (math.isfinite(timeout) and timeout > 0):
                raise ValueError(f"tool {self.name!r}: timeout_seconds must be positive and finite")
            if self.cooperative_cancel:
                raise ValueError(f"tool {self.name!r}: a cooperative_cancel tool has no timeout")
        inputs = _check_schema(self.input_schema, f"tool {self.name!r}: input_schema")
        outputs = _check_schema(self.output.schema, f"tool {self.name!r}: output.schema")
        object.__setattr__(self, "_input_validator", inputs)
        object.__setattr__(self, "_output_validator", outputs)
        object.__setattr__(self, "_is_async", inspect.iscoroutinefunction(self.execute))


def define_tool(
    *,
    name: str,
    description: str,
    input_schema: Mapping[str, JSON],
    output: Output,
    execute: Execute,
    concurrency_safe: bool | Classifier | None = None,
    timeout_seconds: float | None = None,
    finalize_content: Callable[[Sequence[ContentBlock]], Sequence[ContentBlock]] | None = None,
) -> ToolDefinition:
    """Define a tool from explicit schemas.

    ``execute(arguments, context)`` may be sync (run in a worker thread) or async.
    ``output`` must be :class:`Output` with both ``schema`` and ``render``. Raises
    ``ValueError`` for a bad name, a blank description or a schema that fails the
    JSON Schema meta-schema (the message names the path).
    """
    if output is None or not isinstance(output, Output):
        raise TypeError(f"define_tool({name!r}): output=ptc.Output(schema, render) is required")
    return ToolDefinition(
        name=name,
        description=description,
        input_schema=input_schema,
        output=output,
        execute=execute,
        concurrency_safe=concurrency_safe,
        timeout_seconds=timeout_seconds,
        finalize_content=finalize_content,
    )
