"""define_tool, @tool and what a definition accepts at registration."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import ptc
from ptc._calls._tools import compact_json_render
from tests._typing import data

ANY = ptc.Output({}, compact_json_render)


async def noop(arguments: Any, context: ptc.ToolContext) -> Any:
    return None


def make(**overrides: Any) -> ptc.ToolDefinition:
    options: dict[str, Any] = {
        "name": "t",
        "description": "A tool.",
        "input_schema": {"type": "object"},
        "output": ANY,
        "execute": noop,
    }
    options.update(overrides)
    return ptc.define_tool(**options)


@pytest.mark.parametrize("name", ["a", "get-weather.v2", "__proto__", "x" * 64, "x" * 128, "A_1"])
def test_valid_names_are_accepted(name: str) -> None:
    assert make(name=name).name == name


@pytest.mark.parametrize(
    # A trailing newline is where `$` alone would still match.
    "name",
    ["", "x" * 129, "has space", "é", "a/b", "a:b", "evil\n", "evil\r\n", "\nevil", "a\x00"],
)
def test_invalid_names_raise_value_error(name: str) -> None:
    with pytest.raises(ValueError, match="must match"):
        make(name=name)


@pytest.mark.parametrize("description", ["", "   ", "\n"])
def test_blank_descriptions_rejected(description: str) -> None:
    with pytest.raises(ValueError, match="description"):
        make(description=description)


def test_output_requires_schema_and_render() -> None:
    with pytest.raises(TypeError):
        make(output=None)
    with pytest.raises(TypeError):
        ptc.Output({})  # type: ignore[call-arg]


def test_input_schema_is_checked_against_the_meta_schema_naming_the_path() -> None:
    bad = {"type": "object", "properties": {"q": {"type": "strng"}}}
    with pytest.raises(ValueError, match=r"input_schema\.properties\.q\.type"):
        make(input_schema=bad)


def test_output_schema_is_checked_against_the_meta_schema() -> None:
    with pytest.raises(ValueError, match=r"output\.schema"):
        make(output=ptc.Output({"minimum": "zero"}, compact_json_render))


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan")])
def test_timeout_must_be_positive_and_finite(timeout: float) -> None:
    with pytest.raises(ValueError, match="timeout_seconds"):
        make(timeout_seconds=timeout)


def test_cooperative_cancel_tools_cannot_have_a_timeout() -> None:
    import dataclasses

    definition = make(timeout_seconds=1.0)
    with pytest.raises(ValueError, match="cooperative_cancel"):
        dataclasses.replace(definition, cooperative_cancel=True)


def test_run_code_may_be_defined_but_never_registered() -> None:
    definition = make(name="run_code")
    runtime = ptc.ToolRuntime()
    with pytest.raises(ValueError, match="reserved"):
        runtime.register(definition)


class Hit(BaseModel):
    title: str
    score: float


def test_tool_decorator_derives_schemas_and_description() -> None:
    @ptc.tool
    def search(query: str, context: ptc.ToolContext, limit: int = 10) -> list[Hit]:
        """Search the index."""
        return []

    assert search.name == "search"
    assert search.description == "Search the index."
    schema: Any = search.input_schema
    assert set(schema["properties"]) == {"query", "limit"}  # context left out
    assert schema["required"] == ["query"]
    assert schema["properties"]["limit"]["default"] == 10
    assert search.output.schema["type"] == "array"


def test_tool_decorator_with_options() -> None:
    def render(value: Any) -> list[dict[str, Any]]:
        return [{"type": "text", "text": f"={value}"}]

    @ptc.tool(
        name="renamed",
        description="Other.",
        concurrency_safe=True,
        timeout_seconds=2,
        render=render,
    )
    def original(x: int) -> int:
        return x

    assert (original.name, original.description) == ("renamed", "Other.")
    assert original.concurrency_safe is True and original.timeout_seconds == 2
    assert original.output.render(3) == [{"type": "text", "text": "=3"}]


class Point(BaseModel):
    x: int
    y: int


@pytest.mark.anyio
async def test_tool_bodies_get_converted_arguments_and_the_context() -> None:
    seen: dict[str, Any] = {}

    async with ptc.ToolRuntime() as runtime:

        @runtime.tool
        async def shift(point: Point, context: ptc.ToolContext, by: int = 1) -> Point:
            """Shift a point."""
            seen["point"] = point
            seen["context"] = context
            return Point(x=point.x + by, y=point.y + by)

        result = await runtime.root.call("shift", {"point": {"x": 1, "y": 2}}, call_id="c1")
    assert result.value == {"x": 2, "y": 3}
    assert isinstance(seen["point"], Point)
    assert seen["context"].execution.call_id == "c1"
    assert seen["context"].signal is seen["context"].execution.signal


@pytest.mark.anyio
async def test_sync_tool_bodies_run_in_a_worker_thread() -> None:
    import threading

    main = threading.get_ident()
    async with ptc.ToolRuntime() as runtime:

        @runtime.tool
        def where() -> bool:
            """Which thread."""
            return threading.get_ident() != main

        result = await runtime.root.call("where", {})
    assert result.value is True


def test_default_render_is_compact_json_text() -> None:
    assert compact_json_render({"a": [1, 2]}) == [{"type": "text", "text": '{"a":[1,2]}'}]
    assert compact_json_render("plain") == [{"type": "text", "text": "plain"}]


# -- title, annotations, meta (kept for MCP) -----------------------------------------------


def test_title_annotations_and_meta_are_kept_frozen() -> None:
    definition = ptc.define_tool(
        name="t",
        description="A tool.",
        input_schema={"type": "object"},
        output=ptc.Output({}, lambda v: []),
        execute=lambda a, c: None,
        title="The T",
        annotations={"readOnlyHint": True},
        meta={"vendor/x": [1, 2]},
    )
    assert definition.title == "The T"
    assert definition.annotations == {"readOnlyHint": True}
    assert definition.meta == {"vendor/x": [1, 2]}
    with pytest.raises(TypeError):
        data(definition.meta)["vendor/x"].append(3)
    # Descriptive only: a read-only hint does not make a tool concurrency-safe by itself.
    assert definition.concurrency_safe is None


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("title", 3, ptc.UsageError),
        ("annotations", ["readOnlyHint"], ptc.UsageError),
        ("meta", {"x": float("nan")}, ptc.DefinitionError),
    ],
)
def test_bad_title_annotations_or_meta_are_refused(field: str, value: Any, error: type) -> None:
    with pytest.raises(error, match=field):
        ptc.define_tool(
            name="t",
            description="A tool.",
            input_schema={"type": "object"},
            output=ptc.Output({}, lambda v: []),
            execute=lambda a, c: None,
            **{field: value},
        )
