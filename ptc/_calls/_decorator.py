"""``@tool``: a tool definition derived from a function's signature through pydantic."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypedDict, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model

from .._errors import UsageError
from .._json import FrozenDict, JSONLike
from ._tools import (
    Classifier,
    Output,
    Render,
    ToolContext,
    ToolDefinition,
    compact_json_render,
    define_tool,
)

__all__ = ("ToolOptions", "tool", "tool_decorator")

_ANY_SCHEMA: Mapping[str, JSONLike] = {}


class ToolOptions(TypedDict, total=False):
    """The options of ``@tool(...)``, ``@runtime.tool(...)`` and ``@scope.tool(...)``."""

    name: str | None
    description: str | None
    concurrency_safe: bool | Classifier | None
    timeout_seconds: float | None
    render: Render | None


@overload
def tool(
    fn: Callable[..., Any],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    concurrency_safe: bool | Classifier | None = None,
    timeout_seconds: float | None = None,
    render: Render | None = None,
) -> ToolDefinition: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    concurrency_safe: bool | Classifier | None = None,
    timeout_seconds: float | None = None,
    render: Render | None = None,
) -> Callable[[Callable[..., Any]], ToolDefinition]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    concurrency_safe: bool | Classifier | None = None,
    timeout_seconds: float | None = None,
    render: Render | None = None,
) -> ToolDefinition | Callable[[Callable[..., Any]], ToolDefinition]:
    """Turn a function into a :class:`ToolDefinition` (usable bare or with options).

    The input schema comes from the parameters, the output schema from the return
    annotation (none -> any JSON), the description from the docstring. A parameter
    annotated ``ToolContext`` receives the context and is left out of the schema.
    Arguments are converted by pydantic; the return value is dumped to JSON by pydantic.
    """

    def build(func: Callable[..., Any]) -> ToolDefinition:
        return _build(
            func,
            name=name,
            description=description,
            concurrency_safe=concurrency_safe,
            timeout_seconds=timeout_seconds,
            render=render,
        )

    return build(fn) if fn is not None else build


def tool_decorator(
    fn: Callable[..., Any] | None,
    options: ToolOptions,
    register: Callable[[ToolDefinition], object],
) -> ToolDefinition | Callable[[Callable[..., Any]], ToolDefinition]:
    """``@scope.tool`` / ``@runtime.tool``: :func:`tool` with ``options``, then ``register``."""

    def build(func: Callable[..., Any]) -> ToolDefinition:
        definition = _build(func, **options)
        register(definition)
        return definition

    return build(fn) if fn is not None else build


def _build(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    concurrency_safe: bool | Classifier | None = None,
    timeout_seconds: float | None = None,
    render: Render | None = None,
) -> ToolDefinition:
    tool_name = name or func.__name__
    hints = get_type_hints(func)
    fields: dict[str, Any] = {}
    context_params: list[str] = []
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise UsageError(f"@tool {tool_name!r}: parameter {param.name!r} must be nameable")
        annotation = hints.get(param.name, Any)
        if annotation is ToolContext:
            context_params.append(param.name)
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    model: type[BaseModel] = create_model(
        f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    input_schema = model.model_json_schema()
    input_schema.pop("title", None)

    returns = hints.get("return", inspect.Signature.empty)
    adapter: TypeAdapter[Any] | None = None
    output_schema: Mapping[str, JSONLike] = _ANY_SCHEMA
    if returns not in (inspect.Signature.empty, Any):
        adapter = TypeAdapter(returns)
        output_schema = adapter.json_schema(mode="serialization")

    def convert(arguments: FrozenDict, context: ToolContext) -> dict[str, Any]:
        parsed = model.model_validate(arguments)
        kwargs = {key: getattr(parsed, key) for key in fields}
        for param_name in context_params:
            kwargs[param_name] = context
        return kwargs

    def dump(value: Any) -> object:
        return adapter.dump_python(value, mode="json") if adapter is not None else value

    execute: Callable[[FrozenDict, ToolContext], object]
    if inspect.iscoroutinefunction(func):

        async def execute_async(arguments: FrozenDict, context: ToolContext) -> object:
            return dump(await func(**convert(arguments, context)))

        execute = execute_async
    else:

        def execute_sync(arguments: FrozenDict, context: ToolContext) -> object:
            return dump(func(**convert(arguments, context)))

        execute = execute_sync

    doc = description if description is not None else inspect.getdoc(func)
    return define_tool(
        name=tool_name,
        description=doc or "",
        input_schema=input_schema,
        output=Output(output_schema, render or compact_json_render),
        execute=execute,
        concurrency_safe=concurrency_safe,
        timeout_seconds=timeout_seconds,
    )
