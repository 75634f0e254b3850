"""``ptc.lenient_schema``: non-standard forms rewritten to standard JSON Schema, each change
noted with its path; standard schemas come back untouched."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptc
from ptc._schema._checks import MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH
from ptc._schema._validator import compile_schema
from tests._typing import data

DRAFT_04 = "http://json-schema.org/draft-04/schema#"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"


def prop(schema: Any, *, declared: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": {"x": schema}}
    if declared:
        out["$schema"] = declared
    return out


@pytest.mark.parametrize(
    ("before", "after", "note"),
    [
        ({"type": "dict"}, {"type": "object"}, '$.properties.x.type: "dict" -> "object"'),
        ({"type": "HashMap"}, {"type": "object"}, '"HashMap" -> "object"'),
        ({"type": "float"}, {"type": "number"}, '"float" -> "number"'),
        ({"type": "double"}, {"type": "number"}, '"double" -> "number"'),
        ({"type": "int"}, {"type": "integer"}, '"int" -> "integer"'),
        ({"type": "long"}, {"type": "integer"}, '"long" -> "integer"'),
        ({"type": "Integer"}, {"type": "integer"}, '"Integer" -> "integer"'),
        ({"type": "tuple"}, {"type": "array"}, '"tuple" -> "array"'),
        ({"type": "list"}, {"type": "array"}, '"list" -> "array"'),
        ({"type": "ArrayList"}, {"type": "array"}, '"ArrayList" -> "array"'),
        ({"type": "Array"}, {"type": "array"}, '"Array" -> "array"'),
        ({"type": "set"}, {"type": "array", "uniqueItems": True}, '"uniqueItems": true'),
        ({"type": "bool"}, {"type": "boolean"}, '"bool" -> "boolean"'),
        ({"type": "Boolean"}, {"type": "boolean"}, '"Boolean" -> "boolean"'),
        ({"type": "str"}, {"type": "string"}, '"str" -> "string"'),
        ({"type": "String"}, {"type": "string"}, '"String" -> "string"'),
        ({"type": "char"}, {"type": "string"}, '"char" -> "string"'),
        ({"type": "STRING"}, {"type": "string"}, '"STRING" -> "string"'),
        ({"type": "any", "description": "d"}, {"description": "d"}, '"any" removed (any value)'),
        ({"type": ""}, {}, '"" removed (any value)'),
        ({"type": "Tensor"}, {}, '"Tensor" removed (not a type; any value)'),
        ({"type": "strng"}, {"type": "string"}, '"strng" -> "string"'),
        ({"type": ["int", "null"]}, {"type": ["integer", "null"]}, '-> ["integer", "null"]'),
        ({"type": ["string", "any"]}, {}, "removed (any value)"),
        ({"type": ["string", "string"]}, {"type": ["string"]}, "(each type once)"),
        ({"type": "List<String>"}, {"type": "array", "items": {"type": "string"}}, '"items"'),
        ({"type": "String[]"}, {"type": "array", "items": {"type": "string"}}, '"items"'),
        (
            {"type": "java.util.Map<String, Integer>"},
            {"type": "object", "additionalProperties": {"type": "integer"}},
            '"additionalProperties": {"type": "integer"}',
        ),
        ({"type": "string", "nullable": True}, {"type": ["string", "null"]}, "(OpenAPI)"),
        (
            {"type": "string", "enum": ["a"], "nullable": True},
            {"type": ["string", "null"], "enum": ["a", None]},
            "(OpenAPI)",
        ),
        ({"type": "string", "nullable": False}, {"type": "string"}, "false (OpenAPI) -> removed"),
        ({"enum": "only"}, {"enum": ["only"]}, '"only" -> ["only"]'),
        (
            {"type": "number", "minimum": 1, "exclusiveMinimum": True},
            {"type": "number", "exclusiveMinimum": 1},
            "true -> 1 (was minimum)",
        ),  # fmt: skip
        (
            {"type": "number", "maximum": 1, "exclusiveMaximum": False},
            {"type": "number", "maximum": 1},
            "false removed (draft-04 form)",
        ),  # fmt: skip
        (
            {"type": "array", "items": [{"type": "float"}], "additionalItems": False},
            {"type": "array", "prefixItems": [{"type": "number"}], "items": False},
            '"additionalItems" -> "items" (2020-12)',
        ),
        ("str", {"type": "string"}, '$.properties.x: "str" -> {"type": "string"}'),
    ],
)
def test_non_standard_forms_become_standard_with_a_note_naming_the_path(
    before: Any, after: dict[str, Any], note: str
) -> None:
    schema, notes = ptc.lenient_schema(prop(before))
    assert schema == prop(after)
    assert any(note in n for n in notes), notes
    assert all(n.startswith("$.") for n in notes)
    compile_schema(schema, "lenient")  # standard now


def test_forms_valid_in_the_declared_dialect_are_kept() -> None:
    for schema in (
        prop({"type": "array", "items": [{"type": "number"}]}, declared=DRAFT_07),
        prop({"type": "number", "minimum": 1, "exclusiveMinimum": True}, declared=DRAFT_04),
    ):
        assert ptc.lenient_schema(schema) == (schema, ())


def test_required_flags_on_properties_move_to_the_parent() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "required": True},
            "b": {"type": "string", "required": False},
            "c": {"type": "string", "optional": True},
        },
        "required": ["c", "c"],
    }
    fixed, notes = ptc.lenient_schema(schema)
    assert fixed["required"] == ["a"]
    assert "required" not in data(fixed)["properties"]["a"]
    assert notes == (
        '$.required: ["c", "c"] -> ["c"]',
        "$.properties.a.required: true -> added to the parent's required",
        "$.properties.b.required: false -> removed",
        '$.required: "c" removed (the property is optional)',
    )


def test_draft_04_keeps_no_empty_required_list() -> None:
    fixed, _ = ptc.lenient_schema({"$schema": DRAFT_04, "type": "object", "required": []})
    assert fixed == {"$schema": DRAFT_04, "type": "object"}
    compile_schema(fixed, "draft-04")


def test_an_unknown_dialect_is_dropped_and_tuples_become_lists() -> None:
    fixed, notes = ptc.lenient_schema(
        {"$schema": "http://json-schema.org/schema#", "type": "object", "required": ("a",)}
    )
    assert fixed == {"type": "object", "required": ["a"]}
    assert notes == (
        "$.required: a tuple -> a list",
        '$.$schema: unknown dialect "http://json-schema.org/schema#" removed (2020-12)',
    )


def test_subschemas_everywhere_are_rewritten() -> None:
    schema = {
        "type": "dict",
        "$defs": {"d": {"type": "float"}},
        "properties": {
            "a": {"anyOf": [{"type": "int"}, {"type": "str"}]},
            "b": {"type": "list", "items": {"type": "dict", "properties": {"c": {"type": "bool"}}}},
            "m": {"type": "dict", "additionalProperties": {"type": "long"}},
        },
        "not": {"type": "tuple"},
    }
    fixed, notes = ptc.lenient_schema(schema)
    assert fixed == {
        "type": "object",
        "$defs": {"d": {"type": "number"}},
        "properties": {
            "a": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "b": {
                "type": "array",
                "items": {"type": "object", "properties": {"c": {"type": "boolean"}}},
            },
            "m": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "not": {"type": "array"},
    }
    assert len(notes) == 10


def test_data_that_looks_like_a_schema_is_left_alone() -> None:
    schema = prop({"default": {"type": "dict"}, "enum": [{"type": "float"}], "const": "x"})
    assert ptc.lenient_schema(schema) == (schema, ())


def test_what_cannot_be_rewritten_is_kept_for_define_tool_to_report() -> None:
    schema = prop({"$ref": "https://example.com/s.json", "minimum": "zero"})
    fixed, notes = ptc.lenient_schema(schema)
    assert (fixed, notes) == (schema, ())
    with pytest.raises(ptc.SchemaError):
        compile_schema(fixed, "kept")


def test_the_input_is_never_changed() -> None:
    schema = prop({"type": "HashSet", "nullable": True, "items": [{"type": "int"}]})
    before = copy.deepcopy(schema)
    ptc.lenient_schema(schema)
    assert schema == before


@pytest.mark.parametrize("bad", ["dict", None, ["type"], 3])
def test_a_non_object_is_a_schema_error(bad: Any) -> None:
    with pytest.raises(ptc.SchemaError, match="must be an object"):
        ptc.lenient_schema(bad)


def test_an_oversized_schema_is_refused_before_anything_is_rewritten() -> None:
    # Every property needs a rewrite: the refusal must come first, from the size alone.
    properties = {f"p{i:07d}": {"type": "dict"} for i in range(MAX_SCHEMA_BYTES // 20)}
    with pytest.raises(ptc.SchemaError, match=f"bytes as JSON; the limit is {MAX_SCHEMA_BYTES}"):
        ptc.lenient_schema({"type": "object", "properties": properties})


def test_an_absurdly_deep_schema_is_a_schema_error_not_a_recursion_error() -> None:
    deep: dict[str, Any] = {"type": "str"}
    for _ in range(3000):
        deep = {"type": "dict", "properties": {"a": deep}}
    with pytest.raises(ptc.SchemaError, match=f"nested deeper than {MAX_SCHEMA_DEPTH} levels"):
        ptc.lenient_schema(deep)


TYPE_NAMES = st.sampled_from(
    ["string", "integer", "number", "boolean", "object", "array", "null", "dict", "float",
     "tuple", "any", "", "String", "HashMap", "ArrayList", "Integer", "long", "double", "int",
     "list", "set", "bool", "str", "char", "Boolean", "Array", "Tensor", "List<String>"]
)  # fmt: skip


def _schemas() -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.builds(lambda t: {"type": t}, TYPE_NAMES)
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.builds(
                lambda t, props: {"type": t, "properties": props},
                TYPE_NAMES,
                st.dictionaries(st.text(min_size=1, max_size=5), inner, max_size=3),
            ),
            st.builds(lambda t, item: {"type": t, "items": item}, TYPE_NAMES, inner),
            st.builds(lambda items: {"anyOf": items}, st.lists(inner, min_size=1, max_size=3)),
        ),
        max_leaves=12,
    )


@given(_schemas())
def test_the_result_is_standard_and_a_fixed_point(schema: dict[str, Any]) -> None:
    fixed, _ = ptc.lenient_schema(schema)
    compile_schema(fixed, "generated")
    assert ptc.lenient_schema(fixed) == (fixed, ())


_KEYS = st.sampled_from(
    ["type", "properties", "items", "additionalItems", "prefixItems", "required", "optional",
     "nullable", "enum", "anyOf", "not", "$defs", "dependencies", "minimum",
     "exclusiveMinimum", "additionalProperties", "$schema", "default", "x"]
)  # fmt: skip
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 2),
    st.sampled_from(["dict", "float", "any", "", "List<String>", "Map<", "x[]", "string",
                     "true", DRAFT_04, DRAFT_07, "http://json-schema.org/schema#"]),
)  # fmt: skip
_JSONISH = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(_KEYS, _JSONISH, max_size=5))
@settings(max_examples=300, deadline=None)
def test_any_object_gives_a_schema_and_notes_never_another_exception(
    schema: dict[str, Any],
) -> None:
    before = copy.deepcopy(schema)
    fixed, notes = ptc.lenient_schema(schema)
    assert schema == before and all(n.startswith("$") for n in notes)
    try:
        compile_schema(fixed, "fuzz")
    except ptc.SchemaError:
        return  # what lenient_schema cannot rewrite (e.g. "minimum": "dict") stays
    assert ptc.lenient_schema(fixed) == (fixed, ())
