"""Simple schemas get their fragment without the type generator: wherever
:func:`sdkgen._simple_types.simple_fragment` answers, its answer is the generator's
(compared on every BFCL sample definition and on generated schemas)."""

from __future__ import annotations

import json
import keyword
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdkgen._fragment import TypeFragment
from sdkgen._simple_types import simple_fragment
from sdkgen._typegen import build_fragment

SAMPLE = Path(__file__).parent.parent / "ptc" / "data" / "bfcl_sample.jsonl"
OUTPUTS: list[Any] = [
    None,
    {},
    {"type": "string"},
    {"type": "array", "items": {"type": "integer"}},
    {"type": "object", "additionalProperties": {"type": "number"}, "title": "Out"},
]


def same(fast: TypeFragment, slow: TypeFragment) -> bool:
    """Equal, parameters compared by key (their order is the schema's, set by the IR)."""
    keyed = {p[0]: p for p in fast.params} == {p[0]: p for p in slow.params}
    rest = (fast.definitions, fast.type_names, fast.typing_names, fast.returns, fast.notes)
    return keyed and rest == (slow.definitions, slow.type_names, slow.typing_names,
                              slow.returns, slow.notes)  # fmt: skip


def sample() -> list[dict[str, Any]]:
    import ptc  # the sample's schemas are made standard first, as ptc does at definition

    schemas = []
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        if line.strip():
            function = json.loads(line)["function"]
            schemas.append(ptc.lenient_schema(function.get("parameters") or {})[0])
    return schemas


@pytest.mark.slow
def test_on_the_bfcl_sample_the_fast_path_is_the_generator() -> None:
    answered = 0
    for index, schema in enumerate(sample()):
        output = OUTPUTS[index % len(OUTPUTS)]
        fast = simple_fragment(schema, output, "P")
        if fast is None:
            continue
        answered += 1
        assert same(fast, build_fragment(schema, output, "P")), schema
    assert answered >= 270  # of 300: the rest need nested TypedDicts or references


INERT = st.fixed_dictionaries(
    {}, optional={"description": st.text(max_size=10), "title": st.just("T"),
                  "default": st.none() | st.integers()}
)  # fmt: skip
SCALAR = st.sampled_from(["string", "integer", "number", "boolean"]).map(lambda t: {"type": t})
ENUM = st.one_of(
    st.lists(st.text(max_size=6), min_size=1, max_size=4, unique=True),
    st.lists(st.integers(-5, 5), min_size=1, max_size=4, unique=True),
).map(lambda values: {"enum": values})
SIMPLE = st.recursive(
    st.one_of(SCALAR, ENUM, st.just({})),
    lambda inner: st.one_of(
        inner.map(lambda item: {"type": "array", "items": item}),
        st.just({"type": "array"}),
        st.just({"type": "object"}),
        inner.filter(bool).map(lambda v: {"type": "object", "additionalProperties": v}),
    ),
    max_leaves=3,
)
PROPERTY = st.tuples(SIMPLE, INERT).map(lambda pair: {**pair[1], **pair[0]})
KEYS = st.from_regex(r"[a-z][a-z_]{0,5}", fullmatch=True).filter(
    lambda key: not keyword.iskeyword(key)
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(KEYS, PROPERTY, min_size=1, max_size=4), st.data())
def test_generated_simple_schemas_get_the_generators_fragment(
    properties: dict[str, Any], draw: st.DataObject
) -> None:
    required = draw.draw(st.lists(st.sampled_from(sorted(properties)), unique=True))
    schema = {"type": "object", "properties": properties, "required": required}
    output = draw.draw(st.sampled_from(OUTPUTS))
    slow = build_fragment(schema, output, "P")
    fast = simple_fragment(schema, output, "P")
    assert fast is not None and same(fast, slow)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {}}}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}},
        {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
        {"type": "object", "properties": {"a": {"type": "string", "format": "date"}}},
        {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}},
        {"type": "object", "properties": {"a": {"enum": ["x", None]}}},
        {"type": "object", "properties": {}},
    ],
)
def test_what_is_not_simple_goes_to_the_generator(schema: dict[str, Any]) -> None:
    assert simple_fragment(schema, None, "P") is None
