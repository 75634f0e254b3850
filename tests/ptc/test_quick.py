"""The quick yes for plain schemas (``_schema._quick``): it says "valid" only where jsonschema
does, so validation with it accepts and refuses exactly what jsonschema alone does; and the
schemas ``@tool`` makes from type hints get it."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptc
from ptc._errors import SchemaError
from ptc._json import JSON, freeze
from ptc._schema._checks import DIALECTS
from ptc._schema._quick import quick_check
from ptc._schema._validator import SchemaValidator, compile_schema

NAMES = ["a", "b", "c"]
WORDS = ["a", "b", "x", ""]
TYPES = ["null", "boolean", "integer", "number", "string", "object", "array"]
DIALECT_URIS = {
    "draft-04": "http://json-schema.org/draft-04/schema#",
    "draft-06": "http://json-schema.org/draft-06/schema#",
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
}
assert DIALECT_URIS.keys() == DIALECTS.keys()

# Values: every JSON type, integral floats (an ``integer`` from draft 6 on), booleans next to
# 0 and 1, and strings that are also the schemas' property names and enum members.
values = st.recursive(
    st.none()
    | st.booleans()
    | st.sampled_from([0, 1, -1, 2**70])
    | st.sampled_from([0.0, 1.0, 1.5, -2.0])
    | st.sampled_from(WORDS),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(NAMES), inner),
    max_leaves=8,
)


def _schemas(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keywords: dict[str, st.SearchStrategy[Any]] = {
        "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, unique=True),
        "properties": st.dictionaries(st.sampled_from(NAMES), inner, max_size=3),
        "required": st.lists(st.sampled_from(NAMES), unique=True, max_size=3),
        "additionalProperties": st.booleans() | inner,
        "items": inner,
        "anyOf": st.lists(inner, min_size=1, max_size=3),
        "enum": st.lists(st.sampled_from(WORDS), min_size=1, unique=True)
        | st.lists(values, min_size=1, max_size=3),
        "title": st.just("T"),
        "default": values,
        # Outside the supported set: no quick check for the schema.
        "minimum": st.just(1),
        "const": values,
        "maxLength": st.just(1),
    }
    return st.fixed_dictionaries({}, optional=keywords) | st.booleans()


schemas = st.recursive(
    st.fixed_dictionaries({"type": st.sampled_from(TYPES)}), _schemas, max_leaves=6
)


def jsonschema_only(validator: SchemaValidator) -> SchemaValidator:
    """The same validator without its quick check: jsonschema decides everything."""
    return SchemaValidator(validator._validator, validator.dialect)


@settings(max_examples=400)
@given(schema=schemas, dialect=st.sampled_from(sorted(DIALECTS)), instances=st.lists(values))
def test_quick_yes_only_where_jsonschema_says_valid(
    schema: Any, dialect: str, instances: list[JSON]
) -> None:
    if not isinstance(schema, dict):
        schema = {"anyOf": [schema]}
    schema = {**schema, "$schema": DIALECT_URIS[dialect]}
    try:
        validator = compile_schema(schema, "s")
    except SchemaError:
        return  # not a schema of this dialect: never validated against
    reference = jsonschema_only(validator)
    quick = quick_check(schema)
    for instance in instances:
        frozen = freeze(instance)
        if quick is not None and quick(frozen):
            assert validator._validator.is_valid(frozen), (schema, instance)
        assert validator.problems(frozen) == reference.problems(frozen)


@pytest.mark.parametrize(
    ("schema", "valid", "not_sure"),
    [
        ({"type": "integer"}, [0, -5, 2**80], [True, 1.5, 1.0, "1", None]),
        ({"type": ["number", "null"]}, [1, 2.5, None], [False, "x"]),
        ({"enum": ["x", "y"], "type": "string"}, ["x"], ["z", 1]),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            [{"a": "x"}, {"a": "x", "z": 1}],
            [{}, {"a": 1}, ["a"]],
        ),
        (
            {"type": "object", "additionalProperties": {"type": "integer"}},
            [{}, {"k": 1}],
            [{"k": "v"}],
        ),
        ({"type": "array", "items": {"type": "boolean"}}, [[], [True]], [[1], {}]),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, ["", None], [0]),
        ({"$schema": DIALECT_URIS["draft-07"], "type": "boolean"}, [False], [0]),
    ],
)
def test_the_quick_check_answers_plain_schemas(
    schema: dict[str, Any], valid: list[JSON], not_sure: list[JSON]
) -> None:
    quick = quick_check(schema)
    assert quick is not None
    for value in valid:
        assert quick(freeze(value)), value
    for value in not_sure:
        assert not quick(freeze(value)), value


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "minimum": 0},
        {"$ref": "#/$defs/x", "$defs": {"x": {}}},
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}},
        {"enum": [1, "1"]},
        {"items": [{"type": "string"}]},
        {"type": "object", "patternProperties": {"x": {}}},
    ],
)
def test_a_schema_beyond_the_supported_keywords_gets_no_quick_check(schema: Any) -> None:
    assert quick_check(schema) is None


def test_the_schemas_tool_makes_from_type_hints_get_the_quick_check() -> None:
    runtime = ptc.ToolRuntime()

    @runtime.tool
    async def f(
        a: int,
        b: str = "x",
        c: float | None = None,
        d: list[int] = [],  # noqa: B006 - a default the schema shows
        e: dict[str, int] | None = None,
        g: Literal["x", "y"] = "x",
        h: bool = True,
    ) -> dict[str, list[str]]:
        """Everything a signature commonly holds."""
        return {}

    arguments = freeze({"a": 1, "c": None, "d": [1, 2], "e": {"k": 3}, "g": "y", "h": False})
    assert quick_check(f.input_schema) is not None
    assert quick_check(f.output.schema) is not None
    assert f.input_validator._quick is not None and f.input_validator._quick(arguments)
    assert f.output_validator._quick is not None and f.output_validator._quick(freeze({"k": ["v"]}))
    assert f.input_validator.problems(freeze({"a": "1"})) == ['$.a: "1" is not of type "integer"']
