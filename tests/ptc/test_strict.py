"""OpenAI strict mode: ``model_tools(format="openai", strict=True)`` and what a strict model's
``null`` for an optional parameter means to the pipeline ("not sent")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

import ptc
from ptc._schema import drop_optional_nulls, strict_schema
from tests._typing import data
from worker.testing import FakeBackend

pytestmark = pytest.mark.anyio


class Filter(BaseModel):
    field: str
    value: str | None = None


async def search(query: str, limit: int = 10, region: str | None = None) -> list[int]:
    """Search."""
    return [limit, 0 if region is None else len(region), len(query)]


async def narrow(filters: list[Filter], exact: bool = False) -> int:
    """Narrow with filters."""
    return len(filters) + exact


@pytest.fixture
async def rt() -> AsyncIterator[ptc.ToolRuntime]:
    async with ptc.ToolRuntime(
        backend=FakeBackend(), containment=ptc.Containment(require=frozenset())
    ) as runtime:
        runtime.register(ptc.tool(search))
        runtime.register(ptc.tool(narrow))
        yield runtime


def by_name(specs: Any, name: str) -> Any:
    return next(s["function"] for s in specs if s["function"]["name"] == name)


async def test_strict_specs_require_every_property_and_make_optional_ones_nullable(
    rt: ptc.ToolRuntime,
) -> None:
    fn = by_name(rt.root.model_tools(format="openai", strict=True), "search")
    schema = fn["parameters"]
    assert fn["strict"] is True
    assert schema["required"] == ["query", "limit", "region"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["query"]["type"] == "string"
    assert schema["properties"]["limit"]["type"] == ["integer", "null"]
    assert "default" not in schema["properties"]["limit"]
    assert "default=10" in schema["properties"]["limit"]["description"]  # kept for the model


async def test_nested_objects_are_strict_too(rt: ptc.ToolRuntime) -> None:
    schema = by_name(rt.root.model_tools(format="openai", strict=True), "narrow")["parameters"]
    nested = schema["$defs"]["Filter"]
    assert nested["required"] == ["field", "value"] and nested["additionalProperties"] is False


async def test_without_strict_the_openai_spec_is_unchanged(rt: ptc.ToolRuntime) -> None:
    plain = by_name(rt.root.model_tools(format="openai"), "search")
    assert "strict" not in plain and plain["parameters"]["required"] == ["query"]


async def test_strict_is_only_for_the_openai_format(rt: ptc.ToolRuntime) -> None:
    with pytest.raises(ptc.ConfigurationError, match="strict=True is for format='openai'"):
        rt.root.model_tools(format="anthropic", strict=True)


async def test_run_code_has_a_strict_spec(rt: ptc.ToolRuntime) -> None:
    code = rt.scope("code")
    code.present_as("code")
    await code.prepare()
    (spec,) = code.model_tools(format="openai", strict=True)
    assert isinstance(spec["function"], dict)
    schema: Any = spec["function"]["parameters"]
    assert spec["function"]["strict"] is True
    assert schema["required"] == ["code", "description"]
    assert schema["properties"]["description"]["type"] == ["string", "null"]
    assert "minLength" not in schema["properties"]["code"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "additionalProperties": {"type": "integer"}},  # a map
        {"type": "object", "properties": {"x": {}}},  # an untyped value
        {"type": "object", "properties": {"x": {"type": "array"}}},  # items untyped
        {"anyOf": [{"type": "object"}, {"type": "null"}]},  # not an object at the root
    ],
)
def test_a_schema_strict_mode_cannot_express_is_left_non_strict(schema: dict[str, Any]) -> None:
    assert strict_schema(schema) is None


async def test_a_tool_that_cannot_be_strict_is_offered_non_strict(rt: ptc.ToolRuntime) -> None:
    async def tag(labels: dict[str, int]) -> int:
        """Tag."""
        return len(labels)

    rt.register(ptc.tool(tag))
    fn = by_name(rt.root.model_tools(format="openai", strict=True), "tag")
    assert fn["strict"] is False and fn["parameters"]["required"] == ["labels"]


async def test_a_null_for_an_optional_parameter_is_not_sent(rt: ptc.ToolRuntime) -> None:
    result = await rt.root.call("search", {"query": "ab", "limit": None, "region": None})
    assert not result.is_error, result.content
    assert data(result.value) == [10, 0, 2]  # the defaults, as if nothing had been sent


async def test_nested_nulls_for_optional_properties_are_dropped_too(rt: ptc.ToolRuntime) -> None:
    arguments = {"filters": [{"field": "a", "value": None}], "exact": None}
    result = await rt.root.call("narrow", arguments)
    assert not result.is_error, result.content and data(result.value) == 1


async def test_a_null_for_a_required_parameter_is_still_invalid(rt: ptc.ToolRuntime) -> None:
    result = await rt.root.call("search", {"query": None})
    assert result.error is not None and result.error.code == "INVALID_ARGS"
    assert "$.query" in result.error.message


async def test_the_body_sees_the_arguments_without_the_dropped_nulls(rt: ptc.ToolRuntime) -> None:
    seen: list[dict[str, Any]] = []

    async def pre(execution: ptc.ToolExecution, nxt: Any) -> Any:
        seen.append(dict(execution.arguments))
        return await nxt()

    rt.on("tools/pre-execute", pre)
    await rt.root.call("search", {"query": "x", "limit": None})
    assert seen == [{"query": "x"}]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(JSON_VALUES)
def test_dropping_nulls_never_touches_a_value_without_optional_nulls(value: Any) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    assert drop_optional_nulls(schema, value) is value
